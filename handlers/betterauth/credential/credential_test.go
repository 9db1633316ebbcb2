package credential

import (
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

const secretA = "secret-a-0123456789-0123456789-01"

// newToken returns a token of the shape auth issues: 32 random bytes, base64url.
func newToken(t testing.TB) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestSignedTokens(t *testing.T) {
	s := NewSigner([]byte(secretA))
	token := newToken(t)
	signed := s.Sign(token)
	for _, v := range []string{signed, url.QueryEscape(signed), url.PathEscape(signed)} {
		if got, ok := s.Verify(v); !ok || got != token {
			t.Fatalf("Verify(%q) = %q, %v", v, got, ok)
		}
	}
	// The signature in the base64url alphabet is accepted too (better-auth's verifier does).
	tok, sig, _ := strings.Cut(signed, ".")
	raw, _ := base64.StdEncoding.DecodeString(sig)
	if got, ok := s.Verify(tok + "." + base64.URLEncoding.EncodeToString(raw)); !ok || got != token {
		t.Fatal("base64url signature refused")
	}
	other := NewSigner([]byte("secret-b-0123456789-0123456789-01"))
	if _, ok := other.Verify(signed); ok {
		t.Fatal("a token signed with another secret verified")
	}
	for _, bad := range []string{"", ".", token, token + ".", "." + sig, token + "." + sig[:43], token + "x." + sig, "%zz", strings.Repeat("a", 300)} {
		if _, ok := s.Verify(bad); ok {
			t.Fatalf("Verify(%q) accepted", bad)
		}
	}
	if got, ok := s.Bearer(token); !ok || got != token {
		t.Fatal("raw bearer token refused")
	}
	if _, ok := s.Bearer(token[:42]); ok {
		t.Fatal("truncated bearer token accepted")
	}
}

// The cookie names are better-auth's: <prefix>.session_token and <prefix>.session_data, with
// __Secure- in front over https.
func TestCookieNames(t *testing.T) {
	for _, c := range []struct {
		prefix      string
		secure      bool
		token, data string
	}{
		{"better-auth", false, "better-auth.session_token", "better-auth.session_data"},
		{"auth", true, "__Secure-auth.session_token", "__Secure-auth.session_data"},
	} {
		if token, data := CookieNames(c.prefix, c.secure); token != c.token || data != c.data {
			t.Errorf("CookieNames(%q, %v) = %q, %q; want %q, %q", c.prefix, c.secure, token, data, c.token, c.data)
		}
	}
}

// BenchmarkVerifySignedToken measures the signature check every cookie or bearer request pays.
func BenchmarkVerifySignedToken(b *testing.B) {
	s := NewSigner([]byte(secretA))
	signed := url.QueryEscape(s.Sign(newToken(b)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.Verify(signed); !ok {
			b.Fatal("not verified")
		}
	}
}
