package e2e

import (
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// signedIn signs the tab in through the sign-in page.
func (tab *Tab) signedIn(email string) {
	tab.t.Helper()
	tab.open("/auth/sign-in")
	code := tab.requestCode(email)
	tab.do(chromedpSendKeys("#otp", code))
	tab.waitPath("/")
}

// The account page shows the address, changes the name, grants the opt-in, and signs out.
func TestBrowser_AccountPage(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.open("/")
	tab.screenshot("home")
	tab.signedIn("grace@example.com")
	tab.open("/account")
	if got := tab.text("[data-testid=account-email]"); got != "grace@example.com" {
		t.Fatalf("account page shows %q", got)
	}
	tab.screenshot("account")
	tab.do(chromedpSendKeys("#name", "Grace Hopper"), chromedpClick("#name-form button[type=submit]"))
	tab.waitFor(`document.querySelector('#name-status').textContent.includes('Saved')`)
	// After each swap the focus is on its news, not dropped to <body> (issue 18 #2).
	tab.waitFor(`document.activeElement && document.activeElement.id === 'name-status'`)
	tab.do(chromedpClick("#consent-status button"))
	tab.waitFor(`document.querySelector('[data-testid=consent]').textContent.includes('You receive')`)
	// The switch keeps the focus, and says its new state.
	tab.waitFor(`document.activeElement && document.activeElement.dataset.testid === 'consent-switch' && document.activeElement.getAttribute('aria-checked') === 'true'`)
	tab.screenshot("account-saved")
	me := tab.me()
	user, _ := me["user"].(map[string]any)
	prefs, _ := me["preferences"].(map[string]any)
	if user["name"] != "Grace Hopper" || prefs["marketingOptIn"] != true {
		t.Fatalf("/api/me = %v", me)
	}
	var ev models.ConsentEvent
	env.DB.Take(&ev)
	if ev.Source != "/account" || ev.Wording == "" || ev.UserAgent == "" {
		t.Fatalf("consent evidence %+v", ev)
	}
	// Sign out from the header: back to sign-in, and the account is private again.
	tab.do(chromedpClick("header form[action='/auth/sign-out'] button"))
	tab.waitPath("/auth/sign-in")
	if tab.sessionCookie() != "" || env.Count(&models.Session{}) != 0 {
		t.Fatal("the session survived signing out")
	}
	tab.open("/account")
	tab.waitPath("/auth/sign-in?redirect=%2Faccount")
}

// The checkout page shows the guest purchase, with the address prefilled; verifying it links the
// purchase to the new account. An existing account claims it the same way.
func TestBrowser_CheckoutClaim(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	purchase := func(email string) models.Purchase {
		p := models.Purchase{ID: uuid.NewString(), Email: email, Product: "Pro plan", PurchasedAt: env.Clock.Now(), CreatedAt: env.Clock.Now()}
		if err := env.DB.Create(&p).Error; err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, existing := range []bool{false, true} {
		email := "buyer-new@example.com"
		if existing {
			email = "buyer-old@example.com"
			env.SignIn(email) // the account exists before the purchase
		}
		p := purchase(email)
		tab := newTab(t, env)
		tab.open("/checkout/success?purchase=" + p.ID)
		if got := tab.text("[data-testid=product]"); got != "Pro plan" {
			t.Fatalf("checkout shows %q", got)
		}
		if v := eval[string](tab, `document.querySelector('#email').value`); v != email {
			t.Fatalf("address prefilled as %q", v)
		}
		if !existing {
			tab.screenshot("checkout")
		}
		tab.do(chromedpClick("#code-send-form button[type=submit]"))
		tab.waitFor(`!!document.querySelector('#otp')`)
		tab.do(chromedpSendKeys("#otp", env.Mailer.LastCode(email)))
		tab.waitFor(`!!document.querySelector('[data-testid=claimed]')`)
		tab.waitFor(`document.activeElement && document.activeElement.dataset.testid === 'claimed'`)
		// The page is the owner's now: signed in in the header, no instruction to confirm the
		// address any more (issue 18 #4).
		if !eval[bool](tab, `!!document.querySelector('header form[action="/auth/sign-out"]') && !document.querySelector('#code-entry')`) {
			t.Fatal("after the claim the header or the code entry is as before")
		}
		if !existing {
			tab.screenshot("checkout-claimed")
		}
		var got models.Purchase
		env.DB.Where("id = ?", p.ID).Take(&got)
		var user models.User
		env.DB.Where("email = ?", email).Take(&user)
		if got.UserID == nil || *got.UserID != user.ID {
			t.Fatalf("existing=%v: purchase not linked to %s", existing, user.ID)
		}
	}
	// Someone verifying another address cannot take the purchase.
	p := purchase("owner@example.com")
	tab := newTab(t, env)
	tab.open("/checkout/success?purchase=" + p.ID)
	tab.do(chromedpSetValue("#email", "thief@example.com"), chromedpClick("#code-send-form button[type=submit]"))
	tab.waitFor(`!!document.querySelector('#otp')`)
	tab.do(chromedpSendKeys("#otp", env.Mailer.LastCode("thief@example.com")))
	tab.waitFor(`!!document.querySelector('[data-testid=claim-error]')`)
	var got models.Purchase
	env.DB.Where("id = ?", p.ID).Take(&got)
	if got.UserID != nil {
		t.Fatal("the purchase went to another address")
	}
}

// The web e-mail change end to end: the account page sends a link to the new address, the link's
// page shows the change, and its button makes it.
func TestBrowser_EmailChangeByLink(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	// Long addresses, which must wrap on the link's page at 320 px (issue 18 #1).
	const old, next = "ivan.with.a.very.long.mailbox.name.indeed@subdomain.example-long-domain.com",
		"ivan.new.with.a.very.long.mailbox.name.too@subdomain.example-long-domain.com"
	tab.signedIn(old)
	tab.open("/account")
	tab.do(chromedpSendKeys("#new-email", next), chromedpClick("#email-change-form button[type=submit]"))
	tab.waitFor(`document.querySelector('#change-status').textContent.includes('We sent a link')`)
	tab.screenshot("account-change-sent")
	link := env.Mailer.Last(mail.KindChangeEmailLink, next).Link
	if link == "" {
		t.Fatal("no link mailed")
	}
	tab.open(strings.TrimPrefix(link, env.URL))
	tab.screenshotAt("verify-email", 320)
	if got := tab.text("main strong"); got != next {
		t.Fatalf("the page shows %q", got)
	}
	tab.do(chromedpClick("main form button[type=submit]"))
	tab.waitPath("/account")
	if got := tab.text("[data-testid=account-email]"); got != next {
		t.Fatalf("account page shows %q after the change", got)
	}
	tab.screenshotAt("account-long-address", 320)
	// The old address's restore link, on its page.
	restore := env.Mailer.Last(mail.KindEmailChanged, old).Link
	if restore == "" {
		t.Fatal("no restore link mailed to the old address")
	}
	tab.open(strings.TrimPrefix(restore, env.URL))
	tab.screenshotAt("restore-email", 320)
}

// Deleting from the account page signs out and lands on the grace-period page; signing in again
// brings the account back.
func TestBrowser_DeleteAndRestore(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.signedIn("judy@example.com")
	tab.open("/account")
	// Unticked, the button is refused by the server in the page's words (not the browser's own
	// bubble, which is neither styled nor in the page's language), and nothing is deleted.
	tab.do(chromedpClick("form[action='/account/delete'] button[type=submit]"))
	tab.waitFor(`document.querySelector('form[action="/account/delete"] [role=alert]')?.textContent.includes('Tick the box')`)
	// The page came back at its top: the box to tick has the focus, so it and the message are in
	// view, on a phone too.
	tab.waitFor(`document.activeElement?.id === 'delete-confirm' && document.activeElement.getAttribute('aria-invalid') === 'true'`)
	if tab.me()["user"] == nil {
		t.Fatal("an unticked delete signed the person out")
	}
	tab.do(chromedpClick("#delete-confirm"), chromedpClick("form[action='/account/delete'] button[type=submit]"))
	tab.waitFor(`location.pathname === '/auth/account-deleted' && document.readyState === 'complete'`)
	tab.screenshot("account-deleted")
	if got := tab.text("[data-testid=deleted-until]"); !strings.Contains(got, "2026") {
		t.Fatalf("the page says %q", got)
	}
	if tab.sessionCookie() != "" {
		t.Fatal("still signed in after deleting")
	}
	tab.signedIn("judy@example.com")
	tab.open("/account")
	if got := tab.text("[data-testid=account-email]"); got != "judy@example.com" {
		t.Fatalf("restored account shows %q", got)
	}
}

// Catalogue J84: with a sign-in older than auth.FreshAge the account page asks to sign in again
// before the address can change or the account be deleted; the sign-in page then has the address
// filled in, and the new code brings the forms back.
func TestBrowser_SignInAgainForSensitiveChanges(t *testing.T) {
	env := testkit.New(t, testkit.SQLite)
	tab := newTab(t, env)
	tab.signedIn("heidi@example.com")
	env.Clock.Advance(auth.FreshAge + time.Second)
	tab.open("/account")
	if n := eval[int](tab, `document.querySelectorAll('[data-testid=reauth]').length`); n != 2 {
		t.Fatalf("%d sign-in-again prompts, want 2", n)
	}
	tab.screenshot("account-reauth")
	tab.do(chromedpClick("#email-change-form a"))
	tab.waitPath("/auth/sign-in?reauth=1&redirect=%2Faccount")
	if got := eval[string](tab, `document.querySelector('#email').value`); got != "heidi@example.com" {
		t.Fatalf("the address field holds %q", got)
	}
	tab.do(chromedpClick("#code-send-form button[type=submit]"))
	tab.waitFor(`!!document.querySelector('#otp')`)
	tab.do(chromedpSendKeys("#otp", env.Mailer.LastCode("heidi@example.com")))
	tab.waitPath("/account")
	tab.waitFor(`!!document.querySelector('#new-email') && !!document.querySelector('#delete-confirm')`)
	if n := env.Count(&models.Session{}); n != 1 {
		t.Fatalf("%d sessions after signing in again, want the new one only", n)
	}
}
