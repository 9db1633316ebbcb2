package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/static"
)

// Issue 18 #7: what crawlers and browsers ask every site for is served, public, not sent to the
// sign-in page; every page describes itself for search results.
func TestPages_RobotsFaviconAndDescription(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for _, method := range []string{"GET", "HEAD"} {
		r := e.Do(testkit.Request{Method: method, Path: "/robots.txt"})
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") ||
			(method == "GET" && !strings.Contains(string(r.Body), "Disallow: /account")) {
			t.Fatalf("%s /robots.txt: %d %q %s", method, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		r = e.Do(testkit.Request{Method: method, Path: "/favicon.ico"})
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/svg+xml" || (method == "GET" && !strings.Contains(string(r.Body), "<svg")) {
			t.Fatalf("%s /favicon.ico: %d %q", method, r.Status, r.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/", "/auth/sign-in", "/auth/sign-up"} {
		for lang, want := range map[string]string{"en": "No passwords.", "de": "Ohne Passwörter.", "fr": "Sans mot de passe.", "es": "Sin contraseñas."} {
			r := e.Do(testkit.Request{Path: path, Header: http.Header{"Accept-Language": {lang}}})
			if !strings.Contains(string(r.Body), `<meta name="description" content="`) || !strings.Contains(string(r.Body), want) {
				t.Fatalf("%s in %s has no description", path, lang)
			}
		}
	}
}

// Issue 18 #8: without JavaScript, a code pasted with the spaces of the e-mail (" 709 775 ")
// verifies on the page: the input takes it whole and the page takes the spaces out. The JSON API,
// better-auth's, still refuses them.
func TestPages_PastedCodeWithSpacesVerifiesWithoutJavaScript(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("spaced@example.com")
		spaced := " " + code[:3] + " " + code[3:] + " "
		r := postForm(e, "/auth/verify", url.Values{"email": {"spaced@example.com"}, "otp": {spaced}, "mode": {"sign-in"}})
		if r.Status != http.StatusSeeOther || r.Cookie("auth.session_token") == nil {
			t.Fatalf("a spaced code on the page: %d %s", r.Status, r.Body)
		}
		code = e.SendCode("spaced-api@example.com")
		e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "spaced-api@example.com", "otp": " " + code[:3] + " " + code[3:]}).
			ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
	})
}

// Issue 18 #4: the error page's header says who is signed in, as every page's does: a 404 of a
// path nobody guards showed "Sign in" to a signed-in person.
func TestPages_ErrorPageKnowsWhoIsSignedIn(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("header@example.com")
		e.Clock.Advance(time.Hour) // past the cookie cache: the page reads the session itself
		for _, path := range []string{"/blog/post", "/account/nothing-here"} {
			r := e.Do(testkit.Request{Path: path, Cookies: s.Cookies()})
			body := string(r.Body)
			if r.Status != http.StatusNotFound || !strings.Contains(body, `action="/auth/sign-out"`) || strings.Contains(body, `href="/auth/sign-in"`) {
				t.Fatalf("%s signed in: %d, offers sign-out: %v, offers sign-in: %v", path, r.Status,
					strings.Contains(body, `action="/auth/sign-out"`), strings.Contains(body, `href="/auth/sign-in"`))
			}
		}
		if r := e.Get("/blog/post"); r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `href="/auth/sign-in"`) {
			t.Fatalf("/blog/post signed out: %d", r.Status)
		}
	})
}

// Issue 18 #5: after signing in, the front page says who is signed in rather than asking for an
// address again.
func TestPages_HomeSaysWhoIsSignedIn(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	if body := string(e.Get("/").Body); strings.Contains(body, `data-testid="signed-in-as"`) {
		t.Fatal("the front page says someone is signed in to nobody")
	}
	s := e.SignIn("home@example.com")
	body := e.Do(testkit.Request{Path: "/", Cookies: s.Cookies()}).Text()
	if !strings.Contains(body, `data-testid="signed-in-as"`) || !strings.Contains(body, "home@example.com") || strings.Contains(body, "Type your e-mail address") {
		t.Fatalf("the front page after sign-in: %s", body)
	}
}

// Issue 18 #3: a wrong code's answer keeps the resend button cooling down (it offered a resend at
// once, and one impatient click replaced nothing but made the wait start over), and the code
// step arrives with the button already disabled when the page's script runs it (htmx), rather
// than enabled for the frames before the script disables it.
func TestPages_WrongCodeKeepsTheResendCooldown(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	htmx := func(path string, form url.Values) string {
		t.Helper()
		r := e.Do(testkit.Request{Method: "POST", Path: path, Body: form.Encode(), ContentType: "application/x-www-form-urlencoded",
			Header: http.Header{"Origin": {e.URL}, "HX-Request": {"true"}}})
		if r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
		return string(r.Body)
	}
	resend := regexp.MustCompile(`<button type="submit" class="btn-quiet[^"]*" data-cooldown="(\d+)"( disabled)?>`)
	after := regexp.MustCompile(`name="resendAfter" value="(\d+)"`)
	body := htmx("/auth/code", url.Values{"email": {"cool@example.com"}, "mode": {"sign-in"}})
	m := resend.FindStringSubmatch(body)
	if m == nil || m[1] != "30" || m[2] == "" {
		t.Fatalf("the code step's resend button: %v", m)
	}
	deadline := after.FindStringSubmatch(body)
	if deadline == nil {
		t.Fatal("the verify form does not carry when the resend is offered")
	}
	code := e.Mailer.LastCode("cool@example.com")
	e.Clock.Advance(10 * time.Second)
	body = htmx("/auth/verify", url.Values{"email": {"cool@example.com"}, "mode": {"sign-in"}, "otp": {wrongCode(code, 0)}, "resendAfter": {deadline[1]}})
	if m := resend.FindStringSubmatch(body); m == nil || m[1] != "20" || m[2] == "" {
		t.Fatalf("after a wrong code 10 s in, the resend button: %v", m)
	}
	// A form that says later than a cooldown gets a cooldown at most; past the time, none.
	body = htmx("/auth/verify", url.Values{"email": {"cool@example.com"}, "mode": {"sign-in"}, "otp": {wrongCode(code, 1)}, "resendAfter": {"99999999999"}})
	if m := resend.FindStringSubmatch(body); m == nil || m[1] != "30" {
		t.Fatalf("a forged deadline: %v", m)
	}
	e.Clock.Advance(time.Minute)
	body = htmx("/auth/verify", url.Values{"email": {"cool@example.com"}, "mode": {"sign-in"}, "otp": {wrongCode(code, 2)}, "resendAfter": {deadline[1]}})
	if m := resend.FindStringSubmatch(body); m == nil || m[1] != "0" || m[2] != "" {
		t.Fatalf("after the cooldown, the resend button: %v", m)
	}
}

// Issue 18's identity: the footer links the operator's policies when they are configured
// (SITE_PRIVACY_URL, SITE_TERMS_URL), on every page, errors included; the header marks the page
// it is on with aria-current instead of linking to it; the sign-in page is focused (no header,
// the logo above the card) and preloads the self-hosted font its stylesheet names.
func TestPages_FooterPoliciesAndCurrentPage(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("SITE_PRIVACY_URL", "https://example.com/privacy"), testkit.WithEnv("SITE_TERMS_URL", "/terms"))
	s := e.SignIn("ada@example.com")
	for _, path := range []string{"/", "/auth/sign-in", "/no-such-page", "/account"} {
		r := testkit.Request{Path: path}
		if path == "/no-such-page" || path == "/account" {
			r.Cookies = s.Cookies()
		}
		body := string(e.Do(r).Body)
		if !strings.Contains(body, `href="https://example.com/privacy"`) || !strings.Contains(body, `href="/terms"`) {
			t.Errorf("%s: the footer does not link the policies", path)
		}
	}
	bare := testkit.New(t, testkit.SQLite)
	if body := string(bare.Get("/").Body); strings.Contains(body, ">Privacy<") || strings.Contains(body, ">Terms<") {
		t.Error("the footer links policies nobody configured")
	}
	account := string(e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()}).Body)
	if !strings.Contains(account, `<span aria-current="page"`) || strings.Contains(account, `<a href="/account"`) {
		t.Error("the account page's header links to itself rather than marking it current")
	}
	signIn := string(e.Get("/auth/sign-in").Body)
	if strings.Contains(signIn, "<header") {
		t.Error("the sign-in page, a focused page, has the site header")
	}
	if !strings.Contains(signIn, `rel="preload" href="`+static.URL("inter.woff2")+`" as="font" type="font/woff2" crossorigin="anonymous"`) {
		t.Error("the sign-in page does not preload its font")
	}
}

// A refused address change keeps the address typed in its field, to correct rather than type
// again (the page review found the field emptied under its error), with htmx and without.
func TestAccountPage_RefusedAddressChangeKeepsWhatWasTyped(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	for _, htmx := range []bool{false, true} {
		h := http.Header{"Origin": {e.URL}}
		if htmx {
			h.Set("Hx-Request", "true")
		}
		for _, typed := range []string{"ALICE@example.com", "not an address"} {
			r := e.Do(testkit.Request{Method: "POST", Path: "/account/email", Body: url.Values{"newEmail": {typed}}.Encode(),
				ContentType: "application/x-www-form-urlencoded", Cookies: s.Cookies(), Header: h})
			body := string(r.Body)
			if r.Status < 400 || r.Status > 499 || !regexp.MustCompile(`<input id="new-email"[^>]* value="`+regexp.QuoteMeta(typed)+`"[^>]* aria-invalid="true"`).MatchString(body) {
				t.Fatalf("htmx %v, %q refused: %d\n%s", htmx, typed, r.Status, body)
			}
		}
	}
}
