package e2e

import (
	"testing"
	"time"

	"codeauth/internal/testkit"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The language switch in the footer changes the page's language where it is, with JavaScript and
// without; the pages in German and French, whose words run longer than English ones, fit a 390 px
// phone and a desktop, nothing cut off or sticking out (screenshots in artifacts/screenshots).
func TestBrowser_Languages(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	signInElsewhere(t, env, "wilhelmine.von.hohenzollern-sigmaringen@example.com",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "2001:db8:85a3:1234:5678:8a2e:370:7334")
	env.Clock.Advance(2 * time.Hour)

	tab := newTab(t, env)
	if _, err := chromedp.Call(tab.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "en-US"}}); err != nil {
		t.Fatal(err)
	}
	tab.open("/auth/sign-up?redirect=%2Faccount")
	if got := eval[string](tab, `document.documentElement.lang`); got != "en" {
		t.Fatalf("lang %q", got)
	}
	tab.switchTo("de")
	tab.waitPath("/auth/sign-up?redirect=%2Faccount")
	if got := tab.text("h1"); got != "Konto erstellen" {
		t.Fatalf("the German sign-up page's heading: %q", got)
	}

	for _, lang := range []string{"de", "fr"} {
		tab.switchTo(lang)
		tab.open("/")
		tab.screenshotAt("home-"+lang, 390)
		tab.open("/auth/sign-up")
		tab.screenshotAt("sign-up-"+lang, 390)
		tab.requestCode("wilhelmine.von.hohenzollern-sigmaringen@example.com")
		tab.screenshotAt("sign-up-code-"+lang, 390)
		tab.do(chromedpSendKeys("#otp", "000000"))
		tab.waitFor(`document.querySelector('#code-error').textContent !== ''`)
		tab.screenshotAt("sign-up-wrong-code-"+lang, 390)
		tab.open("/auth/no-such-page")
		tab.screenshotAt("error-"+lang, 390)
	}
	tab.open("/auth/sign-in")
	tab.do(chromedpSendKeys("#otp", tab.requestCode("wilhelmine.von.hohenzollern-sigmaringen@example.com")))
	tab.waitPath("/")
	for _, lang := range []string{"de", "fr", "es"} {
		tab.open("/account")
		tab.switchTo(lang)
		tab.waitPath("/account")
		tab.screenshotAt("account-"+lang, 390)
		// The header's longer links leave the site's name whole on a phone.
		tab.do(chromedp.EmulateViewport(390, 740, chromedp.EmulateMobile))
		if eval[bool](tab, `(e => e.scrollWidth > e.clientWidth)(document.querySelector('header .truncate'))`) {
			t.Errorf("%s: the header cuts the site's name at 390 px", lang)
		}
		tab.do(chromedp.EmulateViewport(1280, 900))
		tab.open("/auth/account-deleted?until=2026-04-01")
		tab.screenshotAt("account-deleted-"+lang, 390)
	}

	// Without JavaScript the switch is the same plain form.
	tab.javascriptOff()
	tab.open("/account")
	tab.switchTo("de")
	tab.waitPath("/account")
	if got := tab.text("h1"); got != "Ihr Konto" {
		t.Fatalf("the German account page's heading: %q", got)
	}
}

// switchTo presses the language switch's button for lang and waits for the page it brings back,
// in that language.
func (tab *Tab) switchTo(lang string) {
	tab.t.Helper()
	// A mark on the page the button is pressed on: the page that answers has none.
	tab.do(chromedp.Evaluate[chromedp.Void](`window.beforeSwitch = true`))
	tab.do(chromedpClick(`[data-testid=locale-switch] button[value=` + lang + `]`))
	tab.waitFor(`!window.beforeSwitch && document.readyState === 'complete' && document.documentElement.lang === '` + lang + `'`)
}
