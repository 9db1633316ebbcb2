package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

const (
	requestChangePath = "/api/auth/email-otp/request-email-change"
	changeWithCode    = "/api/auth/email-otp/change-email"
	changeByLinkPath  = "/api/auth/change-email"
)

// bearer is the header pair of a signed-in app.
func bearer(s testkit.Session) []string { return []string{"Authorization", "Bearer " + s.Bearer} }

func userOf(t *testing.T, e *testkit.Env, id string) models.User {
	t.Helper()
	var u models.User
	if err := e.DB.Unscoped().Where("id = ?", id).Take(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

// The app flow: a code to the new address changes it; the session stays (and is sent again),
// every other session ends, and the old address gets a notice with a restore link.
func TestEmailChange_ByCode(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		app := e.SignIn("alice@example.com")
		other := e.SignIn("alice@example.com") // another device
		r := e.Post(requestChangePath, map[string]any{"newEmail": " Alice.New@Example.com "}, bearer(app)...)
		if r.Status != 200 || string(r.Body) != `{"success":true}` {
			t.Fatalf("request: %d %s", r.Status, r.Body)
		}
		code := e.Mailer.Last(mail.KindChangeEmailCode, "alice.new@example.com").Code
		if code == "" {
			t.Fatal("no change code mailed to the new address")
		}
		// Catalogue B18: a sign-in code is no good here, nor the change code for sign-in.
		signInCode := e.SendCode("alice@example.com")
		e.Post(changeWithCode, map[string]any{"newEmail": "alice.new@example.com", "otp": signInCode}, bearer(app)...).
			ExpectError(t, 400, "INVALID_OTP")
		signIn(e, "alice.new@example.com", code).ExpectError(t, 400, "INVALID_OTP")

		r = e.Post(changeWithCode, map[string]any{"newEmail": "alice.new@example.com", "otp": code}, bearer(app)...)
		if r.Status != 200 || string(r.Body) != `{"success":true}` || r.Header.Get("set-auth-token") != app.Bearer {
			t.Fatalf("change: %d %s, set-auth-token %q", r.Status, r.Body, r.Header.Get("set-auth-token"))
		}
		u := userOf(t, e, app.UserID)
		if u.Email != "alice.new@example.com" || !u.EmailVerified {
			t.Fatalf("user after the change: %+v", u)
		}
		expectSession(t, getSession(e, nil, bearer(app)...), app.UserID)
		expectNoSession(t, getSession(e, nil, bearer(other)...))
		// The code is single-use.
		e.Post(changeWithCode, map[string]any{"newEmail": "alice.new@example.com", "otp": code}, bearer(app)...).ExpectError(t, 400, "EMAIL_IS_THE_SAME")
		notice := e.Mailer.Last(mail.KindEmailChanged, "alice@example.com")
		if !strings.Contains(notice.Text, "alice.new@example.com") || !strings.Contains(notice.Link, "/auth/restore-email?token=") {
			t.Fatalf("notice to the old address: %+v", notice)
		}
	})
}

// Every refusal of the app flow, and an address taken by another account: the same success
// answer and nothing sent, then a final step that fails like a wrong code (catalogue J88).
func TestEmailChange_ByCodeRefusals(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.Post(requestChangePath, map[string]any{"newEmail": "x@example.com"}).ExpectError(t, 401, "UNAUTHORIZED")
		app := e.SignIn("alice@example.com")
		e.SignIn("bob@example.com")
		e.Post(requestChangePath, map[string]any{"newEmail": "ALICE@example.com"}, bearer(app)...).ExpectError(t, 400, "EMAIL_IS_THE_SAME")
		e.Post(requestChangePath, map[string]any{"newEmail": "not an address"}, bearer(app)...).ExpectError(t, 400, "INVALID_EMAIL")
		e.Post(requestChangePath, map[string]any{}, bearer(app)...).ExpectError(t, 400, "VALIDATION_ERROR")
		e.Post(changeWithCode, map[string]any{"newEmail": "c@example.com"}, bearer(app)...).ExpectError(t, 400, "VALIDATION_ERROR")

		taken := e.Post(requestChangePath, map[string]any{"newEmail": "bob@example.com"}, bearer(app)...)
		free := e.Post(requestChangePath, map[string]any{"newEmail": "carol@example.com"}, bearer(app)...)
		if taken.Status != free.Status || string(taken.Body) != string(free.Body) {
			t.Fatalf("taken %d %s; free %d %s", taken.Status, taken.Body, free.Status, free.Body)
		}
		if n := len(e.Mailer.Find(mail.KindChangeEmailCode, "bob@example.com")); n != 0 {
			t.Fatalf("%d codes sent to another account's address", n)
		}
		// A try naming the taken address meets no code of that address (the pending one was sent to
		// carol): it fails like a wrong code and spends nothing of carol's code.
		e.Post(changeWithCode, map[string]any{"newEmail": "bob@example.com", "otp": "123456"}, bearer(app)...).ExpectError(t, 400, "INVALID_OTP")
		// Catalogue J91: the change code has the same budget as any code.
		code := e.Mailer.Last(mail.KindChangeEmailCode, "carol@example.com").Code
		for i := 0; i < auth.OTPMaxAttempts; i++ {
			e.Post(changeWithCode, map[string]any{"newEmail": "carol@example.com", "otp": wrongCode(code, i)}, bearer(app)...).ExpectError(t, 400, "INVALID_OTP")
		}
		e.Post(changeWithCode, map[string]any{"newEmail": "carol@example.com", "otp": code}, bearer(app)...).ExpectError(t, 403, "TOO_MANY_ATTEMPTS")
		// A code for one address does not change to another.
		e.Post(requestChangePath, map[string]any{"newEmail": "dave@example.com"}, bearer(app)...)
		code = e.Mailer.Last(mail.KindChangeEmailCode, "dave@example.com").Code
		e.Post(changeWithCode, map[string]any{"newEmail": "erin@example.com", "otp": code}, bearer(app)...).ExpectError(t, 400, "INVALID_OTP")
		if u := userOf(t, e, app.UserID); u.Email != "alice@example.com" {
			t.Fatalf("a refused change changed the address to %s", u.Email)
		}
		// A cookie session needs a trusted origin, as every state change does.
		e.Do(testkit.Request{Method: "POST", Path: requestChangePath, JSON: map[string]any{"newEmail": "f@example.com"}, Cookies: app.Cookies()}).
			ExpectError(t, 403, "MISSING_OR_NULL_ORIGIN")
	})
}

// linkToken pulls the token out of a mailed link.
func linkToken(t *testing.T, link string) (token, callback string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("no token in %q", link)
	}
	return u.Query().Get("token"), u.Query().Get("callbackURL")
}

// The web flow: a link to the new address opens a page that changes nothing until its button
// is pressed; then the change is made, other sessions end and the old address is told.
func TestEmailChange_ByLink(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		browser := e.SignIn("alice@example.com")
		phone := e.SignIn("alice@example.com")
		origin := http.Header{"Origin": {e.URL}}
		r := e.Do(testkit.Request{Method: "POST", Path: changeByLinkPath, JSON: map[string]any{"newEmail": "alice.new@example.com", "callbackURL": "/account?changed=1"},
			Cookies: browser.Cookies(), Header: origin})
		if r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("change-email: %d %s", r.Status, r.Body)
		}
		link := e.Mailer.Last(mail.KindChangeEmailLink, "alice.new@example.com").Link
		token, callback := linkToken(t, link)
		if !strings.HasPrefix(link, e.URL+"/auth/verify-email?") || callback != "/account?changed=1" {
			t.Fatalf("link %q", link)
		}
		// Catalogue J90, A5 3.5.3: opening the page changes nothing, and leaks no referrer.
		page := e.Do(testkit.Request{Path: "/auth/verify-email?token=" + url.QueryEscape(token), Cookies: browser.Cookies()})
		if page.Status != 200 || !strings.Contains(page.Text(), "alice.new@example.com") || page.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("landing page: %d", page.Status)
		}
		if u := userOf(t, e, browser.UserID); u.Email != "alice@example.com" {
			t.Fatal("opening the link changed the address")
		}
		form := url.Values{"token": {token}, "callbackURL": {callback}}
		r = e.Do(testkit.Request{Method: "POST", Path: "/auth/verify-email", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded",
			Cookies: browser.Cookies(), Header: origin})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account?changed=1" {
			t.Fatalf("confirm: %d to %q", r.Status, r.Header.Get("Location"))
		}
		if u := userOf(t, e, browser.UserID); u.Email != "alice.new@example.com" || !u.EmailVerified {
			t.Fatalf("after confirming: %+v", u)
		}
		expectSession(t, getSession(e, nil, bearer(browser)...), browser.UserID)
		expectNoSession(t, getSession(e, nil, bearer(phone)...))
		// Catalogue J89: replay is refused.
		r = e.Do(testkit.Request{Method: "POST", Path: "/auth/verify-email", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded", Header: origin})
		if r.Status != 400 || !strings.Contains(string(r.Body), "not valid any more") {
			t.Fatalf("replay: %d", r.Status)
		}
		if e.Mailer.Last(mail.KindEmailChanged, "alice@example.com").Link == "" {
			t.Fatal("no notice to the old address")
		}
	})
}

// Catalogue J89: link tokens expire after 15 minutes, cannot be tampered with, and are refused in
// another account's session; a taken address gets the same answer and no link.
func TestEmailChange_ByLinkRefusals(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		alice := e.SignIn("alice@example.com")
		mallory := e.SignIn("mallory@example.com")
		request := func(s testkit.Session, newEmail string) *testkit.Response {
			return e.Post(changeByLinkPath, map[string]any{"newEmail": newEmail}, bearer(s)...)
		}
		request(alice, "alice2@example.com")
		token, _ := linkToken(t, e.Mailer.Last(mail.KindChangeEmailLink, "alice2@example.com").Link)
		id, secret, _ := strings.Cut(token, ".")
		flipped := []byte(secret)
		flipped[5] ^= 1
		for _, bad := range []string{id + "." + string(flipped), id, "x." + secret, "", strings.Repeat("a", 5000)} {
			r := e.Get("/api/auth/verify-email?token=" + url.QueryEscape(bad))
			r.ExpectError(t, 401, "INVALID_TOKEN")
		}
		// Opened in someone else's session.
		e.Get("/api/auth/verify-email?token="+url.QueryEscape(token), bearer(mallory)...).ExpectError(t, 401, "INVALID_TOKEN")
		// Its page's button, pressed there, refuses without calling the link dead (it works in
		// the right browser); a tampered link's page does call it so.
		press := func(token string, cookies []*http.Cookie) string {
			r := e.Do(testkit.Request{Method: "POST", Path: "/auth/verify-email", Body: url.Values{"token": {token}}.Encode(),
				ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}}, Cookies: cookies})
			if r.Status < 400 {
				t.Fatalf("the change link's button: %d", r.Status)
			}
			return string(r.Body)
		}
		if body := press(token, mallory.Cookies()); strings.Contains(body, "This link no longer works") || !strings.Contains(body, "Confirm your new e-mail address</h1>") {
			t.Fatalf("a live change link pressed in another account's session is called dead: %s", body)
		}
		if body := press(id+"."+string(flipped), nil); !strings.Contains(body, "This link no longer works</h1>") {
			t.Fatalf("a tampered change link's page is not called dead: %s", body)
		}
		// With a callbackURL, failures go there with the code; unsafe targets are refused outright.
		r := e.Get("/api/auth/verify-email?token=bad&callbackURL=%2Faccount")
		if r.Status != http.StatusFound || r.Header.Get("Location") != "/account?error=INVALID_TOKEN" {
			t.Fatalf("error redirect: %d %q", r.Status, r.Header.Get("Location"))
		}
		e.Get("/api/auth/verify-email?token=bad&callbackURL=https%3A%2F%2Fevil.test").ExpectError(t, 403, "INVALID_CALLBACK_URL")
		e.Post(changeByLinkPath, map[string]any{"newEmail": "x@example.com", "callbackURL": "//evil.test"}, bearer(alice)...).ExpectError(t, 403, "INVALID_CALLBACK_URL")
		e.Post(changeByLinkPath, map[string]any{"newEmail": "alice@example.com"}, bearer(alice)...).ExpectError(t, 400, "EMAIL_IS_THE_SAME")
		// Expired after 15 minutes.
		e.Clock.Advance(auth.ChangeLinkLifetime)
		e.Get("/api/auth/verify-email?token="+url.QueryEscape(token), bearer(alice)...).ExpectError(t, 401, "TOKEN_EXPIRED")
		// A fresh link works through the API too, in the right session.
		request(alice, "alice3@example.com")
		token, _ = linkToken(t, e.Mailer.Last(mail.KindChangeEmailLink, "alice3@example.com").Link)
		r = e.Get("/api/auth/verify-email?token="+url.QueryEscape(token), bearer(alice)...)
		var body struct {
			Status bool
			User   struct{ Email string }
		}
		r.Decode(t, &body)
		if !body.Status || body.User.Email != "alice3@example.com" {
			t.Fatalf("verify-email: %s", r.Body)
		}
		// Taken: same answer, nothing sent.
		before := len(e.Mailer.Messages())
		if r := request(alice, "mallory@example.com"); r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("taken address: %d %s", r.Status, r.Body)
		}
		if len(e.Mailer.Messages()) != before {
			t.Fatal("something was sent for a taken address")
		}
	})
}

// With the link flow switched off, /change-email says so (the seed's "verification-email
// callback not configured").
func TestEmailChange_LinksDisabled(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithoutEmailChangeLinks())
	s := e.SignIn("alice@example.com")
	r := e.Post(changeByLinkPath, map[string]any{"newEmail": "new@example.com"}, bearer(s)...)
	r.ExpectError(t, 400, "VERIFICATION_EMAIL_NOT_ENABLED")
	if string(r.Body) != `{"message":"Verification email isn't enabled","code":"VERIFICATION_EMAIL_NOT_ENABLED"}` {
		t.Fatalf("body %s", r.Body)
	}
	// The app flow still works.
	if r := e.Post(requestChangePath, map[string]any{"newEmail": "new@example.com"}, bearer(s)...); r.Status != 200 {
		t.Fatalf("code flow: %d", r.Status)
	}
}

// Catalogue J86: the notice to the old address restores it within 7 days and signs out every
// session, the changer's included; after 7 days the link is dead.
func TestEmailChange_RestoreFromTheOldAddress(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		victim := e.SignIn("victim@example.com")
		// Someone with the victim's session moves the account to their own address.
		e.Post(requestChangePath, map[string]any{"newEmail": "thief@example.com"}, bearer(victim)...)
		code := e.Mailer.Last(mail.KindChangeEmailCode, "thief@example.com").Code
		e.Post(changeWithCode, map[string]any{"newEmail": "thief@example.com", "otp": code}, bearer(victim)...)
		restore := e.Mailer.Last(mail.KindEmailChanged, "victim@example.com").Link
		token, _ := linkToken(t, restore)

		page := e.Get("/auth/restore-email?token=" + url.QueryEscape(token))
		if page.Status != 200 || !strings.Contains(page.Text(), "thief@example.com") || page.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("restore page: %d", page.Status)
		}
		form := url.Values{"token": {token}}
		r := e.Do(testkit.Request{Method: "POST", Path: "/auth/restore-email", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded"})
		if r.Status != 200 || !strings.Contains(r.Text(), "victim@example.com") {
			t.Fatalf("restore: %d", r.Status)
		}
		if u := userOf(t, e, victim.UserID); u.Email != "victim@example.com" {
			t.Fatalf("address after restore: %s", u.Email)
		}
		if n := e.Count(&models.Session{}, "user_id = ?", victim.UserID); n != 0 {
			t.Fatalf("%d sessions survived the restore", n)
		}
		// Used once.
		r = e.Do(testkit.Request{Method: "POST", Path: "/auth/restore-email", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded"})
		if r.Status != 400 || !strings.Contains(string(r.Body), "This link no longer works</h1>") || !strings.Contains(string(r.Body), `<a href="/auth/sign-in" class="btn">`) {
			t.Fatalf("second restore: %d, not headed as a dead link with a way on: %s", r.Status, r.Body)
		}
		// A restore link expires after 7 days.
		s := e.SignIn("victim@example.com")
		e.Post(requestChangePath, map[string]any{"newEmail": "other@example.com"}, bearer(s)...)
		code = e.Mailer.Last(mail.KindChangeEmailCode, "other@example.com").Code
		e.Post(changeWithCode, map[string]any{"newEmail": "other@example.com", "otp": code}, bearer(s)...)
		token, _ = linkToken(t, e.Mailer.Last(mail.KindEmailChanged, "victim@example.com").Link)
		e.Clock.Advance(auth.RestoreLinkLifetime + time.Second)
		if r := e.Get("/auth/restore-email?token=" + url.QueryEscape(token)); r.Status != http.StatusGone || !strings.Contains(string(r.Body), "This link no longer works</h1>") {
			t.Fatalf("expired restore link: %d %s", r.Status, r.Body)
		}
	})
}
