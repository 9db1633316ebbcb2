package mail

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"codeauth/i18n"
)

// drafts makes one draft of every kind with c.
func drafts(t *testing.T, c Composer) map[Kind]Draft {
	t.Helper()
	at := time.Date(2026, 12, 21, 3, 4, 0, 0, time.UTC)
	out := map[Kind]Draft{}
	add := func(d Draft, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out[d.Kind] = d
	}
	add(c.SignInCode("a@example.com", "482913", 10*time.Minute))
	add(c.ChangeEmailCode("a@example.com", "482913", 10*time.Minute))
	add(c.ChangeEmailLink("n@example.com", "a@example.com", "https://auth.acme.test/auth/verify-email?token=x", 15*time.Minute))
	add(c.EmailChanged("a@example.com", "n@example.com", "https://auth.acme.test/r?token=z", 7*24*time.Hour))
	add(c.Welcome("a@example.com"))
	add(c.AccountDeleted("a@example.com", at))
	add(c.FormerAddressDeleted("old@example.com", "a@example.com", at, at))
	add(c.NewDevice("a@example.com", "Firefox", "Windows", "203.0.113.7", at, 90*24*time.Hour))
	if len(out) != len(Kinds()) {
		t.Fatalf("%d kinds drafted, %d exist", len(out), len(Kinds()))
	}
	return out
}

// Every kind of e-mail is written in every language: its own words, its dates and durations in
// that language, lang and dir on the html element, and no placeholder left over.
func TestEveryKindInEveryLanguage(t *testing.T) {
	base := Composer{SiteName: "Acme", SiteURL: "https://auth.acme.test"}
	english := map[Kind]Message{}
	for _, l := range i18n.All() {
		c := base.In(l.Code())
		for kind, d := range drafts(t, c) {
			if d.Locale != l.Code() {
				t.Fatalf("%s %s: draft in %q", l.Code(), kind, d.Locale)
			}
			m, err := c.Render(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, part := range []string{m.Subject, m.Text, m.HTML} {
				if part == "" || strings.Contains(part, "{{") {
					t.Fatalf("%s %s: a part is empty or has a placeholder left: %q", l.Code(), kind, part)
				}
			}
			if !strings.Contains(m.HTML, `<html lang="`+l.Code()+`" dir="ltr">`) {
				t.Errorf("%s %s: no lang and dir on the html element", l.Code(), kind)
			}
			if l.Code() == i18n.Reference {
				english[kind] = m
			} else if m.Subject == english[kind].Subject || m.Text == english[kind].Text {
				t.Errorf("%s %s: the same words as in English: %q", l.Code(), kind, m.Subject)
			}
			if kind == KindSignInCode && !strings.Contains(m.Text, l.InMinutes(10*time.Minute)) {
				t.Errorf("%s: the code e-mail does not say when it expires (%q): %s", l.Code(), l.InMinutes(10*time.Minute), m.Text)
			}
			if kind == KindAccountDeleted && !strings.Contains(m.Subject, l.Date(time.Date(2026, 12, 21, 0, 0, 0, 0, time.UTC))) {
				t.Errorf("%s: the deletion date is not the language's: %q", l.Code(), m.Subject)
			}
		}
	}
	de := base.In("de")
	m, _ := de.Render(drafts(t, de)[KindSignInCode])
	if m.Subject != "482913 ist Ihr Code für Acme" || !strings.Contains(m.Text, "Er läuft in 10 Minuten ab.") {
		t.Errorf("German code e-mail: %q\n%s", m.Subject, m.Text)
	}
	m, _ = de.Render(drafts(t, de)[KindNewDevice])
	if !strings.Contains(m.Subject, "Firefox unter Windows") || !strings.Contains(m.Text, "21. Dezember 2026, 03:04 Uhr (UTC)") ||
		!strings.Contains(m.Text, "seit 90 Tagen") {
		t.Errorf("German new-device notice: %q\n%s", m.Subject, m.Text)
	}
}

// A draft of a language the service does not speak, or of none (queued before drafts had one),
// is written in the default language.
func TestUnknownLanguageIsTheDefault(t *testing.T) {
	c := Composer{SiteName: "Acme", SiteURL: "https://auth.acme.test", DefaultLocale: "fr"}
	for _, code := range []string{"", "xx"} {
		d, err := c.In(code).Welcome("a@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if d.Locale != "fr" {
			t.Fatalf("In(%q): draft in %q", code, d.Locale)
		}
		d.Locale = code
		m, err := c.Render(d)
		if err != nil || m.Subject != "Bienvenue sur Acme" {
			t.Fatalf("In(%q): %q, %v", code, m.Subject, err)
		}
	}
}

var tags = regexp.MustCompile(`<[^>]*>`)

// The French templates put a narrow no-break space before : ; ! ?, the German ones say Sie.
func TestTemplateTypography(t *testing.T) {
	entries, err := templateFiles.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := templateFiles.ReadFile("templates/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		text := tags.ReplaceAllString(string(b), " ")
		text = regexp.MustCompile(`\{\{\w+\}\}`).ReplaceAllString(text, "X")
		switch {
		case strings.Contains(e.Name(), ".fr."):
			for i, r := range text {
				if strings.ContainsRune(":;!?", r) && !strings.HasSuffix(text[:i], "\u202f") {
					t.Errorf("%s: %q without a narrow no-break space before it: …%s…", e.Name(), r, text[max(0, i-30):i+1])
				}
			}
		case strings.Contains(e.Name(), ".de."):
			if m := regexp.MustCompile(`(?i)\b(du|dich|dir|dein\w*)\b`).FindString(text); m != "" {
				t.Errorf("%s says %q: the German e-mails say Sie", e.Name(), m)
			}
		}
	}
}
