package mail

import (
	"os"
	"path/filepath"
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
	add(c.SignInCodeWithLink("a@example.com", "482913", "https://auth.acme.test/auth/sign-in-link?token=x", 10*time.Minute))
	add(c.ChangeEmailCode("a@example.com", "482913", 10*time.Minute))
	add(c.ChangeEmailLink("n@example.com", "a@example.com", "https://auth.acme.test/auth/verify-email?token=x", 15*time.Minute))
	add(c.EmailChanged("a@example.com", "n@example.com", "https://auth.acme.test/r?token=z", 7*24*time.Hour))
	add(c.Welcome("a@example.com"))
	add(c.AccountDeleted("a@example.com", at))
	add(c.FormerAddressDeleted("old@example.com", "a@example.com", at, at))
	add(c.NewDevice("a@example.com", "Firefox", "Windows", "203.0.113.7", at, 90*24*time.Hour))
	add(c.SignInPaused("a@example.com", 25, at))
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

// writeDir makes a folder of templates from name -> content.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// An operator's template replaces the built-in one: for every language without one, for one
// language with one, and the one naming its language wins. Parts and kinds not replaced stay.
func TestOverrides(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"sign-in-code.html":       "<p>ALL {{otp}} {{ site_name }}</p>",
		"sign-in-code.de.html":    "<p>NUR DEUTSCH {{otp}} {{expiresIn}}</p>",
		"sign-in-code.de.subject": "\nCode {{otp}}\n",
		"layout.html":             "<html lang=\"{{lang}}\" dir=\"{{dir}}\"><body>MY LAYOUT {{content}}</body></html>",
		"README.md":               "notes, not a template",
	})
	tpl, err := LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Dir() != dir {
		t.Fatalf("Dir() = %q", tpl.Dir())
	}
	c := Composer{SiteName: "Acme <&>", SiteURL: "https://auth.acme.test", Templates: tpl}
	render := func(code string, kind Kind) Message {
		t.Helper()
		m, err := c.Render(drafts(t, c.In(code))[kind])
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fr := render("fr", KindSignInCode)
	if !strings.Contains(fr.HTML, "<p>ALL 482913 Acme &lt;&amp;&gt;</p>") || !strings.Contains(fr.HTML, "MY LAYOUT") {
		t.Errorf("fr: the all-language replacement is not used, or a value is not escaped: %s", fr.HTML)
	}
	if fr.Subject != "482913 est votre code Acme <&>" || !strings.Contains(fr.Text, "Il expire dans 10\u00a0minutes.") {
		t.Errorf("fr: the parts not replaced should be the built-in ones: %q %q", fr.Subject, fr.Text)
	}
	de := render("de", KindSignInCode)
	if !strings.Contains(de.HTML, "<p>NUR DEUTSCH 482913 in 10 Minuten</p>") || strings.Contains(de.HTML, "ALL") {
		t.Errorf("de: the German replacement does not win over the all-language one: %s", de.HTML)
	}
	if de.Subject != "Code 482913" {
		t.Errorf("de subject %q", de.Subject)
	}
	if w := render("en", KindWelcome); !strings.Contains(w.HTML, "Welcome to Acme &lt;&amp;&gt;") || !strings.Contains(w.HTML, "MY LAYOUT") {
		t.Errorf("a kind not replaced is not the built-in one in the operator's layout: %s", w.HTML)
	}
	// The embedded templates are untouched by another Composer's replacements.
	plain := Composer{SiteName: "Acme", SiteURL: "https://auth.acme.test"}
	if m, _ := plain.Render(drafts(t, plain.In("fr"))[KindSignInCode]); strings.Contains(m.HTML, "ALL") {
		t.Error("the replacement leaked into the embedded templates")
	}
}

// A broken template refuses to load, naming its file and line; every problem is reported.
func TestBrokenTemplatesRefuse(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		symlink string
		want    []string
	}{
		{name: "unknown placeholder", files: map[string]string{"sign-in-code.de.html": "<p>{{otp}}</p>\n<p>{{code}}</p>"},
			want: []string{"sign-in-code.de.html:2: {{code}} is not a value of sign-in-code e-mails"}},
		{name: "unterminated", files: map[string]string{"welcome.txt": "Hello\n\nWelcome to {{site_name"},
			want: []string{"welcome.txt:3:", "not closed"}},
		{name: "not a name", files: map[string]string{"welcome.html": "<p>{{ .SiteName }}</p>"},
			want: []string{"welcome.html:1: {{.SiteName}} is not a placeholder"}},
		{name: "missing the code", files: map[string]string{"sign-in-code.txt": "Your code is on its way."},
			want: []string{"sign-in-code.txt: has no {{otp}}, which every sign-in-code e-mail must show"}},
		{name: "missing the link", files: map[string]string{"change-email-link.fr.html": "<p>Cliquez.</p>"},
			want: []string{"change-email-link.fr.html: has no {{verificationUrl}}"}},
		{name: "layout without content", files: map[string]string{"layout.html": "<html>\n</html>"},
			want: []string{"layout.html: has no {{content}}"}},
		{name: "two-line subject", files: map[string]string{"welcome.es.subject": "Hola\n{{site_name}}\n"},
			want: []string{"welcome.es.subject:2: a subject is one line"}},
		{name: "not UTF-8", files: map[string]string{"welcome.en.txt": "ok\n\xff\xfe"},
			want: []string{"welcome.en.txt:2: not UTF-8"}},
		{name: "misspelt kind", files: map[string]string{"sign-in-cod.html": "{{otp}}"},
			want: []string{"sign-in-cod.html: not a template's name"}},
		{name: "unknown language", files: map[string]string{"welcome.pt.html": "Olá"},
			want: []string{"welcome.pt.html: not a template's name"}},
		{name: "unreadable", symlink: "sign-in-code.de.html",
			want: []string{"sign-in-code.de.html: cannot be read"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t, c.files)
			if c.symlink != "" {
				if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, c.symlink)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadTemplates(dir)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), filepath.Join(dir, "")) || !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	if _, err := LoadTemplates(filepath.Join(t.TempDir(), "nowhere")); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("a folder that does not exist: %v", err)
	}
}
