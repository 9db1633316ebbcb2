package middleware

import "testing"

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
		"mobile://host/cb%2f..%2fevil", "mobile://host/cbx", "mobile://other/cb", "myapp://user@callback"} {
		if o.Trusted(s) {
			t.Errorf("Trusted(%q) = true", s)
		}
	}
}

// Catalogue F55: every open-redirect vector is refused; plain relative paths and trusted
// origins are allowed.
func TestSafeRedirect(t *testing.T) {
	o := testOrigins()
	for _, s := range []string{"/", "/account", "/account?tab=x&y=1", "/a/b-c_d.e+f@g", "https://app.example.com/welcome", "myapp://callback/done"} {
		if !o.SafeRedirect(s) {
			t.Errorf("SafeRedirect(%q) = false", s)
		}
	}
	for _, s := range OpenRedirectVectors {
		if o.SafeRedirect(s) {
			t.Errorf("SafeRedirect(%q) = true", s)
		}
	}
}

// FuzzSafeRedirect checks the property that matters: whatever is accepted is either a path on
// this origin or lies under a trusted origin (catalogue R13).
func FuzzSafeRedirect(f *testing.F) {
	for _, s := range append([]string{"/ok", "https://app.example.com/x"}, OpenRedirectVectors...) {
		f.Add(s)
	}
	o := testOrigins()
	f.Fuzz(func(t *testing.T, s string) {
		if !o.SafeRedirect(s) {
			return
		}
		if len(s) > 1 && s[0] == '/' && (s[1] == '/' || s[1] == '\\') {
			t.Fatalf("accepted protocol-relative %q", s)
		}
		if s[0] != '/' && !o.Trusted(s) {
			t.Fatalf("accepted %q", s)
		}
	})
}
