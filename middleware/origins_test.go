package middleware

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"codeauth/internal/testkit/vectors"
)

func testOrigins() *Origins {
	return NewOrigins("https://app.example.com", []string{"myapp://callback", "mobile://host/cb", "https://partner.example.org"})
}

// Catalogue E46: only exact web origins, host compared without case.
func TestTrusted_WebOrigins(t *testing.T) {
	o := testOrigins()
	for _, s := range []string{"https://app.example.com", "HTTPS://APP.EXAMPLE.COM", "https://partner.example.org",
		"capacitor://localhost", "ionic://localhost", "http://localhost"} {
		if !o.Trusted(s) {
			t.Errorf("Trusted(%q) = false", s)
		}
	}
	for _, s := range []string{"https://app.example.com.evil.test", "https://evil-app.example.com", "https://sub.app.example.com",
		"https://app.example.com:8443", "http://app.example.com", "null", "", "http://localhost:3000", "https://localhost",
		"capacitor://localhost.evil", "https://app.example.com@evil.test", " https://app.example.com", "https:app.example.com",
		"javascript:alert(1)", "data:text/html,x", "file:///etc/passwd"} {
		if o.Trusted(s) {
			t.Errorf("Trusted(%q) = true", s)
		}
	}
}

// Catalogue E48: custom-scheme origins of mobile apps.
func TestTrusted_CustomSchemes(t *testing.T) {
	o := testOrigins()
	for _, s := range []string{"myapp://callback", "myapp://callback/deep/link", "mobile://host/cb", "mobile://host/cb/ok"} {
		if !o.Trusted(s) {
			t.Errorf("Trusted(%q) = false", s)
		}
	}
	for _, s := range []string{"myapp://callback.attacker.tld", "myappx://callback", "mobile://host/cb/../evil",
		"mobile://host/cb%2f..%2fevil", "mobile://host/cbx", "mobile://other/cb", "myapp://user@callback",
		"mobile://host/evil%252f..%252fcb", "mobile://host/evil/..%252fcb", "mobile://host/cb/%2e%2e/evil"} {
		if o.Trusted(s) {
			t.Errorf("Trusted(%q) = true", s)
		}
	}
}

// Catalogue F55: every open-redirect vector is refused; plain relative paths and trusted
// origins are allowed.
func TestSafeRedirect(t *testing.T) {
	o := testOrigins()
	for _, s := range []string{"/", "/account", "/account?tab=x&y=1", "/a/b-c_d.e+f@g", "/a/.b/c..", "/a/...", "/a?x=/../",
		"https://app.example.com/welcome", "myapp://callback/done"} {
		if !o.SafeRedirect(s) {
			t.Errorf("SafeRedirect(%q) = false", s)
		}
	}
	for _, s := range vectors.OpenRedirect {
		if o.SafeRedirect(s) {
			t.Errorf("SafeRedirect(%q) = true", s)
		}
	}
}

// Catalogue F55, ASVS 3.7.2: the pages' own redirect targets (the sign-in page's ?redirect=, the
// guard's way back) follow the same rule: a vector is dropped, never kept.
func TestSafeNext(t *testing.T) {
	for _, s := range []string{"/", "/account", "/account?tab=x&y=1", "/a/.b"} {
		if got := SafeNext(s); got != s {
			t.Errorf("SafeNext(%q) = %q", s, got)
		}
	}
	for _, s := range vectors.OpenRedirect {
		if got := SafeNext(s); got != "" {
			t.Errorf("SafeNext(%q) = %q, want it dropped", s, got)
		}
		if got := SignInURL(s); got != SignInPath {
			t.Errorf("SignInURL(%q) = %q, want %q", s, got, SignInPath)
		}
		if got := ReauthURL(s); got != SignInPath+"?"+ReauthParam+"=1" {
			t.Errorf("ReauthURL(%q) = %q", s, got)
		}
	}
}

// FuzzSafeRedirect checks the property that matters with an oracle of its own: a browser on the
// service's page, resolving an accepted target, stays on the service's origin or lands on a
// configured one (catalogue R13). Browsers read "\\" as "/" in web URLs, so the oracle does too.
func FuzzSafeRedirect(f *testing.F) {
	for _, s := range append([]string{"/ok", "https://app.example.com/x", "myapp://callback/x"}, vectors.OpenRedirect...) {
		f.Add(s)
	}
	o := testOrigins()
	base, _ := url.Parse("https://app.example.com/auth/sign-in")
	allowed := map[string]bool{"https://app.example.com": true, "https://partner.example.org": true,
		"http://localhost": true, "capacitor://localhost": true, "ionic://localhost": true}
	f.Fuzz(func(t *testing.T, s string) {
		if !o.SafeRedirect(s) {
			return
		}
		if strings.ContainsAny(s, "\\\t\r\n ") {
			t.Fatalf("accepted %q, which browsers rewrite", s)
		}
		target, err := base.Parse(strings.ReplaceAll(s, "\\", "/"))
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", s, err)
		}
		switch target.Scheme {
		case "https", "http":
			if !allowed[target.Scheme+"://"+target.Host] || target.User != nil {
				t.Fatalf("accepted %q, which leads to %s", s, target)
			}
			// A path the browser makes "//host" is another host to whatever reads it again as a
			// URL (a redirect parameter passed on, a client-side router).
			if strings.HasPrefix(s, "/") && strings.HasPrefix(target.Path, "//") {
				t.Fatalf("accepted %q, which the browser resolves to the path %q", s, target.Path)
			}
		case "myapp":
			if target.Host != "callback" {
				t.Fatalf("accepted %q for host %q", s, target.Host)
			}
		case "mobile":
			if target.Host != "host" || !strings.HasPrefix(path.Clean(target.Path)+"/", "/cb/") {
				t.Fatalf("accepted %q for %s", s, target)
			}
		case "capacitor", "ionic":
			if target.Host != "localhost" {
				t.Fatalf("accepted %q", s)
			}
		default:
			t.Fatalf("accepted %q with scheme %q", s, target.Scheme)
		}
	})
}
