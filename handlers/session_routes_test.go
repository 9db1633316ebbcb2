package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
)

// better-auth's session management routes (list-sessions, revoke-session, revoke-sessions,
// revoke-other-sessions), delete-user and list-accounts, through the real app on both databases.

type listedSession struct {
	ID, UserID, Token, IPAddress, UserAgent string
	ExpiresAt, CreatedAt, UpdatedAt         time.Time
}

// devices signs one account in n times, each sign-in a device of its own, a second apart so
// "newest first" has an order to show.
func devices(e *testkit.Env, email string, n int) []testkit.Session {
	out := make([]testkit.Session, n)
	for i := range out {
		out[i] = e.SignIn(email)
		e.Clock.Advance(time.Second)
	}
	return out
}

// live reports whether s still gets its session from the database by bearer token.
func live(t *testing.T, e *testkit.Env, s testkit.Session) bool {
	t.Helper()
	r := e.Get("/api/auth/get-session?disableCookieCache=true", bearer(s)...)
	if r.Status != 200 {
		t.Fatalf("get-session: %d %s", r.Status, r.Body)
	}
	return string(r.Body) != "null"
}

func listSessions(t *testing.T, e *testkit.Env, s testkit.Session) []listedSession {
	t.Helper()
	r := e.Get("/api/auth/list-sessions", bearer(s)...)
	if r.Status != 200 {
		t.Fatalf("list-sessions: %d %s", r.Status, r.Body)
	}
	var got []listedSession
	r.Decode(t, &got)
	return got
}

// Every listed session, the caller's own included, carries its handle as its token, never a
// credential (CONTRACT.md); a client finds its own by its id, which get-session gives.
func TestListSessions_NewestFirstWithHandlesNotTokens(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		d := devices(e, "three@example.com", 3)
		other := e.SignIn("other@example.com")
		got := listSessions(t, e, d[0])
		if len(got) != 3 {
			t.Fatalf("%d sessions listed, want the account's 3: %+v", len(got), got)
		}
		var current struct {
			Session struct{ ID, Token string }
		}
		e.Get("/api/auth/get-session", bearer(d[0])...).Decode(t, &current)
		own := 0
		for i, s := range got {
			if s.UserID != d[0].UserID || s.UserID == other.UserID {
				t.Errorf("session %d belongs to %s", i, s.UserID)
			}
			if s.ID == current.Session.ID {
				own++
			}
			// The handle is the id: never the bearer secret or the raw token.
			if s.Token != s.ID || s.Token == current.Session.Token || s.Token == d[i].Token || s.Token == d[2-i].Token || strings.Contains(s.Token, ".") {
				t.Errorf("session %d's token is %q, want its handle %q", i, s.Token, s.ID)
			}
			if i > 0 && !s.CreatedAt.Before(got[i-1].CreatedAt) {
				t.Errorf("sessions are not newest first: %v then %v", got[i-1].CreatedAt, s.CreatedAt)
			}
		}
		if own != 1 {
			t.Errorf("the caller's own session is listed %d times by get-session's id; want once", own)
		}
		// A session past its expiry is not listed.
		e.Clock.Advance(61 * 24 * time.Hour)
		fresh := e.SignIn("three@example.com")
		if got := listSessions(t, e, fresh); len(got) != 1 || got[0].ID == "" {
			t.Fatalf("after the others expired: %+v", got)
		}
	})
}

func TestRevokeSession_EndsThatDeviceAtOnce(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		d := devices(e, "revoke@example.com", 3)
		// The second device has a cookie cache this instance issued: the revocation must stop
		// it too, not only the database.
		cached := func() bool {
			r := e.Do(testkit.Request{Path: "/api/auth/get-session", Cookies: d[1].Cookies()})
			return string(r.Body) != "null"
		}
		if !cached() {
			t.Fatal("the second device has no session before the revocation")
		}
		sessions := listSessions(t, e, d[0])
		var handle string
		for _, s := range sessions {
			if s.CreatedAt.Equal(sessions[1].CreatedAt) {
				handle = s.Token
			}
		}
		r := e.Post("/api/auth/revoke-session", map[string]any{"token": handle}, bearer(d[0])...)
		if r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("revoke-session: %d %s", r.Status, r.Body)
		}
		if live(t, e, d[1]) || cached() {
			t.Fatal("the revoked device still has its session (bearer or cookie cache)")
		}
		if !live(t, e, d[0]) || !live(t, e, d[2]) {
			t.Fatal("revoking one device ended another")
		}
		if n := len(listSessions(t, e, d[0])); n != 2 {
			t.Fatalf("%d sessions after one was revoked, want 2", n)
		}
		// Again: it is gone, and ending it again is no error (a double click), as in better-auth.
		if r := e.Post("/api/auth/revoke-session", map[string]any{"token": handle}, bearer(d[0])...); r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("revoking it again: %d %s", r.Status, r.Body)
		}
		// The raw token of one of the caller's own sessions works as a handle too.
		if r := e.Post("/api/auth/revoke-session", map[string]any{"token": d[2].Token}, bearer(d[0])...); r.Status != 200 {
			t.Fatalf("revoke by raw token: %d %s", r.Status, r.Body)
		}
		if live(t, e, d[2]) {
			t.Fatal("the session revoked by its raw token is still live")
		}
	})
}

// Catalogue: a session of another account cannot be revoked, and the refusal is the answer for
// a handle that names nothing (no way to learn which handles exist).
func TestRevokeSession_AnotherAccountsIsNotFound(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		mine := e.SignIn("me@example.com")
		theirs := e.SignIn("them@example.com")
		theirHandle := listSessions(t, e, theirs)[0].Token
		// better-auth answers {"status":true} whatever the token names: nothing of the caller's
		// to end, and the answer says nothing about which handles exist.
		for _, handle := range []string{theirHandle, theirs.Token, "00000000-0000-4000-8000-000000000000", "nonsense"} {
			r := e.Post("/api/auth/revoke-session", map[string]any{"token": handle}, bearer(mine)...)
			if r.Status != 200 || string(r.Body) != `{"status":true}` {
				t.Errorf("%s: %d %s", handle, r.Status, r.Body)
			}
		}
		if !live(t, e, theirs) || !live(t, e, mine) {
			t.Fatal("a refused revocation ended a session")
		}
		e.Post("/api/auth/revoke-session", map[string]any{}, bearer(mine)...).ExpectError(t, 400, "VALIDATION_ERROR")
	})
}

func TestRevokeOtherSessionsAndAllSessions(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		d := devices(e, "many@example.com", 3)
		other := e.SignIn("bystander@example.com")
		if r := e.Post("/api/auth/revoke-other-sessions", nil, bearer(d[0])...); r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("revoke-other-sessions: %d %s", r.Status, r.Body)
		}
		if !live(t, e, d[0]) || live(t, e, d[1]) || live(t, e, d[2]) || !live(t, e, other) {
			t.Fatal("revoke-other-sessions did not end exactly the other devices of the account")
		}
		more := e.SignIn("many@example.com")
		// By cookie, with a trusted origin, as a browser sends it: the cookies are expired too.
		r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/revoke-sessions", JSON: map[string]any{}, Cookies: d[0].Cookies(),
			Header: http.Header{"Origin": {e.URL}}})
		if r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("revoke-sessions: %d %s", r.Status, r.Body)
		}
		if c := r.Cookie(d[0].TokenCookie.Name); c == nil || c.MaxAge >= 0 && c.Value != "" {
			t.Errorf("revoke-sessions left the session cookie: %+v", c)
		}
		if live(t, e, d[0]) || live(t, e, more) || !live(t, e, other) {
			t.Fatal("revoke-sessions did not end every session of the account, and only those")
		}
	})
}

func TestSessionRoutes_NeedASession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for _, path := range []string{"/api/auth/list-sessions", "/api/auth/list-accounts"} {
			e.Get(path).ExpectError(t, 401, "UNAUTHORIZED")
		}
		for _, path := range []string{"/api/auth/revoke-session", "/api/auth/revoke-sessions", "/api/auth/revoke-other-sessions", "/api/auth/delete-user"} {
			e.Post(path, map[string]any{"token": "x"}).ExpectError(t, 401, "UNAUTHORIZED")
		}
		// A signed-out session cannot list or revoke either.
		s := e.SignIn("gone@example.com")
		e.Post("/api/auth/sign-out", nil, bearer(s)...)
		e.Get("/api/auth/list-sessions", bearer(s)...).ExpectError(t, 401, "UNAUTHORIZED")
	})
}

func TestDeleteUser_StartsTheGracePeriod(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		d := devices(e, "leaving@example.com", 2)
		r := e.Post("/api/auth/delete-user", map[string]any{"callbackURL": "/goodbye"}, bearer(d[1])...)
		if r.Status != 200 || string(r.Body) != `{"success":true,"message":"User deleted"}` {
			t.Fatalf("delete-user: %d %s", r.Status, r.Body)
		}
		if live(t, e, d[0]) || live(t, e, d[1]) {
			t.Fatal("a session outlived the deletion")
		}
		// Signing in during the grace period restores the account, the same one.
		back := e.SignIn("leaving@example.com")
		if back.UserID != d[0].UserID {
			t.Fatalf("signing in after delete-user made account %s, want %s restored", back.UserID, d[0].UserID)
		}
		// A session older than the freshness window must sign in again first.
		e.Clock.Advance(21 * time.Minute)
		e.Post("/api/auth/delete-user", nil, bearer(back)...).ExpectError(t, 400, "SESSION_EXPIRED")
		if !live(t, e, back) {
			t.Fatal("a refused delete-user ended the session")
		}
		// An unsafe callbackURL is refused as on every route.
		e.Post("/api/auth/delete-user", map[string]any{"callbackURL": "https://evil.test/"}, bearer(back)...).ExpectError(t, 403, "INVALID_CALLBACK_URL")
	})
}

func TestListAccounts_IsEmpty(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("accounts@example.com")
		r := e.Get("/api/auth/list-accounts", bearer(s)...)
		if r.Status != 200 || string(r.Body) != "[]" {
			t.Fatalf("list-accounts: %d %s", r.Status, r.Body)
		}
	})
}

// A handle in another spelling of the same UUID ({braces}, urn:uuid:, upper case, no hyphens)
// names no session, the same on both databases, and is never a 500 (PostgreSQL's uuid type
// parses some spellings and refuses others).
func TestRevokeSession_OnlyTheCanonicalHandle(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("spelling@example.com")
		h := listSessions(t, e, s)[0].ID
		for _, handle := range []string{"urn:uuid:" + h, "{" + h + "}", strings.ToUpper(h), strings.ReplaceAll(h, "-", "")} {
			if r := e.Post("/api/auth/revoke-session", map[string]any{"token": handle}, bearer(s)...); r.Status != 200 {
				t.Errorf("%s: %d %s", handle, r.Status, r.Body)
			}
		}
		if !live(t, e, s) {
			t.Fatal("another spelling of the handle revoked the session")
		}
	})
}
