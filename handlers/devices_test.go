package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// The account page's "Your devices" card: each session of the account as a device, with a way to
// sign out one and every other, through the real app on both databases, with and without htmx.

// Browsers of the tests, by what the card calls them.
const (
	uaChromeMac     = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	uaFirefoxWin    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
	uaSafariIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
	hostileUA       = "<script>alert(1)</script> Your account is locked, call +1 555 0100"
	deviceNameRegex = `data-testid="device-name">([^<]*)<`
)

// signInFrom signs email in from a browser sending userAgent from address ip.
func signInFrom(t *testing.T, e *testkit.Env, email, userAgent, ip string) testkit.Session {
	t.Helper()
	code := e.SendCode(email)
	r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code}, "User-Agent", userAgent, "X-Forwarded-For", ip)
	if r.Status != http.StatusOK {
		t.Fatalf("sign in from %q: %d %s", userAgent, r.Status, r.Body)
	}
	return testkit.Session{TokenCookie: r.Cookie("auth.session_token"), DataCookie: r.Cookie("auth.session_data"),
		Bearer: r.Header.Get("set-auth-token")}
}

// accountPage is the account page s sees.
func accountPage(t *testing.T, e *testkit.Env, s testkit.Session) string {
	t.Helper()
	r := e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()})
	if r.Status != http.StatusOK {
		t.Fatalf("/account: %d", r.Status)
	}
	return r.Text()
}

// deviceNames are the names the card shows, in its order.
func deviceNames(html string) []string {
	var out []string
	for _, m := range regexp.MustCompile(deviceNameRegex).FindAllStringSubmatch(html, -1) {
		out = append(out, m[1])
	}
	return out
}

// handles are the session handles of the card's sign-out forms, in its order.
func handles(html string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`name="session" value="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		out = append(out, m[1])
	}
	return out
}

// behindProxy names the tests' loopback peer a trusted proxy (AUTH_TRUSTED_PROXIES), so the
// X-Forwarded-For a test sends is the client's address as a proxy vouches for it: the address
// pages, e-mails and consent records show. Without it a client could write its own.
var behindProxy = testkit.WithEnv("AUTH_TRUSTED_PROXIES", "127.0.0.1")

func TestDevicesCard_ShowsEachSessionAsADevice(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		signInFrom(t, e, "dee@example.com", uaFirefoxWin, "203.0.113.7")
		e.Clock.Advance(2 * time.Hour)
		signInFrom(t, e, "dee@example.com", hostileUA, "203.0.113.8")
		e.Clock.Advance(time.Minute)
		phone := signInFrom(t, e, "dee@example.com", uaSafariIPhone, "2001:db8::1")
		signInFrom(t, e, "someone-else@example.com", uaChromeMac, "198.51.100.1")
		e.Clock.Advance(3 * time.Minute)

		page := accountPage(t, e, phone)
		// This browser first, then the others newest first; another account's never.
		want := []string{"Safari on iPhone", "Unknown device", "Firefox on Windows"}
		if got := deviceNames(page); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("the card lists %q, want %q", got, want)
		}
		for _, s := range []string{"This device", "Active now", "203.0.113.7", "2001:db8::1", "Active 4 minutes ago",
			"Active 2 hours ago", "signed in on 1 March 2026", `id="devices"`, "Sign out all other devices"} {
			if !strings.Contains(page, s) {
				t.Errorf("the card does not say %q", s)
			}
		}
		if strings.Contains(page, "Your account is locked") || strings.Contains(page, "<script>alert") {
			t.Error("a hostile User-Agent's words are on the page")
		}
		// A sign-out form for each other device, none for this one: the page's own sign-out is.
		if got := handles(page); len(got) != 2 {
			t.Fatalf("%d sign-out forms, want 2: %q", len(got), got)
		}
	}, behindProxy)
}

func TestDevicesCard_SignOutOneWithAndWithoutJavaScript(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		laptop := signInFrom(t, e, "ed@example.com", uaFirefoxWin, "203.0.113.7")
		e.Clock.Advance(time.Second)
		tablet := signInFrom(t, e, "ed@example.com", uaChromeMac, "203.0.113.8")
		e.Clock.Advance(time.Second)
		phone := signInFrom(t, e, "ed@example.com", uaSafariIPhone, "203.0.113.9")
		hs := handles(accountPage(t, e, phone)) // the Chrome session, then the Firefox one

		// With htmx: the card comes back without the device, saying so, and the device's
		// session ends at once, by bearer and from the database.
		r := e.Do(testkit.Request{Method: "POST", Path: "/account/devices/sign-out", Body: url.Values{"session": {hs[0]}}.Encode(),
			ContentType: "application/x-www-form-urlencoded", Cookies: phone.Cookies(),
			Header: http.Header{"Origin": {e.URL}, "HX-Request": {"true"}}})
		body := string(r.Body)
		if r.Status != http.StatusOK || strings.Contains(body, "<html") || !strings.Contains(body, "Signed out Chrome on macOS.") {
			t.Fatalf("htmx sign-out: %d %s", r.Status, body)
		}
		if got := deviceNames(body); strings.Join(got, "|") != "Safari on iPhone|Firefox on Windows" {
			t.Fatalf("the card after signing out lists %q", got)
		}
		if live(t, e, tablet) || !live(t, e, laptop) || !live(t, e, phone) {
			t.Fatal("the wrong session ended")
		}

		// Without JavaScript: a redirect back to the card, which no longer lists the device.
		r = postForm(e, "/account/devices/sign-out", url.Values{"session": {hs[1]}}, phone.Cookies()...)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account#devices" {
			t.Fatalf("sign-out without htmx: %d %v", r.Status, r.Header)
		}
		if live(t, e, laptop) {
			t.Fatal("the laptop is still signed in")
		}
		if got := deviceNames(accountPage(t, e, phone)); len(got) != 1 || got[0] != "Safari on iPhone" {
			t.Fatalf("the card lists %q", got)
		}
	})
}

// Signing out a device that is not the account's, or no longer signed in, is one refusal that
// changes nothing: another account's session cannot be ended, nor told apart from none.
func TestDevicesCard_SignOutRefusals(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		mine := signInFrom(t, e, "fay@example.com", uaChromeMac, "203.0.113.7")
		victim := signInFrom(t, e, "gus@example.com", uaFirefoxWin, "203.0.113.8")
		e.Clock.Advance(time.Second)
		victimOther := signInFrom(t, e, "gus@example.com", uaSafariIPhone, "203.0.113.9")
		theirs := handles(accountPage(t, e, victimOther))[0]
		for _, handle := range []string{theirs, strings.ToUpper(theirs), "{" + theirs + "}", "", "not-a-handle", victim.Bearer} {
			for _, htmx := range []bool{true, false} {
				h := http.Header{"Origin": {e.URL}}
				if htmx {
					h.Set("HX-Request", "true")
				}
				r := e.Do(testkit.Request{Method: "POST", Path: "/account/devices/sign-out", Body: url.Values{"session": {handle}}.Encode(),
					ContentType: "application/x-www-form-urlencoded", Cookies: mine.Cookies(), Header: h})
				if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "That device is signed out already.") {
					t.Fatalf("handle %q (htmx %v): %d %s", handle, htmx, r.Status, r.Body)
				}
			}
		}
		if !live(t, e, victim) || !live(t, e, mine) {
			t.Fatal("a refused sign-out ended a session")
		}
		// Without a session: sent to sign in, nothing ended.
		r := postForm(e, "/account/devices/sign-out", url.Values{"session": {theirs}})
		if r.Status == http.StatusOK || r.Status == http.StatusSeeOther && r.Header.Get("Location") == "/account#devices" || !live(t, e, victim) {
			t.Fatalf("signed out without a session: %d", r.Status)
		}
	})
}

func TestDevicesCard_SignOutAllOthers(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		a := signInFrom(t, e, "hal@example.com", uaFirefoxWin, "203.0.113.7")
		b := signInFrom(t, e, "hal@example.com", uaChromeMac, "203.0.113.8")
		me := signInFrom(t, e, "hal@example.com", uaSafariIPhone, "203.0.113.9")
		other := signInFrom(t, e, "ivy@example.com", uaChromeMac, "203.0.113.10")
		r := e.Do(testkit.Request{Method: "POST", Path: "/account/devices/sign-out-others", Body: "",
			ContentType: "application/x-www-form-urlencoded", Cookies: me.Cookies(),
			Header: http.Header{"Origin": {e.URL}, "HX-Request": {"true"}}})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Signed out 2 other devices.") {
			t.Fatalf("sign out others: %d %s", r.Status, r.Body)
		}
		if got := deviceNames(string(r.Body)); len(got) != 1 || strings.Contains(string(r.Body), "Sign out all other devices") {
			t.Fatalf("the card after: %q", got)
		}
		if live(t, e, a) || live(t, e, b) || !live(t, e, me) || !live(t, e, other) {
			t.Fatal("the wrong sessions ended")
		}
		// Again, without JavaScript: nothing left to end, and back to the card.
		r = postForm(e, "/account/devices/sign-out-others", url.Values{}, me.Cookies()...)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account#devices" || !live(t, e, me) {
			t.Fatalf("again: %d %v", r.Status, r.Header)
		}
	})
}

// The card's own session's handle signs this browser out, as the page's sign-out button does.
func TestDevicesCard_SignOutThisDevice(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	me := signInFrom(t, e, "jo@example.com", uaChromeMac, "203.0.113.7")
	list := listSessions(t, e, me)
	r := e.Do(testkit.Request{Method: "POST", Path: "/account/devices/sign-out", Body: url.Values{"session": {list[0].ID}}.Encode(),
		ContentType: "application/x-www-form-urlencoded", Cookies: me.Cookies(), Header: http.Header{"Origin": {e.URL}, "HX-Request": {"true"}}})
	if r.Header.Get("HX-Redirect") != "/auth/sign-in" || live(t, e, me) {
		t.Fatalf("signing out this device: %d %v", r.Status, r.Header)
	}
	if c := r.Cookie("auth.session_token"); c == nil || c.Value != "" || c.Expires.After(time.Now()) {
		t.Fatalf("the cookie was not cleared: %v", c)
	}
}

// An address the client wrote itself (X-Forwarded-For, with no proxy named in
// AUTH_TRUSTED_PROXIES) is never shown to a person as where a sign-in came from: not on the
// devices card, in list-sessions or in the new-device e-mail (security review: whoever used a
// stolen code could make the notice name the victim's own network).
func TestDevices_ClientWrittenAddressIsNotShown(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const fake = "198.51.100.77"
		signInFrom(t, e, "shown@example.com", uaFirefoxWin, "203.0.113.9")
		e.Clock.Advance(time.Hour)
		s := signInFrom(t, e, "shown@example.com", uaChromeMac, fake)
		var u models.User
		e.DB.Take(&u, "email = ?", "shown@example.com")
		var sessions []models.Session
		e.DB.Find(&sessions, "user_id = ?", u.ID)
		if len(sessions) != 2 {
			t.Fatalf("%d sessions", len(sessions))
		}
		for _, sess := range sessions {
			if sess.IPAddress != "" {
				t.Fatalf("a session records %q", sess.IPAddress)
			}
		}
		if r := e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()}); strings.Contains(string(r.Body), fake) {
			t.Fatal("the devices card shows the address the client wrote")
		}
		e.Mailer.Flush()
		for _, m := range e.Mailer.Find(mail.KindNewDevice, "shown@example.com") {
			if strings.Contains(m.Text, fake) {
				t.Fatal("the new-device notice names the address the client wrote")
			}
		}
	})
}
