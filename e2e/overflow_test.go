package e2e

import (
	"strings"
	"testing"

	"codeauth/internal/testkit"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// Issue 18 #1: a long address (77 characters here) wraps on every page and state at 320 px,
// rather than scrolling the page sideways or spilling out of its card.
func TestBrowser_LongAddressesWrapAt320(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	email := strings.Repeat("l", 40) + ".longer.than.most@subdomain.example-long-domain.com"
	if len(email) < 77 {
		email = strings.Repeat("x", 77-len(email)) + email
	}
	tab := newTab(t, env)
	tab.do(chromedp.EmulateViewport(320, 700, chromedp.EmulateMobile))
	check := func(what string) {
		t.Helper()
		if eval[bool](tab, `document.documentElement.scrollWidth > 320 + 1`) { // not innerWidth: it grows with the overflow
			t.Errorf("%s scrolls sideways at 320 px", what)
		}
		if spill := eval[[]string](tab, `[...document.querySelectorAll('.card, main p, main h1, main strong')]
			.filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > 320 + 1)
			.map(e => e.tagName + ' ' + e.textContent.trim().slice(0, 40))`); len(spill) > 0 {
			t.Errorf("%s at 320 px spills %q past the screen", what, spill)
		}
	}
	tab.open("/auth/sign-in")
	tab.requestCode(email)
	check("the code step")
	tab.do(chromedpSendKeys("#otp", env.Mailer.LastCode(email)))
	tab.waitPath("/")
	check("the front page, signed in")
	tab.open("/account")
	check("the account page")
	tab.open("/auth/sign-in?redirect=/account")
	check("the sign-in page, signed in")
}

// contrastJS lists the visible text of the elements sel matches whose contrast with the
// background behind them is under 4.5:1 (WCAG 2 AA for normal text), as "text ratio".
const contrastJS = `(sel) => {
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const bg = e => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.length >= 3 && (c.length < 4 || c[3] > 0)) return c; }
    return [255, 255, 255]; };
  return [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null && e.textContent.trim() && !e.disabled).map(e => {
    const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
    return [e.textContent.trim().slice(0, 30), (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
  }).filter(([, r]) => r < 4.5).map(([t, r]) => t + ' ' + r.toFixed(2));
}`

// Issue 18 #6: in the dark scheme the quiet links and the language switch read as links, in a
// colour of their own with enough contrast, and so does the error page's status label.
func TestBrowser_DarkLinksHaveContrast(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	for _, scheme := range []string{"light", "dark"} {
		media := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}
		if _, err := chromedp.Call(tab.ctx, emulation.SetEmulatedMedia, media); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/", "/auth/sign-in", "/auth/sign-up", "/auth/no-such-page"} {
			tab.open(path)
			if low := eval[[]string](tab, "("+contrastJS+")('.btn-quiet, footer button, main p, main a, header a')"); len(low) > 0 {
				t.Errorf("%s in %s: text under 4.5:1 contrast: %q", path, scheme, low)
			}
		}
		if scheme == "dark" {
			tab.open("/auth/sign-in")
			if c := eval[string](tab, `getComputedStyle(document.querySelector('footer button[name=locale]')).color`); c == "rgb(243, 243, 255)" {
				t.Error("the language switch is near-white in the dark scheme: it reads as plain text")
			}
		}
	}
	// A 404 an anonymous visitor sees (an unknown private path sends them to sign in instead).
	tab.open("/auth/no-such-page")
	if !strings.Contains(tab.text("main"), "404") {
		t.Fatal("/auth/no-such-page is not the error page")
	}
	tab.screenshot("not-found")
}
