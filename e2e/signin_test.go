package e2e

import (
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/models"

	"github.com/chromedp/chromedp"
)

// signInFlow types an address on the page's first step and returns the code that was mailed.
func (tab *Tab) requestCode(email string) string {
	tab.t.Helper()
	tab.do(chromedpSendKeys("#email", email), chromedpClick("#code-send-form button[type=submit]"))
	tab.waitFor(`!!document.querySelector('#otp')`)
	code := tab.env.Mailer.LastCode(strings.ToLower(strings.TrimSpace(email)))
	if code == "" {
		tab.t.Fatalf("no code was mailed to %s", email)
	}
	return code
}

// A pasted code with stray spaces is cleaned and verifies by itself; the session is set and the
// page moves on.
func TestBrowser_SignInWithPastedCode(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	tab.screenshot("sign-in")
	code := tab.requestCode("alice@example.com")
	tab.screenshot("sign-in-code")
	if got := tab.text("[data-testid=address-chip] #entry-address"); got != "alice@example.com" {
		t.Fatalf("code step names %q", got)
	}
	tab.paste("#otp", " "+code[:3]+" "+code[3:]+" ")
	tab.waitPath("/")
	if tab.sessionCookie() == "" {
		t.Fatal("no session cookie after verifying")
	}
	me := tab.me()
	user, _ := me["user"].(map[string]any)
	if user["email"] != "alice@example.com" {
		t.Fatalf("/api/me = %v", me)
	}
	if n := env.Count(&models.User{}); n != 1 {
		t.Fatalf("users = %d", n)
	}
}

// A wrong code keeps the code step, says so in the alert region, empties the input and keeps the
// focus on it; no session is made. Typing digits on the keyboard verifies by itself too.
func TestBrowser_WrongCodeStaysOnTheCodeStep(t *testing.T) {
	env := testkit.New(t, testkit.Postgres)
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	code := tab.requestCode("bob@example.com")
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	tab.do(chromedpSendKeys("#otp", wrong))
	tab.waitFor(`document.querySelector('#code-error').textContent.includes('not right')`)
	// The error is on the input too (issue 18's design): marked invalid for screen readers, and
	// red for the eye.
	if got := eval[string](tab, `document.querySelector('#otp').getAttribute('aria-invalid') + ' ' + getComputedStyle(document.querySelector('#otp')).borderTopColor`); got != "true rgb(220, 38, 38)" {
		t.Errorf("after a wrong code the input is %q, want aria-invalid true and a red border", got)
	}
	tab.screenshot("sign-in-wrong-code")
	if v := eval[string](tab, `document.querySelector('#otp').value`); v != "" {
		t.Fatalf("the input kept %q", v)
	}
	tab.waitFor(`document.activeElement && document.activeElement.id === 'otp'`)
	// The resend button keeps cooling down through the wrong code's answer (issue 18 #3).
	if !eval[bool](tab, `document.querySelector('button[data-cooldown]').disabled`) {
		t.Fatal("a wrong code enabled the resend button at once")
	}
	if eval[string](tab, `document.querySelector('#code-error').getAttribute('role')`) != "alert" {
		t.Fatal("the error is not in an alert region")
	}
	if tab.sessionCookie() != "" || env.Count(&models.Session{}) != 0 {
		t.Fatal("a wrong code made a session")
	}
	if tab.location() != env.URL+"/auth/sign-in" {
		t.Fatalf("moved to %s", tab.location())
	}
	// Typing the next code takes the error away; the right code, typed key by key, goes through.
	tab.do(chromedpSendKeys("#otp", code[:1]))
	if got := eval[string](tab, `(document.querySelector('#otp').getAttribute('aria-invalid') || '') + '|' + document.querySelector('#code-error').textContent.trim()`); got != "|" {
		t.Fatalf("typing a new code left the error: %q", got)
	}
	tab.do(chromedpSendKeys("#otp", code[1:]))
	tab.waitPath("/")
	if tab.sessionCookie() == "" {
		t.Fatal("no session after the right code")
	}
}

// The resend button shows its cooldown and is disabled while it runs.
func TestBrowser_ResendCooldown(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	tab.requestCode("carol@example.com")
	tab.waitFor(`document.querySelector('button[data-cooldown]').disabled && document.querySelector('button[data-cooldown]').textContent.includes(' s)')`)
	label := tab.text("button[data-cooldown]")
	if !strings.Contains(label, " s)") || !eval[bool](tab, `document.querySelector('button[data-cooldown]').disabled`) {
		t.Fatalf("resend button %q is not counting down", label)
	}

	// Without JavaScript the button is a plain form, enabled: a resend says the code went out
	// again, on the code step.
	plain := newTab(t, env)
	plain.javascriptOff()
	plain.open("/auth/sign-in")
	plain.do(chromedpSendKeys("#email", "dave@example.com"), chromedpClick("#code-send-form button[type=submit]"))
	plain.waitFor(`!!document.querySelector('#otp')`)
	plain.do(chromedpClick("button[data-cooldown]"))
	plain.waitFor(`!!document.querySelector('[data-testid=code-resent]')`)
	if got := plain.text("[data-testid=address-chip] #entry-address"); got != "dave@example.com" {
		t.Fatalf("the resent code step names %q", got)
	}
	plain.screenshot("sign-in-code-resent")
}

// Sign-up with the opt-in ticked grants marketing consent once the session exists; unticked
// sends nothing. Both go through the one verify endpoint.
func TestBrowser_SignUpWithAndWithoutOptIn(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	for _, optIn := range []bool{true, false} {
		tab := newTab(t, env)
		tab.open("/auth/sign-up")
		if optIn {
			tab.screenshot("sign-up")
		}
		email := "news-no@example.com"
		if optIn {
			email = "news-yes@example.com"
		}
		// With JavaScript the box shows from the first step, and a tick there survives the swap.
		if !eval[bool](tab, `document.querySelector('#marketing-opt-in').offsetParent !== null`) {
			t.Fatal("the opt-in box is hidden on the first step")
		}
		if optIn {
			tab.do(chromedpClick("#marketing-opt-in"))
		}
		code := tab.requestCode(email)
		tab.do(chromedpSendKeys("#otp", code))
		tab.waitPath("/")
		prefs, _ := tab.me()["preferences"].(map[string]any)
		if prefs["marketingOptIn"] != optIn {
			t.Fatalf("opt-in %v: preferences %v", optIn, prefs)
		}
		var events int64
		env.DB.Model(&models.ConsentEvent{}).Count(&events)
		if want := int64(1); events != want {
			t.Fatalf("opt-in %v: %d consent events, want %d", optIn, events, want)
		}
	}
}

// A private page sends an anonymous visitor to sign in, and back to the page afterwards.
func TestBrowser_PrivatePageRedirectsToSignInAndBack(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/account?tab=profile")
	tab.waitPath("/auth/sign-in?redirect=%2Faccount%3Ftab%3Dprofile")
	code := tab.requestCode("dave@example.com")
	tab.do(chromedpSendKeys("#otp", code))
	tab.waitPath("/account?tab=profile")
	if got := tab.text("[data-testid=account-email]"); got != "dave@example.com" {
		t.Fatalf("account page shows %q", got)
	}
}

// With JavaScript off every step is a whole page: the sign-in works, and a wrong code says so.
func TestBrowser_JavaScriptOff(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.javascriptOff()
	tab.open("/auth/sign-in?redirect=/account")
	tab.do(chromedpSendKeys("#email", "erin@example.com"), chromedpClick("#code-send-form button[type=submit]"))
	tab.waitFor(`!!document.querySelector('#otp')`)
	code := env.Mailer.LastCode("erin@example.com")
	tab.do(chromedpSendKeys("#otp", "999999"), chromedpClick("#code-verify-form button[type=submit]"))
	tab.waitFor(`!!document.querySelector('#code-error') && document.querySelector('#code-error').textContent.includes('not right')`)
	if code == "999999" {
		t.Skip("the random code was the wrong one")
	}
	// Pasted as the e-mail shows it, with spaces (issue 18 #8): the input's maxlength and pattern
	// take it whole, and the page takes the spaces out.
	tab.do(chromedpSendKeys("#otp", " "+code[:3]+" "+code[3:]+" "), chromedpClick("#code-verify-form button[type=submit]"))
	tab.waitPath("/account")
	if got := tab.text("[data-testid=account-email]"); got != "erin@example.com" {
		t.Fatalf("account page shows %q", got)
	}
	// Sign-up with the opt-in, without JavaScript: the box travels with the code.
	tab2 := newTab(t, env)
	tab2.javascriptOff()
	tab2.open("/auth/sign-up")
	// The first step is a page of its own, which would lose a tick: the box waits for the code step.
	if eval[bool](tab2, `document.querySelector('#marketing-opt-in').offsetParent !== null`) {
		t.Fatal("without JavaScript the opt-in box shows on the first step, where a tick is lost")
	}
	tab2.do(chromedpSendKeys("#email", "frank@example.com"), chromedpClick("#code-send-form button[type=submit]"))
	tab2.waitFor(`!!document.querySelector('#otp')`)
	tab2.do(chromedpClick("#marketing-opt-in"), chromedpSendKeys("#otp", env.Mailer.LastCode("frank@example.com")),
		chromedpClick("#code-verify-form button[type=submit]"))
	tab2.waitPath("/")
	var ud models.UserData
	env.DB.Joins("JOIN users ON users.id = user_data.user_id").Where("users.email = ?", "frank@example.com").Take(&ud)
	if !ud.MarketingOptIn {
		t.Fatal("the opt-in was lost without JavaScript")
	}
}

// The keyboard alone is enough: the address field has the focus, Enter sends the code, the code
// field then has the focus, and typing the digits signs in.
func TestBrowser_KeyboardOnly(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	tab.waitFor(`document.activeElement && document.activeElement.id === 'email'`)
	tab.do(chromedp.KeyEvent("heidi@example.com\r"))
	tab.waitFor(`document.activeElement && document.activeElement.id === 'otp'`)
	tab.do(chromedp.KeyEvent(env.Mailer.LastCode("heidi@example.com")))
	tab.waitPath("/")
	if tab.sessionCookie() == "" {
		t.Fatal("not signed in")
	}
}
