package e2e

import (
	"net/url"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/mail"
)

// The code e-mail's sign-in link (AUTH_SIGNIN_LINK) in chromium: opened in the browser that asked
// for the code, its page offers the button and signs in; opened in another browser, it first
// names the device that asked. Without JavaScript too: the page is a plain form.
func TestBrowser_SignInLink(t *testing.T) {
	env := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_SIGNIN_LINK", "true"))
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	tab.requestCode("linda.with.a.rather.long.address@example.com")
	link, err := url.Parse(env.Mailer.Last(mail.KindSignInCodeLink, "linda.with.a.rather.long.address@example.com").Link)
	if err != nil || link.RawQuery == "" {
		t.Fatalf("no sign-in link was mailed: %v", err)
	}

	// Another browser (its own cookies), without JavaScript: it asks first.
	other := newTab(t, env)
	other.javascriptOff()
	other.open(link.RequestURI())
	if !strings.Contains(other.text("[data-testid=other-device]"), "Was it you") {
		t.Fatal("the link opened elsewhere does not ask")
	}
	other.screenshot("sign-in-link-other-device")

	// The browser that asked: one press signs in.
	tab.open(link.RequestURI())
	if eval[bool](tab, `!!document.querySelector('[data-testid=other-device]')`) {
		t.Fatal("the browser that asked is asked whether it asked")
	}
	tab.screenshot("sign-in-link")
	tab.do(chromedpClick("[data-testid=sign-in-link-button]"))
	tab.waitPath("/account")
	if tab.sessionCookie() == "" {
		t.Fatal("no session after the link's button")
	}
	// Used: the other browser's button now says so.
	other.do(chromedpClick("[data-testid=sign-in-link-button]"))
	other.waitFor(`!!document.querySelector('[data-testid=link-error]')`)
	other.screenshot("sign-in-link-used")
}
