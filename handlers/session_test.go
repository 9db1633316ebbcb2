package handlers_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"
)

const getSessionPath = "/api/auth/get-session"

type sessionBody struct {
	Session struct {
		ID        string `json:"id"`
		UserID    string `json:"userId"`
		Token     string `json:"token"`
		ExpiresAt string `json:"expiresAt"`
		IPAddress string `json:"ipAddress"`
		UserAgent string `json:"userAgent"`
		CreatedAt string `json:"createdAt"`
		UpdatedAt string `json:"updatedAt"`
	} `json:"session"`
	User struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	} `json:"user"`
}

// getSession reads the session with the given cookies and header pairs.
func getSession(e *testkit.Env, cookies []*http.Cookie, header ...string) *testkit.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return e.Do(testkit.Request{Path: getSessionPath, Cookies: cookies, Header: h})
}

// expectSession fails unless r is a session of userID, and returns it.
func expectSession(t *testing.T, r *testkit.Response, userID string) sessionBody {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("get-session: %d %s", r.Status, r.Body)
	}
	var b sessionBody
	r.Decode(t, &b)
	if b.User.ID != userID || b.Session.UserID != userID {
		t.Fatalf("get-session answered %s, want user %s", r.Body, userID)
	}
	return b
}

// expectNoSession fails unless r is get-session's JSON null.
func expectNoSession(t *testing.T, r *testkit.Response) {
	t.Helper()
	if r.Status != 200 || string(r.Body) != "null" {
		t.Fatalf("get-session: %d %s, want 200 null", r.Status, r.Body)
	}
}

func TestGetSession_NullWithoutSession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r := e.Get(getSessionPath)
		expectNoSession(t, r)
		if r.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("headers %v", r.Header)
		}
	})
}

// Catalogue G60: the session cookie's attributes, and the set-auth-token that mirrors it.
func TestSession_CookieAttributesAndSetAuthToken(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		raw := s.Response.RawSetCookie("auth.session_token")
		for _, want := range []string{"max-age=5184000", "path=/", "HttpOnly", "SameSite=Lax"} {
			if !strings.Contains(raw, want) {
				t.Fatalf("session cookie %q lacks %q", raw, want)
			}
		}
		if strings.Contains(strings.ToLower(raw), "secure") || strings.Contains(strings.ToLower(raw), "domain=") {
			t.Fatalf("plain-http session cookie %q is Secure or has a Domain", raw)
		}
		decoded, err := url.QueryUnescape(s.TokenCookie.Value)
		if err != nil || decoded != s.Bearer {
			t.Fatalf("cookie value %q does not URL-decode to set-auth-token %q", s.TokenCookie.Value, s.Bearer)
		}
		if !strings.HasPrefix(s.Bearer, s.Token+".") || len(s.Bearer) != 43+1+44 {
			t.Fatalf("set-auth-token %q is not token.signature", s.Bearer)
		}
		if !strings.Contains(s.Response.Header.Get("Access-Control-Expose-Headers"), "set-auth-token") {
			t.Fatal("Access-Control-Expose-Headers does not name set-auth-token")
		}
		data := s.Response.RawSetCookie("auth.session_data")
		for _, want := range []string{"max-age=300", "path=/", "HttpOnly", "SameSite=Lax"} {
			if !strings.Contains(data, want) {
				t.Fatalf("cache cookie %q lacks %q", data, want)
			}
		}
		if len(data) > 4096 {
			t.Fatalf("cache cookie is %d bytes, over 4096 (catalogue G60)", len(data))
		}
	})
}

func TestSession_SecureCookiesOverHTTPS(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithSecure())
	code := e.SendCode("alice@example.com")
	r := signIn(e, "alice@example.com", code)
	for _, name := range []string{"__Secure-auth.session_token", "__Secure-auth.session_data"} {
		raw := r.RawSetCookie(name)
		if !strings.Contains(raw, "; secure") && !strings.Contains(raw, "; Secure") {
			t.Fatalf("cookie %s = %q, want Secure", name, raw)
		}
	}
}

// Catalogue G61: the stored session holds a hash of the token, never the token.
func TestSession_TokenIsStoredHashed(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		var sess models.Session
		if err := e.DB.Take(&sess).Error; err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(s.Token))
		if sess.Token != base64.RawURLEncoding.EncodeToString(sum[:]) || strings.Contains(sess.Token, s.Token) {
			t.Fatalf("stored token %q is not the SHA-256 of the session token", sess.Token)
		}
		raw, err := base64.RawURLEncoding.DecodeString(s.Token)
		if err != nil || len(raw) != 32 {
			t.Fatalf("token %q is not 32 random bytes in base64url", s.Token)
		}
	})
}

// Catalogue H73, H74: a bearer token is accepted signed (plain or URL-encoded) and raw.
func TestSession_BearerInBothForms(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		for name, credential := range map[string]string{
			"signed":             "Bearer " + s.Bearer,
			"signed url-encoded": "Bearer " + url.QueryEscape(s.Bearer),
			"raw":                "Bearer " + s.Token,
			"lower-case scheme":  "bearer " + s.Bearer,
		} {
			r := getSession(e, nil, "Authorization", credential)
			b := expectSession(t, r, s.UserID)
			if b.Session.Token != s.Token {
				t.Fatalf("%s: session token %q, want %q", name, b.Session.Token, s.Token)
			}
			if r.Header.Get("set-auth-token") != "" || len(r.Cookies) != 0 {
				t.Fatalf("%s: a plain get-session set cookies or set-auth-token", name)
			}
		}
		r := e.Get("/api/me", "Authorization", "Bearer "+s.Bearer)
		if r.Status != 200 {
			t.Fatalf("/api/me by bearer: %d %s", r.Status, r.Body)
		}
	})
}

// Catalogue G66, H74, H76: a tampered, truncated, foreign or malformed credential is no session.
func TestSession_TamperedCredentialsAreNoSession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		token, sig, _ := strings.Cut(s.Bearer, ".")
		flipped := []byte(sig)
		flipped[3] ^= 1
		otherToken := []byte(token)
		otherToken[0] ^= 1
		bad := []string{
			token + "." + string(flipped),
			string(otherToken) + "." + sig,
			token[:40] + "." + sig,
			s.Token[:42],
			strings.Repeat("A", 43),
			strings.Repeat("x", 3000),
			"not base64 !!",
			s.Bearer + "," + s.Bearer,
		}
		for _, v := range bad {
			expectNoSession(t, getSession(e, nil, "Authorization", "Bearer "+v))
			expectNoSession(t, getSession(e, []*http.Cookie{{Name: "auth.session_token", Value: url.QueryEscape(v)}}))
			e.Get("/api/me", "Authorization", "Bearer "+v).ExpectError(t, 401, "UNAUTHORIZED")
		}
		// Oversized headers are refused whole (catalogue N118).
		getSession(e, nil, "Authorization", "Bearer "+strings.Repeat("x", 9000)).ExpectError(t, 431, "HEADERS_TOO_LARGE")
		// The raw token is no good as a cookie: cookies must be signed.
		expectNoSession(t, getSession(e, []*http.Cookie{{Name: "auth.session_token", Value: s.Token}}))
		// Two Authorization headers are ambiguous and give no session.
		r := e.Do(testkit.Request{Path: getSessionPath, Header: http.Header{"Authorization": {"Bearer " + s.Bearer, "Bearer " + s.Bearer}}})
		expectNoSession(t, r)
		// A token in the query string is ignored (catalogue G67).
		expectNoSession(t, e.Get(getSessionPath+"?token="+url.QueryEscape(s.Token)))
	})
}

func TestMe_RequiresASession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r := e.Get("/api/me")
		r.ExpectError(t, 401, "UNAUTHORIZED")
		if string(r.Body) != `{"message":"Unauthorized","code":"UNAUTHORIZED"}` {
			t.Fatalf("401 body = %s", r.Body)
		}
		s := e.SignIn("alice@example.com")
		r = e.Do(testkit.Request{Path: "/api/me", Cookies: s.Cookies()})
		var me struct {
			User struct {
				ID    string `json:"id"`
				Email string `json:"email"`
				Name  string `json:"name"`
			} `json:"user"`
			Preferences map[string]bool `json:"preferences"`
		}
		r.Decode(t, &me)
		if me.User.ID != s.UserID || me.User.Email != "alice@example.com" {
			t.Fatalf("me = %s", r.Body)
		}
		if v, ok := me.Preferences["marketingOptIn"]; !ok || v {
			t.Fatalf("preferences = %v, want marketingOptIn false", me.Preferences)
		}
		if v, ok := me.Preferences["isTrialEligible"]; !ok || !v {
			t.Fatalf("preferences = %v, want isTrialEligible true", me.Preferences)
		}
	})
}

// Catalogue G62, H75, I80: signing out ends the session for the cookie, the cookie cache and
// the bearer token at once.
func TestSignOut_KillsCookieCacheAndBearer(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		expectSession(t, getSession(e, s.Cookies()), s.UserID)

		r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/sign-out", JSON: map[string]any{}, Cookies: s.Cookies(),
			Header: http.Header{"Origin": {e.URL}}})
		if r.Status != 200 || string(r.Body) != `{"success":true}` {
			t.Fatalf("sign-out: %d %s", r.Status, r.Body)
		}
		for _, name := range []string{"auth.session_token", "auth.session_data"} {
			c := r.Cookie(name)
			if c == nil || c.Value != "" || c.Expires.After(time.Now()) {
				t.Fatalf("sign-out did not expire %s: %q", name, r.RawSetCookie(name))
			}
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("sessions after sign-out = %d", n)
		}
		// Replaying the old cookies, cache included, and the bearer token: nothing.
		expectNoSession(t, getSession(e, s.Cookies()))
		expectNoSession(t, getSession(e, nil, "Authorization", "Bearer "+s.Bearer))
		e.Get("/api/me", "Authorization", "Bearer "+s.Token).ExpectError(t, 401, "UNAUTHORIZED")

		// Signing out by bearer kills the cookie session too; signing out with nothing succeeds.
		s2 := e.SignIn("alice@example.com")
		e.Post("/api/auth/sign-out", nil, "Authorization", "Bearer "+s2.Bearer)
		expectNoSession(t, getSession(e, []*http.Cookie{{Name: s2.TokenCookie.Name, Value: s2.TokenCookie.Value}}))
		if r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/sign-out"}); r.Status != 200 || string(r.Body) != `{"success":true}` {
			t.Fatalf("anonymous sign-out: %d %s", r.Status, r.Body)
		}
	})
}

// Catalogue I: the cookie cache answers without the database, even while the database is down.
func TestCookieCache_AnswersWithTheDatabaseUnavailable(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		sqlDB, _ := e.DB.DB()
		sqlDB.Close()
		if r := e.Get("/readyz"); r.Status != 503 {
			t.Fatalf("readyz with the database closed: %d", r.Status)
		}
		b := expectSession(t, getSession(e, s.Cookies()), s.UserID)
		if b.User.Email != "alice@example.com" || b.Session.Token != s.Token {
			t.Fatalf("cached session = %+v", b)
		}
		// Without the cache the database is needed, and its unavailability is a 503 that says
		// nothing of the cause.
		r := getSession(e, []*http.Cookie{{Name: s.TokenCookie.Name, Value: s.TokenCookie.Value}})
		expectUnavailable(t, r)
		if strings.Contains(string(r.Body), "sql") {
			t.Fatalf("503 body leaks the cause: %s", r.Body)
		}
	})
}

// Catalogue I78-I80: the cache is bound to its session cookie, and a damaged cache is ignored.
func TestCookieCache_BoundToItsSessionCookie(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		a := e.SignIn("a@example.com")
		b := e.SignIn("b@example.com")
		// A's cache next to B's session cookie resolves to B.
		mixed := []*http.Cookie{{Name: b.TokenCookie.Name, Value: b.TokenCookie.Value}, {Name: a.DataCookie.Name, Value: a.DataCookie.Value}}
		r := getSession(e, mixed)
		expectSession(t, r, b.UserID)
		if r.Cookie("auth.session_data") == nil {
			t.Fatal("a foreign cache was not replaced by a fresh one")
		}
		// The cache alone is no session.
		expectNoSession(t, getSession(e, []*http.Cookie{{Name: a.DataCookie.Name, Value: a.DataCookie.Value}}))
		// A flipped byte sends the request to the database, which still knows the session.
		tampered := []byte(a.DataCookie.Value)
		tampered[20] ^= 'A' ^ 'B'
		r = getSession(e, []*http.Cookie{{Name: a.TokenCookie.Name, Value: a.TokenCookie.Value}, {Name: a.DataCookie.Name, Value: string(tampered)}})
		expectSession(t, r, a.UserID)
		if r.Cookie("auth.session_data") == nil {
			t.Fatal("a tampered cache was answered from, not replaced by a database answer")
		}
		// An intact cache is answered without the database, so no new cache is set.
		if r := getSession(e, a.Cookies()); r.Cookie("auth.session_data") != nil {
			t.Fatal("an intact cache was not used")
		}
	})
}

// Catalogue I81, G63: a session revoked elsewhere (another instance) stays visible through a
// browser's cache for at most CookieCacheTTL, never through the database path.
func TestCookieCache_RevocationLagIsBounded(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		if err := e.DB.Where("user_id = ?", s.UserID).Delete(&models.Session{}).Error; err != nil {
			t.Fatal(err)
		}
		expectSession(t, getSession(e, s.Cookies()), s.UserID) // the documented window
		expectNoSession(t, e.Do(testkit.Request{Path: getSessionPath + "?disableCookieCache=true", Cookies: s.Cookies()}))
		e.Clock.Advance(auth.CookieCacheTTL)
		expectNoSession(t, getSession(e, s.Cookies()))
	})
}

// Sessions last 60 days from their last refresh; a request a day or more after the last refresh
// extends them and re-sends the cookie and set-auth-token.
func TestSession_RefreshAfterOneDay(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		e.Clock.Advance(auth.SessionRefreshAge - time.Second)
		r := getSession(e, nil, "Authorization", "Bearer "+s.Bearer)
		if r.Header.Get("set-auth-token") != "" {
			t.Fatal("refreshed before a day had passed")
		}
		e.Clock.Advance(time.Second)
		r = getSession(e, nil, "Authorization", "Bearer "+s.Bearer)
		b := expectSession(t, r, s.UserID)
		if r.Header.Get("set-auth-token") != s.Bearer {
			t.Fatalf("refresh set-auth-token = %q, want the same signed token", r.Header.Get("set-auth-token"))
		}
		if !strings.Contains(r.RawSetCookie("auth.session_token"), "max-age=5184000") {
			t.Fatalf("refresh cookie = %q", r.RawSetCookie("auth.session_token"))
		}
		want := e.Clock.Now().Add(auth.SessionLifetime).Format("2006-01-02T15:04:05.000Z")
		if b.Session.ExpiresAt != want {
			t.Fatalf("expiresAt = %s, want %s", b.Session.ExpiresAt, want)
		}
		// ?disableRefresh leaves the expiry alone.
		e.Clock.Advance(2 * auth.SessionRefreshAge)
		r = e.Do(testkit.Request{Path: getSessionPath + "?disableRefresh=1", Header: http.Header{"Authorization": {"Bearer " + s.Bearer}}})
		if b := expectSession(t, r, s.UserID); b.Session.ExpiresAt != want || r.Header.Get("set-auth-token") != "" {
			t.Fatalf("disableRefresh refreshed: %s", r.Body)
		}
	})
}

// Catalogue G65: a session unused for 60 days is gone; its cookies are expired when presented.
func TestSession_IdleExpiry(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		e.Clock.Advance(auth.SessionLifetime - time.Second)
		expectSession(t, getSession(e, nil, "Authorization", "Bearer "+s.Bearer, "X-Test", "1"), s.UserID)
		s2 := e.SignIn("bob@example.com")
		e.Clock.Advance(auth.SessionLifetime)
		r := getSession(e, []*http.Cookie{{Name: s2.TokenCookie.Name, Value: s2.TokenCookie.Value}})
		expectNoSession(t, r)
		if c := r.Cookie("auth.session_token"); c == nil || c.Value != "" {
			t.Fatal("the expired session's cookie was not expired")
		}
		if n := e.Count(&models.Session{}, "user_id = ?", s2.UserID); n != 0 {
			t.Fatalf("expired session rows = %d, want 0", n)
		}
	})
}

// Catalogue G64: AUTH_SESSION_MAX_AGE ends a session however active it is.
func TestSession_AbsoluteCap(t *testing.T) {
	for _, d := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(d, func(t *testing.T) {
			e := testkit.New(t, d, testkit.WithSessionMaxAge(10*24*time.Hour))
			s := e.SignIn("alice@example.com")
			for day := 1; day < 10; day++ {
				e.Clock.Advance(24 * time.Hour)
				r := getSession(e, nil, "Authorization", "Bearer "+s.Bearer)
				b := expectSession(t, r, s.UserID)
				cap := testkit.Start.Add(10 * 24 * time.Hour).Format("2006-01-02T15:04:05.000Z")
				if b.Session.ExpiresAt > cap {
					t.Fatalf("day %d: expiresAt %s is past the cap %s", day, b.Session.ExpiresAt, cap)
				}
			}
			e.Clock.Advance(24 * time.Hour)
			expectNoSession(t, getSession(e, nil, "Authorization", "Bearer "+s.Bearer))
		})
	}
}

// Catalogue B24, G66: signing in never adopts a session cookie that was already in the browser
// (session fixation): an attacker who plants their own valid session cookie gains nothing.
func TestSession_PlantedCookieIsNotAdopted(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		attacker := e.SignIn("mallory@example.com")
		code := e.SendCode("alice@example.com")
		r := e.Do(testkit.Request{Method: "POST", Path: signInPath, JSON: map[string]any{"email": "alice@example.com", "otp": code},
			Cookies: attacker.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		var body struct {
			Token string
			User  struct{ ID string }
		}
		r.Decode(t, &body)
		if body.Token == "" || body.Token == attacker.Token {
			t.Fatalf("victim's sign-in token %q reuses the planted session", body.Token)
		}
		if c := r.Cookie("auth.session_token"); c == nil || c.Value == attacker.TokenCookie.Value {
			t.Fatal("the planted session cookie was not replaced")
		}
		// The planted session still belongs to the attacker, not to the victim.
		expectSession(t, getSession(e, nil, "Authorization", "Bearer "+attacker.Bearer), attacker.UserID)
		if body.User.ID == attacker.UserID {
			t.Fatal("the victim was signed in as the attacker")
		}
	})
}
