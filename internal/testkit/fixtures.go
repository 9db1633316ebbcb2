package testkit

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"codeauth/auth"
)

// Clock is a settable clock shared by the service and its database.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t.UTC()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Start is the fixed time every test clock starts at.
var Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// SendCode asks for a sign-in code for email and returns it from the mailer.
func (e *Env) SendCode(email string) string {
	e.t.Helper()
	r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": email, "type": "sign-in"})
	if r.Status != http.StatusOK {
		e.t.Fatalf("send code for %q: status %d, body %s", email, r.Status, r.Body)
	}
	canonical, err := auth.NormalizeEmail(email)
	if err != nil {
		e.t.Fatalf("normalizing %q: %v", email, err)
	}
	code := e.Mailer.LastCode(canonical)
	if code == "" {
		e.t.Fatalf("no code was sent to %s", canonical)
	}
	return code
}

// Session is a signed-in client.
type Session struct {
	// Token is the raw token of the sign-in body.
	Token string
	// Bearer is the set-auth-token value.
	Bearer string
	// TokenCookie and DataCookie are the session cookies a browser would keep.
	TokenCookie, DataCookie *http.Cookie
	UserID                  string
	Response                *Response
}

// Cookies returns the cookies a browser would send.
func (s Session) Cookies() []*http.Cookie {
	var out []*http.Cookie
	for _, c := range []*http.Cookie{s.TokenCookie, s.DataCookie} {
		if c != nil {
			out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	return out
}

// SignIn requests a code for email and verifies it, failing the test unless it succeeds.
func (e *Env) SignIn(email string) Session {
	e.t.Helper()
	code := e.SendCode(email)
	r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code})
	if r.Status != http.StatusOK {
		e.t.Fatalf("sign in %q: status %d, body %s", email, r.Status, r.Body)
	}
	var body struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		e.t.Fatalf("sign-in body: %v", err)
	}
	return Session{
		Token: body.Token, Bearer: r.Header.Get("set-auth-token"), UserID: body.User.ID,
		TokenCookie: r.Cookie("auth.session_token"), DataCookie: r.Cookie("auth.session_data"), Response: r,
	}
}

// Count returns the number of rows of model matching the optional condition.
func (e *Env) Count(model any, where ...any) int64 {
	e.t.Helper()
	q := e.DB.Model(model)
	if len(where) > 0 {
		q = q.Where(where[0], where[1:]...)
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatalf("counting: %v", err)
	}
	return n
}
