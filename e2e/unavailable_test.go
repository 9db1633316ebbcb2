package e2e

import (
	"strings"
	"testing"

	"codeauth/internal/testkit"
)

// Catalogue R1 (ASVS 16.5.1): with the database unavailable the pages say so in words, with
// nothing of the cause: the code step's request answers in the page's alert region, and a page
// that needs the database is a page of its own. Both ask to try again in a moment.
func TestBrowser_DatabaseUnavailable(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/auth/sign-in")
	// Writes are refused from here on (the one connection of the embedded database goes
	// read-only, as a read-only file would): asking for a code fails.
	if err := env.DB.Exec("PRAGMA query_only = 1").Error; err != nil {
		t.Fatal(err)
	}
	tab.do(chromedpSendKeys("#email", "alice@example.com"), chromedpClick("#code-send-form button[type=submit]"))
	tab.waitFor(`(document.querySelector('#flash')?.textContent || '').includes('try again in a moment')`)
	tab.screenshot("unavailable-code-request")

	// Reads fail too once the pool is closed: a page that reads the database is a 503 page.
	sqlDB, _ := env.DB.DB()
	sqlDB.Close()
	tab.open("/checkout/success?purchase=00000000-0000-4000-8000-000000000000")
	if text := tab.text("main"); !strings.Contains(text, "try again in a moment") || strings.Contains(strings.ToLower(text), "sql") {
		t.Fatalf("the page with the database down says %q", text)
	}
	tab.screenshot("unavailable-page")
}
