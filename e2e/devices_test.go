package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"

	"github.com/chromedp/chromedp"
)

// signInElsewhere signs email in from another device, through the API, as an app or another
// browser would.
func signInElsewhere(t *testing.T, env *testkit.Env, email, userAgent, ip string) string {
	t.Helper()
	code := env.SendCode(email)
	r := env.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code}, "User-Agent", userAgent, "X-Forwarded-For", ip)
	if r.Status != http.StatusOK {
		t.Fatalf("signing in from %q: %d %s", userAgent, r.Status, r.Body)
	}
	return r.Header.Get("set-auth-token")
}

// viaProxy names the tests' loopback peer a trusted proxy, so the X-Forwarded-For of
// signInElsewhere is an address the pages show (a client's own writing is never shown).
var viaProxy = testkit.WithEnv("AUTH_TRUSTED_PROXIES", "127.0.0.1")

// stillSignedIn reports whether the bearer token still gets its session from the database.
func stillSignedIn(t *testing.T, env *testkit.Env, bearer string) bool {
	t.Helper()
	r := env.Get("/api/auth/get-session?disableCookieCache=true", "Authorization", "Bearer "+bearer)
	return r.Status == http.StatusOK && string(r.Body) != "null"
}

// The devices card at a phone's width: every device named as people read them, nothing wider
// than a 320 px screen (a long IPv6 address included), one device signed out in place with the
// focus on what happened, then every other; and the same card without JavaScript.
func TestBrowser_DevicesCard(t *testing.T) {
	env := testkit.New(t, testkit.SQLite, viaProxy) // the other devices' addresses, as a proxy forwards them
	const email = "a-rather-long-address-for-a-small-screen@example.com"
	laptop := signInElsewhere(t, env, email,
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "2001:db8:85a3:1234:5678:8a2e:370:7334")
	env.Clock.Advance(3 * time.Hour)
	phone := signInElsewhere(t, env, email,
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "203.0.113.9")
	env.Clock.Advance(time.Minute)
	app := signInElsewhere(t, env, email, "okhttp/4.12.0", "198.51.100.20")

	tab := newTab(t, env)
	tab.signedIn(email)
	tab.do(chromedp.EmulateViewport(320, 740, chromedp.EmulateMobile))
	tab.open("/account#devices")
	names := eval[[]string](tab, `[...document.querySelectorAll('[data-testid=device-name]')].map(e => e.textContent)`)
	if len(names) != 4 || names[0] != "Chrome on Linux" || names[1] != "okhttp" || names[2] != "Safari on iPhone" || names[3] != "Firefox on Windows" {
		t.Fatalf("the card names %q", names)
	}
	if got := tab.text("[data-current] .rounded-full"); got != "This device" {
		t.Fatalf("this device is marked %q", got)
	}
	if eval[bool](tab, `document.documentElement.scrollWidth > document.documentElement.clientWidth || document.documentElement.scrollWidth > 320`) {
		t.Fatal("the account page scrolls sideways at 320 px")
	}
	tab.screenshot("account-devices")

	// Sign out the phone: the card is swapped in place, without it, and says so where the focus is.
	tab.do(chromedp.EmulateViewport(320, 740, chromedp.EmulateMobile))
	tab.do(chromedpClick(`#devices li:nth-child(3) button`))
	tab.waitFor(`document.querySelector('[data-testid=devices-status]').textContent.includes('Signed out Safari on iPhone')`)
	// htmx moves the focus once the swap settles.
	tab.waitFor(`document.activeElement.id === 'devices-status'`)
	if stillSignedIn(t, env, phone) || !stillSignedIn(t, env, laptop) || !stillSignedIn(t, env, app) {
		t.Fatal("the wrong device was signed out")
	}
	if n := eval[int](tab, `document.querySelectorAll('[data-testid=device]').length`); n != 3 {
		t.Fatalf("%d devices on the card after one was signed out", n)
	}

	// Every other device: only this one stays, and this browser is still signed in.
	tab.do(chromedpClick(`form[action='/account/devices/sign-out-others'] button`))
	tab.waitFor(`document.querySelector('[data-testid=devices-status]').textContent.includes('Signed out 2 other devices')`)
	if stillSignedIn(t, env, laptop) || stillSignedIn(t, env, app) {
		t.Fatal("another device is still signed in")
	}
	tab.open("/account")
	if n := eval[int](tab, `document.querySelectorAll('[data-testid=device]').length`); n != 1 {
		t.Fatalf("%d devices listed after signing out the others", n)
	}

	// Without JavaScript the same card works by plain forms.
	other := signInElsewhere(t, env, email, "curl/8.5.0", "198.51.100.21")
	tab.javascriptOff()
	tab.open("/account")
	tab.do(chromedpClick(`#devices li:nth-child(2) button`))
	tab.waitFor(`document.querySelectorAll('[data-testid=device]').length === 1`)
	if !strings.HasSuffix(tab.location(), "/account#devices") || stillSignedIn(t, env, other) {
		t.Fatalf("without JavaScript: at %s, the device still signed in: %v", tab.location(), stillSignedIn(t, env, other))
	}
}
