package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"

	"github.com/chromedp/chromedp"
)

// The admin pages at a phone's width: find an account, open it, ban it (confirmed by a tick),
// lift the ban, sign its devices out, and remove it; and a user is refused.
func TestBrowser_AdminPages(t *testing.T) {
	env := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_ADMIN_EMAILS", "boss@example.com"), viaProxy)
	target := "a-member-with-a-rather-long-address@example.com"
	member := signInElsewhere(t, env, target, "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "203.0.113.5")
	env.Clock.Advance(time.Minute)
	signInElsewhere(t, env, "someone@example.com", "curl/8", "203.0.113.6")

	tab := newTab(t, env)
	tab.signedIn("boss@example.com")
	tab.do(chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	tab.open("/account")
	if eval[int](tab, `document.querySelectorAll('a[href="/admin"]').length`) != 1 {
		t.Fatal("an admin's header has no way to the admin pages")
	}
	tab.open("/admin?q=member")
	if got := tab.text("[data-testid=admin-total]"); got != "1 account" {
		t.Fatalf("the search found %q", got)
	}
	tab.screenshot("admin-users")
	tab.do(chromedpClick(`[data-testid=admin-users] a`))
	tab.waitFor(`document.querySelector('[data-testid=admin-user-email]')?.textContent === '` + target + `'`)
	tab.screenshot("admin-user")

	// A reason the rules refuse (a bidirectional override) comes back at its field, with what was
	// typed and chosen kept, to correct rather than type again.
	eval[string](tab, `document.querySelector('#ban-reason').value = 'pay \u202egnp.exe'; document.querySelector('#ban-for').value = '168h'`)
	tab.do(chromedpClick(`#ban-confirm`), chromedpClick(`form[action$="/ban"] button`))
	tab.waitFor(`document.querySelector('#ban-reason-error')?.textContent.includes('invisible characters')`)
	// The browser focuses the field marked autofocus on its next rendering, after the load.
	tab.waitFor(`document.activeElement?.id === 'ban-reason'`)
	if got := eval[string](tab, `JSON.stringify([document.querySelector('#ban-reason').value, document.querySelector('#ban-for').value])`); got != "[\"pay \u202egnp.exe\",\"168h\"]" {
		t.Fatalf("the refused ban's form lost what was typed: %s", got)
	}
	tab.screenshot("admin-ban-refused")
	if !stillSignedIn(t, env, member) {
		t.Fatal("a refused ban signed the member out")
	}

	// Ban: refused without the tick (the browser's own check), done with it.
	eval[string](tab, `document.querySelector('#ban-reason').value = 'spam'`)
	tab.do(chromedpClick(`#ban-confirm`), chromedpClick(`form[action$="/ban"] button`))
	tab.waitFor(`document.querySelector('[data-testid=admin-status]')?.textContent.includes('banned')`)
	if stillSignedIn(t, env, member) {
		t.Fatal("the banned member is still signed in")
	}
	if tab.text("[data-testid=admin-banned]") == "" {
		t.Fatal("the page does not show the ban")
	}
	tab.do(chromedpClick(`form[action$="/unban"] button`))
	tab.waitFor(`document.querySelector('[data-testid=admin-status]')?.textContent.includes('lifted')`)

	// The audit trail shows what was done, by an admin.
	tab.waitFor(`document.querySelector('[data-testid=admin-audit]').textContent.includes('admin.user_banned')`)
	// In words, by whom, with its detail and the action's name (the test's clock stands still, so
	// the two events share their time and either may come first).
	if got := eval[string](tab, `[...document.querySelectorAll('[data-testid=admin-audit] li')].map(li => li.innerText.replace(/\s+/g, ' ')).join('|')`); !strings.Contains(got, "Ban lifted by an admin 2026-") ||
		!regexp.MustCompile(`Banned by an admin [0-9-]+ [0-9:]+ UTC expires [0-9-]+ [0-9:]+ UTC · reason spam · sessions ended 1 · from [0-9.]+ · admin\.user_banned`).MatchString(got) {
		t.Fatalf("the audit trail reads %q", got)
	}
	tab.screenshot("admin-user-audit")

	// Remove, confirmed: back to the list, the account gone.
	tab.do(chromedpClick(`#remove-confirm`), chromedpClick(`form[action$="/remove"] button`))
	tab.waitPath("/admin")
	tab.open("/admin?q=member")
	if got := tab.text("[data-testid=admin-total]"); got != "0 accounts" {
		t.Fatalf("after the removal the search finds %q", got)
	}

	// A user is refused.
	user := newTab(t, env)
	user.signedIn("someone-else@example.com")
	r := env.Do(testkit.Request{Path: "/admin", Cookies: nil})
	if r.Status != http.StatusSeeOther && r.Status != http.StatusFound {
		t.Fatalf("/admin without a session: %d", r.Status)
	}
	user.open("/admin")
	if got := eval[string](user, `document.body.innerText`); !contains(got, "This page is for admins") {
		t.Fatalf("a user sees: %q", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
