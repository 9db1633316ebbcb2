package handlers_test

// Attacks on the sign-in link (AUTH_SIGNIN_LINK) by an outside review: each test is a weakness it
// found, now fixed.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"
)

// askWith asks for a sign-in code on the page as a browser would, with the given cookies and
// extra headers, and returns the Set-Cookie of the binding and the e-mail's link.
func askWith(t *testing.T, e *testkit.Env, email string, cookies []*http.Cookie, extra http.Header) (*testkit.Response, string) {
	t.Helper()
	h := http.Header{"Origin": {e.URL}, "User-Agent": {firefoxOnWindows}}
	for k, v := range extra {
		h[k] = v
	}
	r := e.Do(testkit.Request{Method: "POST", Path: "/auth/code", Body: url.Values{"email": {email}}.Encode(),
		ContentType: "application/x-www-form-urlencoded", Cookies: cookies, Header: h})
	if r.Status != http.StatusOK {
		t.Fatalf("asking for a code: %d %s", r.Status, r.Body)
	}
	return r, linkOf(t, e, email)
}

// Finding 1 (ASVS 14.2.1 / CS-FP "URL tokens", security.md §2.7): the landing page's URL carries
// the token, but it is served with Referrer-Policy strict-origin-when-cross-origin, unlike
// /auth/verify-email and /auth/restore-email (no-referrer). The full URL, token included, goes
// out as Referer with every same-origin request the page makes (its stylesheet and scripts, the
// "Ask for a new code" link), into CDN/proxy access logs that record the Referer.
func TestSignInLinkAttack_LandingPageSendsNoReferrer(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks)
	_, link := askOnPage(t, e, "referer@example.com", nil)
	for _, target := range []string{link, auth.SignInLinkPath + "?token=made-up"} {
		r := openLink(e, target, nil)
		if got := r.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("GET %.40s…: Referrer-Policy %q, want no-referrer (the URL holds the sign-in token)", target, got)
		}
	}
}

// Finding 2a (ASVS 3.3.1, CS-CSRF "__Host- prefix against cookie injection"): the binding cookie
// that suppresses the "was it you?" warning is __Secure-, not __Host-, so any sibling subdomain
// can plant a value of its choosing for the whole site (Domain=.example.com).
func TestSignInLinkAttack_BindingCookieIsHostPrefixed(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks, testkit.WithSecure())
	r, _ := askWith(t, e, "prefix@example.com", nil, nil)
	raw := ""
	for _, v := range r.Header.Values("Set-Cookie") {
		if strings.Contains(v, ".signin_browser=") {
			raw = v
		}
	}
	if raw == "" {
		t.Fatal("no binding cookie set")
	}
	if !strings.HasPrefix(raw, "__Host-") {
		t.Errorf("binding cookie %q: want the __Host- prefix so no subdomain can plant it", raw)
	}
}

// Finding 2b (CS-Sess "never accept an identifier the application did not generate"; login CSRF):
// /auth/code adopts whatever binding value the client sends (16-64 bytes, unsigned) and seals
// its hash into the link. An attacker asks for a code for their own address with a value they
// chose, plants the same value in the victim's browser (cookie injection, 2a), and sends the
// victim the link: the page drops the "Was it you who asked for this code?" warning and offers a
// plain "Sign in" into the attacker's account.
func TestSignInLinkAttack_ClientChosenBindingIsNotHonoured(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks)
	chosen := &http.Cookie{Name: "auth.signin_browser", Value: "attacker-chosen-value-0001"}
	r, link := askWith(t, e, "attacker@example.com", []*http.Cookie{chosen}, nil)
	if c := r.Cookie("auth.signin_browser"); c != nil && c.Value == chosen.Value {
		t.Errorf("the server kept the client-chosen binding %q", c.Value)
	}
	// The victim's browser, holding the planted value, opens the attacker's link.
	page := openLink(e, link, []*http.Cookie{chosen})
	if page.Status != http.StatusOK {
		t.Fatalf("link page: %d", page.Status)
	}
	if !strings.Contains(string(page.Body), `data-testid="other-device"`) {
		t.Error("a browser holding an attacker-chosen binding sees the attacker's link as its own: no other-device warning")
	}
}

// Finding 3 (ASVS 6.6.2, "not usable for a previous or subsequent request"): a link whose code
// was already used is still compared against the address's *current* code, spending one of its
// attempts each time (and counting toward the address's failure lock). Five presses of an old
// link (an old e-mail clicked again, a forwarded or leaked link) kill the code just sent, though
// the server can tell from the token that the link is stale.
func TestSignInLinkAttack_StaleLinkSpendsNoAttemptOfTheNextCode(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks)
	const email = "stale@example.com"
	_, old := askOnPage(t, e, email, nil)
	if r := pressButton(e, old, nil); r.Status != http.StatusSeeOther {
		t.Fatalf("first use of the link: %d", r.Status)
	}
	e.SendCode(email) // the person asks for a new code later
	fresh := e.Mailer.LastCode(email)
	for range auth.OTPMaxAttempts {
		if r := pressButton(e, old, nil); r.Status != http.StatusBadRequest {
			t.Fatalf("stale link: %d", r.Status)
		}
	}
	var v models.Verification
	e.DB.Take(&v, "email = ?", email)
	if v.Attempts != 0 {
		t.Errorf("the stale link spent %d attempts of the new code", v.Attempts)
	}
	if r := signIn(e, email, fresh); r.Status != http.StatusOK {
		t.Errorf("the new, correct code after the old link was pressed %d times: %d %s", auth.OTPMaxAttempts, r.Status, r.Body)
	}
}

// Finding 4: the "other device" warning, the feature's defence against a forwarded link, shows a
// network address the asker chooses. With the default configuration a single X-Forwarded-For
// from the client is believed (the connection here is 127.0.0.1), so the attacker can make the
// warning show the victim's own network; a two-hop header blanks it ("from the network ,").
func TestSignInLinkAttack_WarningShowsNoClientChosenNetwork(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks)
	_, link := askWith(t, e, "spoof@example.com", nil, http.Header{"X-Forwarded-For": {"198.51.100.77"}})
	if body := string(openLink(e, link, nil).Body); strings.Contains(body, "198.51.100.77") {
		t.Error("the warning names the network the asker wrote in X-Forwarded-For (198.51.100.77) as where the code was asked from")
	}
	_, link = askWith(t, e, "blank@example.com", nil, http.Header{"X-Forwarded-For": {"198.51.100.1, 198.51.100.2"}})
	if body := string(openLink(e, link, nil).Body); strings.Contains(body, `from the network <strong class=""></strong>`) {
		t.Error("an unresolvable address leaves the warning's network blank")
	}
}

// Finding 5 (ASVS 16.3.1, 16.3.3): a sign-in through the link is audited exactly as a typed code
// ({"method":"email-otp"}), so a forwarded or stolen link's use cannot be told apart afterwards.
func TestSignInLinkAttack_AuditTellsLinkFromCode(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withSignInLinks)
	_, link := askOnPage(t, e, "audited@example.com", nil)
	if r := pressButton(e, link, nil); r.Status != http.StatusSeeOther {
		t.Fatalf("link sign-in: %d", r.Status)
	}
	var ev models.AuditEvent
	if err := e.DB.Where("action IN ?", []string{auth.AuditSignIn, "user.signed_up"}).Order("at desc").Take(&ev).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ev.Detail, `"method":"email-otp"`) {
		t.Errorf("the link sign-in is audited as a typed code: %s %s", ev.Action, ev.Detail)
	}
}
