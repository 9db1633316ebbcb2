package handlers_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// A compressed body is refused before anything decompresses it: a few hundred gzip bytes can
// stand for gigabytes (catalogue N108).
func TestInput_CompressedBodiesAreRefused(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(`{"email":"a@example.com","type":"sign-in","pad":"` + strings.Repeat("a", 1<<20) + `"}`))
	zw.Close()
	for _, ce := range []string{"gzip", "gzip, gzip", "deflate", "br"} {
		r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json", Body: buf.String(),
			Header: http.Header{"Content-Encoding": {ce}}})
		r.ExpectError(t, 415, "UNSUPPORTED_MEDIA_TYPE")
	}
	expectNothingChanged(t, e)
}

// Client-supplied header text is cleaned before it is stored: PostgreSQL refuses NUL and invalid
// UTF-8, and that must not turn a sign-in into a 500 (which would also have spent an attempt).
func TestSignIn_HostileUserAgentIsStoredClean(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for i, ua := range []string{"Mozilla\xff\xfe", "abc\x00def", "tab\there\x7f", strings.Repeat("é", 600)} {
			email := []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com"}[i]
			code := e.SendCode(email)
			body := `{"email":"` + email + `","otp":"` + code + `"}`
			if status := rawPost(t, e, signInPath, body, "User-Agent: "+ua); status != 200 {
				t.Fatalf("user agent %q: %d", ua, status)
			}
		}
		var sessions []models.Session
		e.DB.Find(&sessions)
		for _, s := range sessions {
			if !utf8.ValidString(s.UserAgent) || strings.ContainsAny(s.UserAgent, "\x00\t\x7f") || len(s.UserAgent) > 512 {
				t.Fatalf("stored user agent %q", s.UserAgent)
			}
		}
	})
}

// An image URL is measured in its stored (encoded) form.
func TestUpdateUser_LongEncodedImageIsAValidationError(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		r := e.Post(updateUserPath, map[string]any{"image": "https://a.example/" + strings.Repeat("é", 1000)}, "Authorization", "Bearer "+s.Bearer)
		r.ExpectError(t, 400, "VALIDATION_ERROR")
	})
}

// A session too big for a cookie is simply not cached; the database answers.
func TestCookieCache_SkippedWhenTooLarge(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		img := "https://cdn.example.com/" + strings.Repeat("a", 2000)
		if r := e.Post(updateUserPath, map[string]any{"image": img, "name": strings.Repeat("名", 100)}, "Authorization", "Bearer "+s.Bearer); r.Status != 200 {
			t.Fatalf("update: %d %s", r.Status, r.Body)
		}
		code := e.SendCode("alice@example.com")
		r := e.Do(testkit.Request{Method: "POST", Path: signInPath, JSON: map[string]any{"email": "alice@example.com", "otp": code},
			Header: http.Header{"User-Agent": {strings.Repeat("<\"", 256)}}})
		if r.Status != 200 {
			t.Fatalf("sign-in: %d %s", r.Status, r.Body)
		}
		for _, v := range r.Header.Values("Set-Cookie") {
			if len(v) > 4096 {
				t.Fatalf("a cookie of %d bytes was set", len(v))
			}
		}
		if c := r.Cookie("auth.session_data"); c != nil && c.Value != "" {
			t.Fatal("an oversized cache cookie was set")
		}
		tok := r.Cookie("auth.session_token")
		expectSessionOf(t, getSession(e, []*http.Cookie{{Name: tok.Name, Value: tok.Value}}), "alice@example.com")
	})
}

// rawPost sends a JSON POST over a plain TCP connection, with header lines the Go client would
// refuse to write, and returns the status.
func rawPost(t *testing.T, e *testkit.Env, path, body string, headerLines ...string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", path, len(body))
	for _, h := range headerLines {
		req.WriteString(h + "\r\n")
	}
	req.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func expectSessionOf(t *testing.T, r *testkit.Response, email string) {
	t.Helper()
	var b sessionBody
	r.Decode(t, &b)
	if b.User.Email != email {
		t.Fatalf("get-session = %s, want %s", r.Body, email)
	}
}

// The cookie's Max-Age is the contract's 5184000 whenever the cookie is sent again, not the time
// left since the last refresh.
func TestSession_MaxAgeOnReissue(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		e.Clock.Advance(12 * 3600e9)
		r := e.Post(updateUserPath, map[string]any{"name": "Alice"}, "Authorization", "Bearer "+s.Bearer)
		if raw := r.RawSetCookie("auth.session_token"); !strings.Contains(raw, "max-age=5184000") {
			t.Fatalf("reissued cookie %q", raw)
		}
	})
}

// Catalogue B19, R1: when the transaction after a right code fails, the answer is a generic 500,
// the attempt stays spent, and the code stays usable once the database recovers.
func TestVerify_FailureAfterTheAttemptKeepsTheCount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		if err := e.DB.Migrator().DropTable(&models.Session{}); err != nil {
			t.Fatal(err)
		}
		r := signIn(e, "alice@example.com", code)
		r.ExpectError(t, 500, "INTERNAL_SERVER_ERROR")
		if strings.Contains(string(r.Body), "session") {
			t.Fatalf("500 body leaks the cause: %s", r.Body)
		}
		var v models.Verification
		if err := e.DB.Where("subject = ?", "alice@example.com").Take(&v).Error; err != nil || v.Attempts != 1 {
			t.Fatalf("verification after the failure: %+v, %v; want the code kept with 1 attempt", v, err)
		}
		if n := e.Count(&models.User{}); n != 0 {
			t.Fatalf("users = %d after a rolled-back sign-up", n)
		}
		if err := e.DB.AutoMigrate(&models.Session{}); err != nil {
			t.Fatal(err)
		}
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("the code after recovery: %d %s", r.Status, r.Body)
		}
	})
}

// Signing out with a bearer token and a cookie of another session ends both.
func TestSignOut_EndsBothPresentedSessions(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		app := e.SignIn("alice@example.com")
		browser := e.SignIn("alice@example.com")
		r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/sign-out", Cookies: browser.Cookies(),
			Header: http.Header{"Authorization": {"Bearer " + app.Bearer}, "Origin": {e.URL}}})
		if r.Status != 200 {
			t.Fatalf("sign-out: %d %s", r.Status, r.Body)
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("sessions left = %d, want 0", n)
		}
	})
}

// Two Authorization headers are no credential, but they do not sign a valid cookie out.
func TestSession_AmbiguousAuthorizationKeepsTheCookie(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	r := e.Do(testkit.Request{Path: getSessionPath, Cookies: s.Cookies(), Header: http.Header{"Authorization": {"Bearer a", "Bearer b"}}})
	expectNoSession(t, r)
	if len(r.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("cookies were changed: %v", r.Header.Values("Set-Cookie"))
	}
	expectSession(t, getSession(e, s.Cookies()), s.UserID)
}
