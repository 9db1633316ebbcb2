package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/internal/testkit/vectors"
	"codeauth/models"
)

// postWith sends a JSON POST with cookies and header pairs.
func postWith(e *testkit.Env, path string, body any, cookies []*http.Cookie, header ...string) *testkit.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return e.Do(testkit.Request{Method: "POST", Path: path, JSON: body, Cookies: cookies, Header: h})
}

// Catalogue E44, E47, E54: a state-changing request that carries a cookie must come from a
// trusted origin; nothing changes otherwise.
func TestOrigin_CookieRequestsNeedATrustedOrigin(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		name := map[string]any{"name": "Mallory"}
		postWith(e, updateUserPath, name, s.Cookies(), "Origin", "https://evil.test", "Sec-Fetch-Site", "cross-site").
			ExpectError(t, 403, "INVALID_ORIGIN")
		postWith(e, updateUserPath, name, s.Cookies()).ExpectError(t, 403, "MISSING_OR_NULL_ORIGIN")
		postWith(e, updateUserPath, name, s.Cookies(), "Origin", "null").ExpectError(t, 403, "MISSING_OR_NULL_ORIGIN")
		postWith(e, "/api/auth/sign-out", nil, s.Cookies(), "Referer", "https://evil.test/page").ExpectError(t, 403, "INVALID_ORIGIN")
		// A bearer token does not excuse a cookie from the check.
		postWith(e, "/api/auth/sign-out", nil, s.Cookies(), "Origin", "https://evil.test", "Authorization", "Bearer "+s.Bearer).
			ExpectError(t, 403, "INVALID_ORIGIN")
		var u models.User
		e.DB.Take(&u)
		if u.Name != "" || e.Count(&models.Session{}) != 1 {
			t.Fatalf("a refused request changed something: %+v", u)
		}

		// Trusted: the service's own origin, by Origin or Referer, and same-origin "null".
		for _, h := range [][]string{{"Origin", e.URL}, {"Referer", e.URL + "/account"}, {"Origin", "null", "Sec-Fetch-Site", "same-origin"}} {
			if r := postWith(e, updateUserPath, name, s.Cookies(), h...); r.Status != 200 {
				t.Fatalf("trusted %v: %d %s", h, r.Status, r.Body)
			}
		}
	})
}

// The hybrid-app shells and http://localhost are always trusted, custom schemes by their own
// rules; AUTH_TRUSTED_ORIGINS adds more.
func TestOrigin_AlwaysTrustedAndConfigured(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithTrustedOrigins("https://app.example.com", "myapp://"))
	s := e.SignIn("alice@example.com")
	for _, origin := range []string{"capacitor://localhost", "ionic://localhost", "http://localhost", "https://app.example.com", "myapp://anything"} {
		if r := postWith(e, updateUserPath, map[string]any{"name": "A"}, s.Cookies(), "Origin", origin); r.Status != 200 {
			t.Fatalf("%s: %d %s", origin, r.Status, r.Body)
		}
	}
	for _, origin := range []string{"http://localhost:8080", "https://app.example.com.evil.test", "capacitor://evil", "myappx://x", "HTTPS://EVIL.TEST"} {
		postWith(e, updateUserPath, map[string]any{"name": "A"}, s.Cookies(), "Origin", origin).ExpectError(t, 403, "INVALID_ORIGIN")
	}
	// Expo clients name their origin in expo-origin.
	if r := postWith(e, updateUserPath, map[string]any{"name": "A"}, s.Cookies(), "Expo-Origin", "myapp://"); r.Status != 200 {
		t.Fatalf("expo-origin: %d %s", r.Status, r.Body)
	}
}

// Pure bearer requests, and cookieless requests that show no sign of a browser (native apps,
// curl, Node back ends), are not origin-checked.
func TestOrigin_BearerAndNativeClientsPass(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	if r := e.Post(updateUserPath, map[string]any{"name": "A"}, "Authorization", "Bearer "+s.Bearer, "Origin", "https://elsewhere.test"); r.Status != 200 {
		t.Fatalf("bearer from another origin: %d %s", r.Status, r.Body)
	}
	if r := e.Post(sendPath, map[string]any{"email": "b@example.com", "type": "sign-in"}, "Sec-Fetch-Mode", "cors"); r.Status != 200 {
		t.Fatalf("Node-style client: %d %s", r.Status, r.Body)
	}
}

// Catalogue A9, E45: cookieless browser requests from another site are refused too, so a page
// elsewhere cannot mail codes to anyone or log a visitor into the attacker's account.
func TestOrigin_CrossSiteBrowserRequestsWithoutCookies(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		body := map[string]any{"email": "victim@example.com", "type": "sign-in"}
		e.Post(sendPath, body, "Origin", "https://evil.test", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors").
			ExpectError(t, 403, "INVALID_ORIGIN")
		e.Post(sendPath, body, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate").
			ExpectError(t, 403, "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED")
		e.Post(sendPath, body, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors").
			ExpectError(t, 403, "MISSING_OR_NULL_ORIGIN")
		e.Post(sendPath, body, "Origin", "https://evil.test").ExpectError(t, 403, "INVALID_ORIGIN")
		code := e.SendCode("attacker@example.com")
		e.Post(signInPath, map[string]any{"email": "attacker@example.com", "otp": code}, "Origin", "https://evil.test", "Sec-Fetch-Site", "cross-site").
			ExpectError(t, 403, "INVALID_ORIGIN")
		if n := len(e.Mailer.Find("sign-in-code", "victim@example.com")); n != 0 {
			t.Fatalf("%d codes were mailed to the victim", n)
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("login CSRF opened %d sessions", n)
		}
		// The same requests from the service's own pages pass.
		if r := e.Post(sendPath, body, "Origin", e.URL, "Sec-Fetch-Site", "same-origin"); r.Status != 200 {
			t.Fatalf("same-origin: %d %s", r.Status, r.Body)
		}
	})
}

// Catalogue F55-F57: redirect targets in any request are checked, on POST and GET alike.
func TestOrigin_OpenRedirectVectorsAreRefused(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for _, v := range vectors.OpenRedirect {
			r := e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "sign-in", "callbackURL": v})
			if r.Status != 403 {
				t.Fatalf("callbackURL %q: %d %s", v, r.Status, r.Body)
			}
			r.ExpectError(t, 403, "INVALID_CALLBACK_URL")
			e.Do(testkit.Request{Path: "/api/auth/get-session?callbackURL=" + urlQueryEscape(v)}).ExpectError(t, 403, "INVALID_CALLBACK_URL")
		}
		for field, code := range map[string]string{"redirectTo": "INVALID_REDIRECT_URL", "errorCallbackURL": "INVALID_ERROR_CALLBACK_URL", "newUserCallbackURL": "INVALID_NEW_USER_CALLBACK_URL"} {
			e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "sign-in", field: "//evil.test"}).ExpectError(t, 403, code)
		}
		// Escaped key names are the same fields; every query occurrence is checked.
		for _, body := range []string{`{"email":"a@example.com","type":"sign-in","callback\u0055RL":"https://evil.test"}`,
			`{"email":"a@example.com","type":"sign-in","\u0072edirectTo":"//evil.test"}`} {
			r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json", Body: body})
			if r.Status != 403 {
				t.Fatalf("escaped key %s: %d %s", body, r.Status, r.Body)
			}
		}
		e.Get("/api/auth/get-session?callbackURL=/ok&callbackURL=https://evil.test").ExpectError(t, 403, "INVALID_CALLBACK_URL")
		e.Get("/api/auth/get-session?redirectTo=//evil.test").ExpectError(t, 403, "INVALID_REDIRECT_URL")
		// Catalogue F56: a redirect target that is not a string is a 400, not a 500.
		for _, v := range []any{[]string{"/a"}, map[string]any{"x": 1}, 42} {
			e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "sign-in", "callbackURL": v}).ExpectError(t, 400, "VALIDATION_ERROR")
		}
		if n := len(e.Mailer.Messages()); n != 0 {
			t.Fatalf("%d e-mails sent by refused requests", n)
		}
		// Relative paths and the service's own origin are fine.
		for _, ok := range []string{"/account?tab=profile", e.URL + "/welcome"} {
			if r := e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "sign-in", "callbackURL": ok}); r.Status != 200 {
				t.Fatalf("callbackURL %q: %d %s", ok, r.Status, r.Body)
			}
		}
	})
}

func urlQueryEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "\t", "%09", "\\", "%5C", "<", "%3C", ">", "%3E")
	return r.Replace(s)
}

// Catalogue E50: CORS grants trusted origins only, with credentials and set-auth-token exposed.
func TestCORS(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithTrustedOrigins("https://app.example.com"))
	pre := e.Do(testkit.Request{Method: "OPTIONS", Path: sendPath, Header: http.Header{
		"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"content-type, authorization"}}})
	if pre.Status != 204 || pre.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		pre.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "authorization") || !strings.Contains(pre.Header.Get("Vary"), "Origin") {
		t.Fatalf("trusted preflight: %d %v", pre.Status, pre.Header)
	}
	code := e.SendCode("alice@example.com")
	r := e.Post(signInPath, map[string]any{"email": "alice@example.com", "otp": code}, "Origin", "https://app.example.com")
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "set-auth-token") {
		t.Fatalf("trusted request headers: %v", r.Header)
	}
	if strings.Count(r.Header.Get("Access-Control-Expose-Headers"), "set-auth-token") != 1 {
		t.Fatalf("set-auth-token exposed twice: %q", r.Header.Get("Access-Control-Expose-Headers"))
	}
	for _, origin := range []string{"https://evil.test", "null"} {
		pre := e.Do(testkit.Request{Method: "OPTIONS", Path: sendPath, Header: http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}}})
		if pre.Header.Get("Access-Control-Allow-Origin") != "" || pre.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("untrusted %s was granted: %v", origin, pre.Header)
		}
		get := e.Get(getSessionPath, "Origin", origin)
		if get.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("untrusted %s GET was granted", origin)
		}
	}
}
