package handlers_test

import (
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
)

// A browser's cookie cache replayed after its session ended. An instance started since (a
// restart, or a new instance of a rolling deploy), which never learned of the revocation, no
// longer takes the cache's word for the session. An instance that was running but did not see
// the revocation may answer from the cache for its documented five minutes, but a JWT it signs
// meanwhile expires JWTLifetime after the cache was sealed, so no JWT outlives the revocation by
// more than JWTLifetime (catalogue #48, immediate revocation; JWTs for other back ends).
func TestRevokedSession_CacheAfterARestartAndJWTs(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		running := e.Sibling() // up before the revocation, and never told of it
		s := e.SignIn("gone@example.com")
		cookies := s.Cookies()
		get := func(env *testkit.Env, path string) *testkit.Response {
			return env.Do(testkit.Request{Method: "GET", Path: path, Cookies: cookies})
		}
		if r := get(running, "/api/auth/get-session"); r.Status != 200 || r.Header.Get("set-auth-jwt") == "" {
			t.Fatalf("before the sign-out: %d %q", r.Status, r.Header.Get("set-auth-jwt"))
		}
		e.Clock.Advance(time.Second)
		signedOut := e.Clock.Now()
		if r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/sign-out", Body: "{}", ContentType: "application/json",
			Cookies: cookies, Header: map[string][]string{"Origin": {e.URL}}}); r.Status != 200 {
			t.Fatalf("sign-out: %d %s", r.Status, r.Body)
		}
		e.Clock.Advance(time.Second)
		restarted := e.Sibling()
		for _, path := range []string{"/api/me", "/account"} {
			if r := get(restarted, path); r.Status == 200 {
				t.Fatalf("after a restart the signed-out cache still opens %s", path)
			}
		}
		if r := get(restarted, "/api/auth/get-session"); r.Status != 200 || string(r.Body) != "null" || r.Header.Get("set-auth-jwt") != "" {
			t.Fatalf("after a restart get-session: %d %s %q", r.Status, r.Body, r.Header.Get("set-auth-jwt"))
		}

		e.Clock.Advance(3 * time.Minute) // within the cache's five minutes
		r := get(running, "/api/auth/get-session")
		jwt := r.Header.Get("set-auth-jwt")
		if r.Status != 200 || jwt == "" {
			t.Fatalf("the running instance within the window: %d %s", r.Status, r.Body)
		}
		_, claims, err := verifyJWT(t, fetchJWKS(t, running), jwt)
		if err != nil {
			t.Fatal(err)
		}
		if outlives := time.Unix(claims.Exp, 0).Sub(signedOut); outlives > auth.JWTLifetime {
			t.Fatalf("a JWT signed from the cache outlives the sign-out by %s", outlives)
		}

		// A live session's cache is still answered, with a JWT, by an instance started after it
		// was sealed: read from the database once, and cached afresh.
		live := e.SignIn("live@example.com")
		e.Clock.Advance(time.Second)
		later := e.Sibling()
		r = later.Do(testkit.Request{Method: "GET", Path: "/api/auth/get-session", Cookies: live.Cookies()})
		if r.Status != 200 || r.Header.Get("set-auth-jwt") == "" || r.Cookie("auth.session_data") == nil {
			t.Fatalf("a live session on a new instance: %d %s %q", r.Status, r.Body, r.Header.Get("set-auth-jwt"))
		}
	})
}
