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

// The optional sign-in link of the code e-mail (AUTH_SIGNIN_LINK, issue 17 #5): opening it signs
// nobody in (a mail scanner opens links); its page's button does, once, with the code's own
// expiry and attempts; in the browser that asked it signs in at once, elsewhere it first names
// the device that asked.

var withSignInLinks = testkit.WithEnv("AUTH_SIGNIN_LINK", "true")

const firefoxOnWindows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0"

// askOnPage asks for a code on the sign-in page, as a browser with cookies would, and returns the
// browser's cookies after it and the sign-in link of the e-mail.
func askOnPage(t *testing.T, e *testkit.Env, email string, cookies []*http.Cookie) ([]*http.Cookie, string) {
	t.Helper()
	r := e.Do(testkit.Request{Method: "POST", Path: "/auth/code", Body: url.Values{"email": {email}}.Encode(),
		ContentType: "application/x-www-form-urlencoded", Cookies: cookies,
		Header: http.Header{"Origin": {e.URL}, "User-Agent": {firefoxOnWindows}}})
	if r.Status != http.StatusOK {
		t.Fatalf("asking for a code: %d %s", r.Status, r.Body)
	}
	if c := r.Cookie("auth.signin_browser"); c != nil && c.Value != "" {
		cookies = append(cookies, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return cookies, linkOf(t, e, email)
}

// linkOf is the sign-in link of the newest code e-mail to email, as a path.
func linkOf(t *testing.T, e *testkit.Env, email string) string {
	t.Helper()
	m := e.Mailer.Last(mail.KindSignInCodeLink, email)
	if m.Link == "" || !strings.Contains(m.Text, m.Link) || !strings.Contains(m.HTML, strings.ReplaceAll(m.Link, "&", "&amp;")) || !strings.Contains(m.Text, m.Code) {
		t.Fatalf("the code e-mail carries no sign-in link beside its code: %+v", m)
	}
	u, err := url.Parse(m.Link)
	if err != nil || !strings.HasPrefix(m.Link, e.URL+auth.SignInLinkPath+"?token=") {
		t.Fatalf("the link %q is not the service's sign-in link page", m.Link)
	}
	return u.RequestURI()
}

// openLink opens the link's page (GET), as a mail scanner or a person does.
func openLink(e *testkit.Env, link string, cookies []*http.Cookie, header ...string) *testkit.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return e.Do(testkit.Request{Path: link, Cookies: cookies, Header: h})
}

// pressButton posts the page's form.
func pressButton(e *testkit.Env, link string, cookies []*http.Cookie) *testkit.Response {
	u, _ := url.Parse(link)
	return postForm(e, auth.SignInLinkPath, url.Values{"token": {u.Query().Get("token")}}, cookies...)
}

func TestSignInLink_SignsInFromTheBrowserThatAsked(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		cookies, link := askOnPage(t, e, "linked@example.com", nil)
		if len(cookies) != 1 {
			t.Fatal("the sign-in page did not mark the browser that asked")
		}
		// Opening the link, as often as a scanner likes, signs nobody in and spends nothing.
		for range 3 {
			r := openLink(e, link, cookies)
			body := r.Text()
			if r.Status != http.StatusOK || !strings.Contains(body, "linked@example.com") || strings.Contains(body, `data-testid="other-device"`) ||
				!strings.Contains(body, `method="post" action="/auth/sign-in-link"`) {
				t.Fatalf("the link's page in the browser that asked: %d %s", r.Status, body)
			}
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("opening the link opened %d sessions", n)
		}
		var v models.Verification
		e.DB.Take(&v, "email = ?", "linked@example.com")
		if v.Attempts != 0 {
			t.Fatalf("opening the link spent %d attempts", v.Attempts)
		}
		// The button signs in, into this browser, and goes to the account.
		r := pressButton(e, link, cookies)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" || r.Cookie("auth.session_token") == nil {
			t.Fatalf("the button: %d %v", r.Status, r.Header)
		}
		s := testkit.Session{TokenCookie: r.Cookie("auth.session_token")}
		var got struct{ User struct{ Email string } }
		e.Do(testkit.Request{Path: "/api/auth/get-session", Cookies: s.Cookies()}).Decode(t, &got)
		if got.User.Email != "linked@example.com" {
			t.Fatalf("signed in as %q", got.User.Email)
		}
		// Once: the link and its code are used.
		if r := pressButton(e, link, cookies); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "was used already") {
			t.Fatalf("the link a second time: %d", r.Status)
		} else if body := string(r.Body); !strings.Contains(body, "This link no longer works</h1>") || strings.Contains(body, "Finish signing in") ||
			!strings.Contains(body, `<a href="/auth/sign-in" class="btn">`) {
			// A dead link's page is headed so, with the way to a new code, not with the sign-in.
			t.Fatalf("the used link's answer is not headed as a dead link with a way on: %s", body)
		}
		if r := openLink(e, link, cookies); r.Status != http.StatusOK {
			t.Fatalf("the used link's page: %d", r.Status)
		}
	}, withSignInLinks)
}

// Opened on another device, the page names the device that asked, its network and when, and
// signs in only when the person says it was them.
func TestSignInLink_OnAnotherDeviceSaysWhichDeviceAsked(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		_, link := askOnPage(t, e, "elsewhere@example.com", nil)
		r := openLink(e, link, nil)
		body := string(r.Body)
		if r.Status != http.StatusOK || !strings.Contains(body, `data-testid="other-device"`) || !strings.Contains(body, "Firefox on Windows") ||
			!strings.Contains(body, "Yes, it was me") || !strings.Contains(body, e.Clock.Now().Format("15:04")) {
			t.Fatalf("the link's page on another device: %d %s", r.Status, body)
		}
		// In the page's language.
		r = openLink(e, link, nil, "Accept-Language", "de")
		if body := string(r.Body); !strings.Contains(body, "Firefox unter Windows") || !strings.Contains(body, "Ja, das war ich") {
			t.Fatalf("the German page: %s", body)
		}
		if r := pressButton(e, link, nil); r.Status != http.StatusSeeOther || r.Cookie("auth.session_token") == nil {
			t.Fatalf("confirming on another device: %d", r.Status)
		}
		// A code asked for by an app (the JSON API, no browser mark) is "another device" too.
		e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "app@example.com", "type": "sign-in"})
		if r := openLink(e, linkOf(t, e, "app@example.com"), nil); !strings.Contains(string(r.Body), `data-testid="other-device"`) {
			t.Fatal("an app's code: the page does not ask")
		}
	}, withSignInLinks)
}

// The link is the code: it shares its attempts, its expiry and its single use, and a resend,
// which sends the same code again, sends a link that works as the first one does.
func TestSignInLink_IsBoundToTheCode(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		// Used by typing the code: the link is used up too.
		cookies, link := askOnPage(t, e, "typed@example.com", nil)
		if r := signIn(e, "typed@example.com", e.Mailer.LastCode("typed@example.com")); r.Status != http.StatusOK {
			t.Fatalf("typing the code: %d", r.Status)
		}
		if r := pressButton(e, link, cookies); r.Status != http.StatusBadRequest {
			t.Fatalf("the link after its code was typed: %d", r.Status)
		}

		// Wrong guesses at the code use up the link's attempts.
		cookies, link = askOnPage(t, e, "guessed@example.com", nil)
		code := e.Mailer.LastCode("guessed@example.com")
		for i := range auth.OTPMaxAttempts {
			signIn(e, "guessed@example.com", wrongCode(code, i))
		}
		if r := pressButton(e, link, cookies); r.Status == http.StatusSeeOther || r.Cookie("auth.session_token") != nil {
			t.Fatalf("the link after the code's attempts ran out: %d", r.Status)
		} else if !strings.Contains(string(r.Body), "This link no longer works</h1>") {
			// Its code is spent: the link is dead, and its page says so.
			t.Fatalf("the link after the code's attempts ran out is not called dead: %d %s", r.Status, r.Body)
		}

		// A resend sends the same code, and a link that works; the first link works as well.
		e.Clock.Advance(time.Hour)
		cookies, first := askOnPage(t, e, "resent@example.com", nil)
		e.Clock.Advance(time.Minute)
		cookies, second := askOnPage(t, e, "resent@example.com", cookies)
		if first == second {
			t.Fatal("the resend's link is the first one's")
		}
		if r := pressButton(e, first, cookies); r.Status != http.StatusSeeOther {
			t.Fatalf("the first e-mail's link after a resend: %d", r.Status)
		}
		if r := pressButton(e, second, cookies); r.Status != http.StatusBadRequest {
			t.Fatalf("the second link after the first was used: %d", r.Status)
		}

		// Expired with its code.
		cookies, link = askOnPage(t, e, "late@example.com", nil)
		e.Clock.Advance(auth.OTPLifetime + time.Second)
		if r := openLink(e, link, cookies); r.Status != http.StatusGone || !strings.Contains(string(r.Body), "has expired") {
			t.Fatalf("an expired link's page: %d", r.Status)
		}
		if r := pressButton(e, link, cookies); r.Status != http.StatusGone {
			t.Fatalf("an expired link's button: %d", r.Status)
		}
		if n := e.Count(&models.Session{}, "user_id IN (SELECT id FROM users WHERE email IN ?)", []string{"guessed@example.com", "late@example.com"}); n != 0 {
			t.Fatalf("%d sessions from refused links", n)
		}
	}, withSignInLinks)
}

// A link that was tampered with, made for another service, or made up is refused with the page's
// words and no 500; with sign-in links off, codes come without a link and the page signs nobody
// in.
func TestSignInLink_RefusesWhatItDidNotMake(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		cookies, link := askOnPage(t, e, "tamper@example.com", nil)
		u, _ := url.Parse(link)
		token := u.Query().Get("token")
		flipped := []byte(token)
		flipped[len(flipped)/2] ^= 1
		for _, bad := range []string{"", "x", string(flipped), strings.Repeat("A", 5000), token + "=", "%00"} {
			for _, r := range []*testkit.Response{
				openLink(e, auth.SignInLinkPath+"?token="+url.QueryEscape(bad), cookies),
				postForm(e, auth.SignInLinkPath, url.Values{"token": {bad}}, cookies...),
			} {
				if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "was used already") {
					t.Fatalf("token %.20q: %d", bad, r.Status)
				}
			}
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("%d sessions from bad links", n)
		}
		// Sealed under another AUTH_SECRET (another service, or a rotated secret): refused.
		other := e.Sibling(withSignInLinks, testkit.WithEnv("AUTH_SECRET", "another-secret-another-secret-another-secret"))
		if r := pressButton(other, link, cookies); r.Status != http.StatusBadRequest {
			t.Fatalf("a link of another secret: %d", r.Status)
		}
	}, withSignInLinks)
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r0 := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "plain@example.com", "type": "sign-in"})
		t.Logf("DBG %d %s\n%s", r0.Status, r0.Body, e.Logs.String())
		e.SendCode("plain@example.com")
		if m := e.Mailer.Last(mail.KindSignInCode, "plain@example.com"); m.Code == "" || m.Link != "" || strings.Contains(m.Text, auth.SignInLinkPath) {
			t.Fatalf("without AUTH_SIGNIN_LINK the code e-mail is %+v", m)
		}
		if r := openLink(e, auth.SignInLinkPath+"?token=abc", nil); r.Status != http.StatusBadRequest {
			t.Fatalf("the link page with links off: %d", r.Status)
		}
	})
}

// A banned account's link is refused as its code is, with the ban's words.
func TestSignInLink_BannedAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("banned-link@example.com")
		adminPost(e, admin, "ban-user", map[string]any{"userId": user.UserID}).Decode(t, &struct{}{})
		cookies, link := askOnPage(t, e, "banned-link@example.com", nil)
		if r := pressButton(e, link, cookies); r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "suspended") {
			t.Fatalf("a banned account's link: %d", r.Status)
		} else if strings.Contains(string(r.Body), "This link no longer works") || !strings.Contains(string(r.Body), `role="alert" class="error" data-testid="link-error"`) {
			// The link works; the account may not sign in: an alert under the page's own heading.
			t.Fatalf("a banned account's link is called dead: %s", r.Body)
		}
	}, withSignInLinks, withAdmin)
}
