package auth

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeEmail(t *testing.T) {
	valid := map[string]string{
		"alice@example.com":          "alice@example.com",
		"  ALICE@Example.COM\t":      "alice@example.com",
		"Alice.B+tag@Sub.Example.io": "alice.b+tag@sub.example.io",
		"o'neil@example.ie":          "o'neil@example.ie",
		"user@exämple.test":          "user@xn--exmple-cua.test",
		"user@XN--EXMPLE-CUA.test":   "user@xn--exmple-cua.test",
		"a@b.co":                     "a@b.co",
		"x@123.example":              "x@123.example",
	}
	for in, want := range valid {
		got, err := NormalizeEmail(in)
		if err != nil || got != want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	invalid := []string{
		"", " ", "alice", "alice@", "@example.com", "alice@@example.com", "alice@example.com@evil.test",
		"Alice <alice@example.com>", "alice@example.com (c)", `"alice"@example.com`, "alice@localhost",
		"alice@[1.2.3.4]", "alice@1.2.3.4", "a@example.com\r\nBcc: x@y.z", "a@example.com\n", "a\x00@example.com",
		"\u212aate@example.com", "\u0130van@example.com", "m\u0131ke@example.com", "\u017fam@example.com",
		"\uff41lice@example.com", "\u0430lice@example.com", "al..ice@example.com", ".alice@example.com",
		"alice.@example.com", "alice@example..com", "alice@-x.com", "alice@x-.com", "alice@x_y.com",
		"=?utf-8?q?alice=40example.com?=@evil.test", strings.Repeat("a", 65) + "@example.com",
		"a@" + strings.Repeat("b", 64) + ".com", strings.Repeat("a", 60) + "@" + strings.Repeat("b.", 100) + "com",
		"alice@example.com,bob@example.com", "a b@example.com", "a@exa mple.com", "a@example.com.",
	}
	for _, in := range invalid {
		if got, err := NormalizeEmail(in); err != ErrInvalidEmail {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want ErrInvalidEmail", in, got, err)
		}
	}
}

// FuzzNormalizeEmail checks the properties the rest of the service relies on (catalogue R13):
// a canonical address is ASCII, short, has one '@', no characters that could end a header,
// and normalising it again changes nothing.
func FuzzNormalizeEmail(f *testing.F) {
	for _, seed := range []string{"alice@example.com", " A@B.io ", "user@exämple.test", "a@b@c", "x\r\n@y.z", "\u212a@k.com"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalizeEmail(in)
		if err != nil {
			return
		}
		if len(out) > MaxEmailLength || strings.Count(out, "@") != 1 || !utf8.ValidString(out) {
			t.Fatalf("NormalizeEmail(%q) = %q", in, out)
		}
		for i := 0; i < len(out); i++ {
			if c := out[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(",;<>()\"\\[]:", c) >= 0 || ('A' <= c && c <= 'Z') {
				t.Fatalf("NormalizeEmail(%q) = %q holds %q", in, out, c)
			}
		}
		again, err := NormalizeEmail(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
	})
}
