package middleware

import "testing"

// The kind of a path follows the router: ASCII case folded, trailing slashes ignored, a prefix
// only at a segment boundary.
func TestKindOfPath(t *testing.T) {
	for path, want := range map[string]PathKind{
		"/api": APIPath, "/api/": APIPath, "/API/auth/ok": APIPath, "/Api/Auth/Get-Session/": APIPath, "/api//x": APIPath,
		"/apix": PagePath, "/ap": PagePath, "/API-docs": PagePath, "//api/x": PagePath, "/%61pi/x": PagePath,
		"/static/app.css": StaticPath, "/STATIC": StaticPath, "/\u017ftatic/app.css": PagePath,
		"/healthz": ProbePath, "/READYZ/": ProbePath, "/healthz/x": PagePath, "/healthzz": PagePath,
		"/": PagePath, "": PagePath, "/account": PagePath, "/auth/sign-in": PagePath,
	} {
		if got := KindOfPath(path); got != want {
			t.Errorf("KindOfPath(%q) = %d, want %d", path, got, want)
		}
	}
}

func BenchmarkKindOfPath(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		KindOfPath("/auth/sign-in/")
		KindOfPath("/API/auth/get-session")
	}
}
