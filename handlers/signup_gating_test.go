package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// Sign-up gating (AUTH_DISABLE_SIGNUP, AUTH_ALLOWED_EMAIL_DOMAINS) without telling who has an
// account: a send answers as for anyone and does the same work, but no code is sent to an
// address that could never use it; a verify that would create a refused account fails as a wrong
// code does, and creates nothing.

// addAccount writes an account for email straight to the database, as one made before gating.
func addAccount(t *testing.T, e *testkit.Env, email string) {
	t.Helper()
	now := e.Clock.Now()
	u := models.User{ID: uuid.NewString(), Email: email, Name: "", EmailVerified: true, CreatedAt: now, UpdatedAt: now}
	if err := e.DB.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
}

// send asks for a code for email and returns the answer, with the headers that differ per
// request left out.
func sendFor(t *testing.T, e *testkit.Env, email string) (int, string) {
	t.Helper()
	r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": email, "type": "sign-in"})
	return r.Status, string(r.Body)
}

func TestSignUpGating_Closed(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		addAccount(t, e, "member@example.com")
		knownStatus, knownBody := sendFor(t, e, "member@example.com")
		unknownStatus, unknownBody := sendFor(t, e, "stranger@example.com")
		if knownStatus != http.StatusOK || knownStatus != unknownStatus || knownBody != unknownBody {
			t.Fatalf("the answers differ: %d %s vs %d %s", knownStatus, knownBody, unknownStatus, unknownBody)
		}
		// The same work for both: a code and an e-mail stored, the e-mail handled by the outbox;
		// only the member's goes out, the stranger's is withheld.
		for _, email := range []string{"member@example.com", "stranger@example.com"} {
			if n := e.Count(&models.Verification{}, "email = ?", email); n != 1 {
				t.Fatalf("%s: %d codes stored", email, n)
			}
		}
		e.Mailer.Flush()
		if len(e.Mailer.Find(mail.KindSignInCode, "stranger@example.com")) != 0 {
			t.Fatal("a code was sent to an address that can never use it")
		}
		if got := e.Auth.Outbox().Totals(); got.Withheld != 1 || got.Sent < 1 {
			t.Fatalf("the outbox handled %+v, want the stranger's e-mail withheld and the member's sent", got)
		}
		code := e.Mailer.LastCode("member@example.com")
		if code == "" {
			t.Fatal("the member got no code")
		}
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "member@example.com", "otp": code}); r.Status != http.StatusOK {
			t.Fatalf("the member's sign-in: %d %s", r.Status, r.Body)
		}
		// Even the right code (read from the database's side, as a guesser would need) creates no
		// account: it fails as a wrong code.
		for _, otp := range []string{"000000", "123456"} {
			e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "stranger@example.com", "otp": otp}).
				ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
		}
		if n := e.Count(&models.User{}, "email = ?", "stranger@example.com"); n != 0 {
			t.Fatal("an account was created with sign-up closed")
		}
	}, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"))
}

// A right code for a refused address is refused too: the store refuses the account it would
// create, whatever the code.
func TestSignUpGating_RightCodeCreatesNothing(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		// Send while sign-up is open (the code is delivered), then close it: the code is right.
		open := e.Sibling(testkit.WithEnv("AUTH_DISABLE_SIGNUP", "false"))
		if r := open.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "late@example.com", "type": "sign-in"}); r.Status != http.StatusOK {
			t.Fatal(r.Status)
		}
		code := open.Mailer.LastCode("late@example.com")
		e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "late@example.com", "otp": code}).
			ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
		if n := e.Count(&models.User{}, "email = ?", "late@example.com"); n != 0 || e.Count(&models.Session{}) != 0 {
			t.Fatal("a right code created an account with sign-up closed")
		}
	}, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"))
}

func TestSignUpGating_AllowedDomains(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		addAccount(t, e, "old-timer@elsewhere.org")
		if s := e.SignIn("new@Acme.TEST"); s.UserID == "" {
			t.Fatal("an allowed domain could not sign up")
		}
		e.SignIn("old-timer@elsewhere.org") // an existing account of another domain signs in
		_, gatedBody := sendFor(t, e, "outsider@elsewhere.org")
		_, knownBody := sendFor(t, e, "old-timer@elsewhere.org")
		if gatedBody != knownBody || len(e.Mailer.Find(mail.KindSignInCode, "outsider@elsewhere.org")) != 0 {
			t.Fatalf("a refused domain: answer %s vs %s, or a code sent", gatedBody, knownBody)
		}
		// Subdomains are other domains.
		sendFor(t, e, "x@sub.acme.test")
		if len(e.Mailer.Find(mail.KindSignInCode, "x@sub.acme.test")) != 0 {
			t.Fatal("a subdomain of an allowed domain may sign up")
		}
	}, testkit.WithEnv("AUTH_ALLOWED_EMAIL_DOMAINS", "acme.test, example.net"))
}

// The pages say who may create an account, and do not claim a code was sent.
func TestSignUpGating_Pages(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_ALLOWED_EMAIL_DOMAINS", "acme.test,example.net"))
	page := string(e.Get("/auth/sign-up").Body)
	if !strings.Contains(page, "New accounts are for addresses at acme.test and example.net.") {
		t.Fatal("the sign-up page does not say who may sign up")
	}
	r := e.Do(testkit.Request{Method: "POST", Path: "/auth/code", Body: url.Values{"email": {"who@else.org"}, "mode": {"sign-up"}}.Encode(),
		ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}, "HX-Request": {"true"}}})
	body := string(r.Body)
	if r.Status != http.StatusOK || !strings.Contains(body, "can sign in here, we sent it a") || strings.Contains(body, "We sent a") {
		t.Fatalf("the code step with gating: %d %s", r.Status, body)
	}
	closed := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"))
	if !strings.Contains(string(closed.Get("/auth/sign-in").Body), "only existing accounts can sign in") {
		t.Fatal("the sign-in page does not say sign-up is closed")
	}
	open := testkit.New(t, testkit.SQLite)
	if strings.Contains(string(open.Get("/auth/sign-up").Body), "sign-up-note") {
		t.Fatal("a note without gating")
	}
}

// With sign-up closed, failing codes until an address without an account is locked sends it no
// notice: it gets no code either, and gating keeps the service's e-mail from addresses that may
// not sign up (review of the sign-in-paused notice). An account's address is told.
func TestSignUpGating_NoPausedNoticeToAnAddressThatMayNotSignUp(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		addAccount(t, e, "member@example.com")
		for _, email := range []string{"stranger@example.com", "member@example.com"} {
			for failures := 0; failures < 3; failures++ {
				if failures%5 == 0 {
					if status, _ := sendFor(t, e, email); status != http.StatusOK {
						t.Fatalf("send: %d", status)
					}
				}
				e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": wrongCode("", failures)}).
					ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
			}
		}
		e.Mailer.Flush()
		if n := len(e.Mailer.Find(mail.KindSignInPaused, "stranger@example.com")); n != 0 {
			t.Fatalf("%d notices to an address that may not sign up", n)
		}
		if n := len(e.Mailer.Find(mail.KindSignInPaused, "member@example.com")); n != 1 {
			t.Fatalf("%d notices to an account's address", n)
		}
	}, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"), testkit.WithMaxFailedVerifications(3))
}
