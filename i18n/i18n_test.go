package i18n_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeauth/i18n"

	"github.com/BurntSushi/toml"
	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
)

// messages parses every message file: language code -> message id -> message.
func messages(t *testing.T) map[string]map[string]*goi18n.Message {
	t.Helper()
	files, err := i18n.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]*goi18n.Message{}
	for code, data := range files {
		mf, err := goi18n.ParseMessageFileBytes(data, code+".toml", map[string]goi18n.UnmarshalFunc{"toml": toml.Unmarshal})
		if err != nil {
			t.Fatalf("locales/%s.toml: %v", code, err)
		}
		out[code] = map[string]*goi18n.Message{}
		for _, m := range mf.Messages {
			out[code][m.ID] = m
		}
	}
	if len(out) < 4 {
		t.Fatalf("%d languages, want at least en, de, fr, es", len(out))
	}
	return out
}

// forms are a message's texts by plural form.
func forms(m *goi18n.Message) map[string]string {
	out := map[string]string{}
	for form, s := range map[string]string{"zero": m.Zero, "one": m.One, "two": m.Two, "few": m.Few, "many": m.Many, "other": m.Other} {
		if s != "" {
			out[form] = s
		}
	}
	return out
}

var valueName = regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)

// values are the names of the values a text fills in.
func values(s string) []string {
	var out []string
	for _, m := range valueName.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Every language has exactly the reference's keys: a key missing from a language, or one the
// reference lacks (a typo, a message left behind), fails here. Each message is plural where the
// reference's is, and fills in the same values.
func TestEveryLanguageHasTheReferenceKeys(t *testing.T) {
	all := messages(t)
	ref := all[i18n.Reference]
	for code, msgs := range all {
		if code == i18n.Reference {
			continue
		}
		for id, want := range ref {
			got, ok := msgs[id]
			if !ok {
				t.Errorf("locales/%s.toml lacks %q (%s: %q)", code, id, i18n.Reference, want.Other)
				continue
			}
			if (want.One != "") != (got.One != "") {
				t.Errorf("locales/%s.toml: %q is plural in one language and not in the other", code, id)
			}
			wantValues := values(strings.Join(slices.Collect(func(yield func(string) bool) {
				for _, s := range forms(want) {
					yield(s)
				}
			}), " "))
			for form, s := range forms(got) {
				have := values(s)
				for _, v := range wantValues {
					// A singular may say its number in words ("in einer Minute").
					if !slices.Contains(have, v) && !(v == "Count" && form == "one") {
						t.Errorf("locales/%s.toml: %q (%s) does not fill in {{.%s}}: %q", code, id, form, v, s)
					}
				}
				for _, v := range have {
					if !slices.Contains(wantValues, v) {
						t.Errorf("locales/%s.toml: %q (%s) fills in {{.%s}}, which is never given: %q", code, id, form, v, s)
					}
				}
			}
		}
		for id := range msgs {
			if _, ok := ref[id]; !ok {
				t.Errorf("locales/%s.toml has %q, which %s.toml lacks", code, id, i18n.Reference)
			}
		}
	}
}

// Every plural message has every form its language's CLDR rules ask for: French and Spanish have
// "many" for a million, which a message without it could not say.
func TestPluralMessagesHaveEveryForm(t *testing.T) {
	for id, m := range messages(t)[i18n.Reference] {
		if m.One == "" {
			continue
		}
		for _, l := range i18n.All() {
			for _, n := range []int{0, 1, 2, 5, 21, 101, 1000000} {
				if got := l.Tn(id, n, map[string]any{"Email": "a@example.com", "Length": "6", "Device": "x"}); got == id || strings.Contains(got, "no value") {
					t.Errorf("%s: %q for %d = %q", l.Code(), id, n, got)
				}
			}
		}
	}
}

// Plural forms follow each language's rules: one minute, five minutes.
func TestPlurals(t *testing.T) {
	for _, c := range []struct {
		code string
		n    int
		want string
	}{
		{"en", 1, "in 1 minute"}, {"en", 5, "in 5 minutes"},
		{"de", 1, "in einer Minute"}, {"de", 5, "in 5 Minuten"},
		{"fr", 1, "dans 1\u00a0minute"}, {"fr", 5, "dans 5\u00a0minutes"},
		{"es", 1, "en un minuto"}, {"es", 5, "en 5 minutos"},
	} {
		l, _ := i18n.Lookup(c.code)
		if got := l.InMinutes(time.Duration(c.n) * time.Minute); got != c.want {
			t.Errorf("%s: InMinutes(%d min) = %q, want %q", c.code, c.n, got, c.want)
		}
	}
	de, _ := i18n.Lookup("de")
	fr, _ := i18n.Lookup("fr")
	for _, c := range []struct {
		l    *i18n.Locale
		id   string
		n    int
		want string
	}{
		{i18n.English(), "devices.signed_out_others", 1, "Signed out 1 other device."},
		{i18n.English(), "devices.signed_out_others", 3, "Signed out 3 other devices."},
		{de, "devices.active_hours", 1, "Vor 1 Stunde aktiv"},
		{de, "devices.active_hours", 2, "Vor 2 Stunden aktiv"},
		// French counts 0 and 1 as singular, and keeps a number with its unit.
		{fr, "retry.seconds", 0, "Veuillez réessayer dans 0\u00a0seconde."},
		{fr, "retry.seconds", 2, "Veuillez réessayer dans 2\u00a0secondes."},
	} {
		if got := c.l.Tn(c.id, c.n, nil); got != c.want {
			t.Errorf("%s: %s(%d) = %q, want %q", c.l.Code(), c.id, c.n, got, c.want)
		}
	}
	// Partial minutes round up: a code with 9 minutes 10 seconds left works for 10.
	if got := i18n.English().InMinutes(9*time.Minute + 10*time.Second); got != "in 10 minutes" {
		t.Errorf("InMinutes(9m10s) = %q", got)
	}
}

func TestDatesAndDevices(t *testing.T) {
	first := time.Date(2026, 12, 1, 15, 4, 0, 0, time.UTC)
	cases := map[string][4]string{
		"en": {"1 December 2026", "1 December 2026, 15:04 UTC", "Chrome on macOS", "Safari on iPhone"},
		"de": {"1. Dezember 2026", "1. Dezember 2026, 15:04 Uhr (UTC)", "Chrome unter macOS", "Safari auf dem iPhone"},
		"fr": {"1er décembre 2026", "1er décembre 2026 à 15:04 UTC", "Chrome sous macOS", "Safari sur iPhone"},
		"es": {"1 de diciembre de 2026", "1 de diciembre de 2026, a las 15:04 (UTC)", "Chrome en macOS", "Safari en iPhone"},
	}
	for code, want := range cases {
		l, ok := i18n.Lookup(code)
		if !ok {
			t.Fatalf("no %s", code)
		}
		got := [4]string{l.Date(first), l.DateTime(first), l.DeviceName("Chrome", "macOS"), l.DeviceName("Safari", "iPhone")}
		if got != want {
			t.Errorf("%s: %q, want %q", code, got, want)
		}
		if l.DeviceName("", "") == "" || l.DeviceName("okhttp", "") != "okhttp" {
			t.Errorf("%s: the unknown device or an app's name", code)
		}
	}
	fr, _ := i18n.Lookup("fr")
	if got := fr.Date(time.Date(2026, 3, 21, 0, 0, 0, 0, time.UTC)); got != "21 mars 2026" {
		t.Errorf("fr: %q", got)
	}
}

// The language of a request: a language switch's choice, else Accept-Language, else the default.
func TestNegotiation(t *testing.T) {
	de, _ := i18n.Lookup("de")
	n := i18n.NewNegotiator(de)
	for _, c := range []struct{ cookie, accept, want string }{
		{"", "", "de"},
		{"", "fr-CH, en;q=0.5", "fr"},
		{"", "ja, es;q=0.3", "es"},
		{"", "ja", "de"},
		{"", "*", "de"},
		{"", "en-GB,en;q=0.9", "en"},
		{"", "garbage;;;q=x", "de"},
		{"", strings.Repeat("en,", 300), "de"},
		{"es", "fr", "es"},
		{"ES", "", "es"},
		{"xx", "fr", "fr"},
	} {
		if got := n.Choose(c.cookie, c.accept).Code(); got != c.want {
			t.Errorf("Choose(%q, %q) = %s, want %s", c.cookie, c.accept, got, c.want)
		}
	}
}

// French puts a narrow no-break space (U+202F) before : ; ! ? and none of the four is left
// without it; German addresses the reader formally (Sie), never with du.
func TestTypography(t *testing.T) {
	all := messages(t)
	for id, m := range all["fr"] {
		for _, s := range forms(m) {
			if bad := FrenchPunctuation(s); bad != "" {
				t.Errorf("fr %q: %s in %q", id, bad, s)
			}
		}
	}
	for id, m := range all["de"] {
		for _, s := range forms(m) {
			if informal.MatchString(s) {
				t.Errorf("de %q addresses the reader with du: %q", id, s)
			}
		}
	}
}

// informal finds the German familiar "du" and its forms.
var informal = regexp.MustCompile(`(?i)\b(du|dich|dir|dein|deine|deinen|deinem|deiner|euch|euer)\b`)

var placeholder = regexp.MustCompile(`\{\{[^}]*\}\}`)

// FrenchPunctuation reports a : ; ! or ? of French text s that does not follow a narrow no-break
// space (values, URLs and times left aside), or "".
func FrenchPunctuation(s string) string {
	s = placeholder.ReplaceAllString(s, "X")
	for i, r := range s {
		if !strings.ContainsRune(":;!?", r) {
			continue
		}
		before := s[:i]
		if strings.HasSuffix(before, "\u202f") || strings.HasSuffix(before, "https") || strings.HasSuffix(before, "http") {
			continue
		}
		if r == ':' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
			continue // a time, 15:04
		}
		return strconv.Quote(string(r)) + " at " + strconv.Itoa(i)
	}
	return ""
}

// keyLiteral is a string that looks like a message key: section.name.
var keyLiteral = regexp.MustCompile(`^[a-z_]+\.[a-z0-9_]+$`)

// Every key the code uses exists in the reference language, and every key of the reference is
// used somewhere: a key is written out whole where it is used (a string literal in Go, or in a
// templ component), so the sources are searched for literals of the files' sections.
func TestKeysUsedInCodeExist(t *testing.T) {
	ref := messages(t)[i18n.Reference]
	sections := map[string]bool{}
	for id := range ref {
		sections[strings.SplitN(id, ".", 2)[0]] = true
	}
	used := map[string][]string{}
	note := func(lit, where string) {
		if keyLiteral.MatchString(lit) && sections[strings.SplitN(lit, ".", 2)[0]] {
			used[lit] = append(used[lit], where)
		}
	}
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".templ"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range regexp.MustCompile(`"([^"\n]*)"`).FindAllStringSubmatch(string(b), -1) {
				note(m[1], path)
			}
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") && !strings.HasSuffix(path, "_templ.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			var s scanner.Scanner
			s.Init(fset.AddFile(path, -1, len(b)), b, nil, 0)
			for {
				_, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if tok == token.STRING {
					if v, err := strconv.Unquote(lit); err == nil {
						note(v, path)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) < 50 {
		t.Fatalf("found %d keys in the sources: is the test run from i18n/?", len(used))
	}
	for key, where := range used {
		if _, ok := ref[key]; !ok {
			t.Errorf("%s uses %q, which locales/%s.toml lacks", where[0], key, i18n.Reference)
		}
	}
	for id := range ref {
		if _, ok := used[id]; !ok {
			t.Errorf("locales/%s.toml has %q, which no code uses", i18n.Reference, id)
		}
	}
}
