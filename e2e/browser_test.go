// Package e2e drives the pages in a real headless Chromium (Debian's chromium package) against
// the real server, through chromedp.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
)

// chromiumPath finds the browser; with CI=true a missing browser fails the test, elsewhere it
// skips it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI runs the browser tests (scripts/test installs it)")
	}
	t.Skip("chromium is not installed; scripts/test installs it")
	return ""
}

// startBrowser starts the one browser of the test binary.
func startBrowser(t *testing.T) context.Context {
	path := chromiumPath(t)
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // tests run as root
			chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("no-first-run", true),
			chromedp.WindowSize(1280, 900),
		)
		alloc, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, _ = chromedp.NewContext(alloc)
		browserErr = chromedp.Do(browserCtx)
	})
	if browserErr != nil {
		t.Fatalf("starting chromium: %v", browserErr)
	}
	return browserCtx
}

// Tab is one test's browser tab, in a browser context of its own (its own cookies), with the
// page's console errors, exceptions and CSP violations collected.
type Tab struct {
	ctx      context.Context
	t        *testing.T
	env      *testkit.Env
	mu       sync.Mutex
	problems []string
	// jsOff: the page's scripts are off (javascriptOff).
	jsOff bool
}

// tabDeadline bounds everything one tab does.
const tabDeadline = 4 * time.Minute

// newTab opens a tab for env's server.
func newTab(t *testing.T, env *testkit.Env) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(startBrowser(t), chromedp.WithNewBrowserContext())
	// A guard against a hung page, not a measure of speed: a tab of many pages in several
	// languages took over a minute on a CI host also building the image and running -race.
	ctx, cancelTimeout := context.WithTimeout(ctx, tabDeadline)
	tab := &Tab{ctx: ctx, t: t, env: env}
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e.Level == cdplog.EntryLevelError && !strings.Contains(e.Text, "Failed to load resource") {
				tab.problem("console: " + e.Text)
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			tab.problem("exception: " + ev.ExceptionDetails.Text)
		}
	}()
	t.Cleanup(tab.checkProblems)
	return tab
}

func (tab *Tab) problem(s string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	tab.problems = append(tab.problems, s)
}

// checkProblems fails the test for any script error or Content-Security-Policy violation.
func (tab *Tab) checkProblems() {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for _, p := range tab.problems {
		tab.t.Errorf("the page reported %s", p)
	}
}

// do runs actions, failing the test on error.
func (tab *Tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	if err := chromedp.Do(tab.ctx, actions...); err != nil {
		tab.t.Fatalf("browser: %v (at %s)", err, tab.location())
	}
}

func (tab *Tab) location() string {
	loc, _ := chromedp.Run(tab.ctx, chromedp.Location())
	return loc
}

// open navigates to path on the server and waits for the page.
func (tab *Tab) open(path string) {
	tab.t.Helper()
	tab.do(chromedp.Navigate(tab.env.URL+path), chromedp.WaitReady("body"))
}

// text returns the text of the first element matching the CSS selector.
func (tab *Tab) text(sel string) string {
	tab.t.Helper()
	s, err := chromedp.Run(tab.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tab.t.Fatalf("text of %s: %v (at %s)", sel, err, tab.location())
	}
	return s
}

// eval evaluates a JavaScript expression (awaiting promises) into T.
func eval[T any](tab *Tab, js string) T {
	tab.t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		tab.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true, across page navigations.
func (tab *Tab) waitFor(js string) {
	tab.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(tab.ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(25 * time.Millisecond)
	}
	tab.t.Fatalf("waiting for %s: %v (at %s)", js, last, tab.location())
}

// waitPath waits until the page is at path (and query).
func (tab *Tab) waitPath(path string) {
	tab.t.Helper()
	tab.waitFor(fmt.Sprintf("location.pathname + location.search === %q && document.readyState === 'complete'", path))
}

// sessionCookie returns the session cookie the browser holds for the server, or "".
func (tab *Tab) sessionCookie() string {
	tab.t.Helper()
	res, err := chromedp.Call(tab.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{tab.env.URL + "/"}})
	if err != nil {
		tab.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "auth.session_token" {
			return c.Value
		}
	}
	return ""
}

// me reads /api/me from inside the page, with the browser's cookies.
func (tab *Tab) me() map[string]any {
	tab.t.Helper()
	return eval[map[string]any](tab, `fetch('/api/me').then(r => r.status === 200 ? r.json() : {status: r.status})`)
}

// paste puts text on the clipboard and pastes it into the element, with the browser's own
// copy and paste commands (the paste event the page sees is the one a person's would be).
func (tab *Tab) paste(sel, text string) {
	tab.t.Helper()
	keys := func(command string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
			for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
				p := input.DispatchKeyEventParams{Type: typ, Key: "v", Code: "KeyV", Modifiers: 2 /* Ctrl */, WindowsVirtualKeyCode: 86}
				if typ == input.DispatchKeyEventTypeRawKeyDown {
					p.Commands = []string{command}
				}
				if _, err := cdp.Call(ctx, target, input.DispatchKeyEvent, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	tab.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const t = document.createElement('textarea');
		t.id = 'clipboard-source'; t.value = %q; document.body.appendChild(t); t.focus(); t.select();
	})()`, text)))
	tab.do(keys("copy"))
	tab.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('clipboard-source').remove()`))
	tab.do(chromedp.Focus(chromedp.CSS(sel)), keys("paste"))
}

// javascriptOff turns scripts off for the tab, for the progressive-enhancement flows.
func (tab *Tab) javascriptOff() {
	tab.t.Helper()
	tab.scripts(false)
	tab.jsOff = true
}

// scripts turns the tab's script execution on or off.
func (tab *Tab) scripts(on bool) {
	tab.t.Helper()
	if _, err := chromedp.Call(tab.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on}); err != nil {
		tab.t.Fatal(err)
	}
}

// screenshot saves the page at a phone and a desktop width, in the light and the dark scheme,
// under SCREENSHOT_DIR (default artifacts/screenshots), for people to look at; they are not
// committed. At each width and scheme the page must not overflow, and axe-core must find no
// violation (checkAxe).
func (tab *Tab) screenshot(name string) {
	tab.t.Helper()
	tab.screenshotAt(name, 360)
}

// screenshotAt is screenshot with the phone phoneWidth pixels wide.
func (tab *Tab) screenshotAt(name string, phoneWidth int64) {
	tab.t.Helper()
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tab.t.Fatal(err)
	}
	for _, scheme := range []string{"light", "dark"} {
		media := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}
		if _, err := chromedp.Call(tab.ctx, emulation.SetEmulatedMedia, media); err != nil {
			tab.t.Fatal(err)
		}
		for _, size := range []struct {
			label         string
			width, height int64
			mobile        bool
		}{{"phone", phoneWidth, 740, true}, {"desktop", 1280, 900, false}} {
			opts := []chromedp.EmulateViewportOption{}
			if size.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			tab.do(chromedp.EmulateViewport(size.width, size.height, opts...))
			// Nothing may stick out sideways at either width, nor be cut off inside its box (a
			// long word in a button); only the site's name in the header gives way, by design
			// (truncate), to the header's links.
			// Against the width emulated, not innerWidth: a mobile viewport's layout grows to fit
			// what overflows it, and innerWidth with it.
			if overflow := eval[bool](tab, fmt.Sprintf(`document.documentElement.scrollWidth > %d + 1`, size.width)); overflow {
				tab.t.Errorf("%s is wider than the %s viewport (%d px)", name, size.label, size.width)
			}
			if cut := eval[[]string](tab, `[...document.querySelectorAll('button, a, label, h1, h2, p, strong, span')]
				.filter(e => e.offsetParent !== null && e.clientWidth > 1 && !e.classList.contains('truncate') &&
					e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
				.map(e => e.textContent.trim().slice(0, 60))`); len(cut) > 0 {
				tab.t.Errorf("%s at %d px cuts off %q", name, size.width, cut)
			}
			tab.checkAxe(fmt.Sprintf("%s at %d px (%s)", name, size.width, scheme))
			buf, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG
			if err != nil {
				tab.t.Fatal(err)
			}
			file := name + "-" + size.label
			if scheme == "dark" {
				file += "-dark"
			}
			if err := os.WriteFile(filepath.Join(dir, file+".png"), buf, 0o644); err != nil {
				tab.t.Fatal(err)
			}
		}
	}
	if _, err := chromedp.Call(tab.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		tab.t.Fatal(err)
	}
	tab.do(chromedp.EmulateViewport(1280, 900))
}

var (
	axeOnce   sync.Once
	axeSource string
)

// axeScript is axe-core's script (npm, pinned in package.json), or "" when npm has not installed
// it; with CI=true that fails the test.
func axeScript(t *testing.T) string {
	axeOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "node_modules", "axe-core", "axe.min.js"))
		if err == nil {
			axeSource = string(b)
		}
	})
	if axeSource == "" && os.Getenv("CI") == "true" {
		t.Fatal("axe-core is not installed (CI=true): scripts/test runs npm ci")
	}
	return axeSource
}

// checkAxe runs axe-core on the page as it is (WCAG 2.0-2.2 A and AA, and axe's best practices)
// and fails the test for each violation, naming the rule and the elements. DevTools evaluation
// is not subject to the page's Content-Security-Policy, so the page needs no exception for it.
func (tab *Tab) checkAxe(where string) {
	tab.t.Helper()
	src := axeScript(tab.t)
	if src == "" {
		return
	}
	// A tab in the background gets its timers throttled, which axe waits on.
	if _, err := chromedp.Call(tab.ctx, page.BringToFront, cdp.Empty{}); err != nil {
		tab.t.Fatal(err)
	}
	// axe needs timers, which a tab without scripts does not run: they are on for the check
	// only (the page's own scripts, skipped when it loaded, stay unrun).
	if tab.jsOff {
		tab.scripts(true)
		defer tab.scripts(false)
	}
	// Colours settle first: a change of scheme runs the pages' colour transitions.
	tab.waitFor(`document.getAnimations().every(a => a.playState !== 'running')`)
	if !eval[bool](tab, `typeof window.axe === 'object'`) {
		tab.do(chromedp.Evaluate[chromedp.Void](src))
	}
	found := eval[[]string](tab, `axe.run(document, {resultTypes: ['violations'],
		runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}})
		.then(r => r.violations.map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).slice(0, 4).join(', ') + ': ' + v.nodes[0].failureSummary))`)
	for _, v := range found {
		tab.t.Errorf("axe-core, %s: %s", where, v)
	}
}
