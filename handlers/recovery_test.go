package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/i18n"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// changeByCode moves the account of s to newEmail through the app flow and returns the restore
// token mailed to the address it had.
func changeByCode(t *testing.T, e *testkit.Env, s testkit.Session, oldEmail, newEmail string) string {
	t.Helper()
	if r := e.Post(requestChangePath, map[string]any{"newEmail": newEmail}, bearer(s)...); r.Status != 200 {
		t.Fatalf("request a change to %s: %d %s", newEmail, r.Status, r.Body)
	}
	code := e.Mailer.Last(mail.KindChangeEmailCode, newEmail).Code
	if r := e.Post(changeWithCode, map[string]any{"newEmail": newEmail, "otp": code}, bearer(s)...); r.Status != 200 {
		t.Fatalf("change to %s: %d %s", newEmail, r.Status, r.Body)
	}
	token, _ := linkToken(t, e.Mailer.Last(mail.KindEmailChanged, oldEmail).Link)
	return token
}

// takeOverAndDelete plays a thief holding victim@example.com's session: the account moves to
// thief@example.com and is deleted. It returns the thief's session and the restore link mailed to
// the victim's address.
func takeOverAndDelete(t *testing.T, e *testkit.Env) (testkit.Session, string) {
	t.Helper()
	thief := e.SignIn("victim@example.com")
	link := changeByCode(t, e, thief, "victim@example.com", "thief@example.com")
	if r := e.Post("/api/account/delete", nil, bearer(thief)...); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	return thief, link
}

// restore posts the restore form with token from a browser holding cookies.
func restore(e *testkit.Env, token string, cookies []*http.Cookie) *testkit.Response {
	return e.Do(testkit.Request{Method: "POST", Path: "/auth/restore-email", Body: url.Values{"token": {token}}.Encode(),
		ContentType: "application/x-www-form-urlencoded", Cookies: cookies, Header: http.Header{"Origin": {e.URL}}})
}

// Catalogue J84 (ASVS 5.0 7.5.1): asking to change the address, and deleting the account, need a
// session signed in within the last 20 minutes; an older one is told to sign in again and nothing
// happens. Completing a change asked for while fresh needs no second sign-in.
func TestFreshness_SensitiveChangesNeedARecentSignIn(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		old := e.SignIn("alice@example.com")
		// Asked for while fresh, completed a little after the window: allowed.
		e.Clock.Advance(auth.FreshAge - time.Minute)
		e.Post(requestChangePath, map[string]any{"newEmail": "alice2@example.com"}, bearer(old)...)
		code := e.Mailer.Last(mail.KindChangeEmailCode, "alice2@example.com").Code
		e.Clock.Advance(2 * time.Minute)
		if r := e.Post(changeWithCode, map[string]any{"newEmail": "alice2@example.com", "otp": code}, bearer(old)...); r.Status != 200 {
			t.Fatalf("completing a change asked for while fresh: %d %s", r.Status, r.Body)
		}
		sent := len(e.Mailer.Messages())
		for _, r := range []*testkit.Response{
			e.Post(requestChangePath, map[string]any{"newEmail": "alice3@example.com"}, bearer(old)...),
			e.Post(changeByLinkPath, map[string]any{"newEmail": "alice3@example.com"}, bearer(old)...),
			e.Post("/api/account/delete", nil, bearer(old)...),
			// Also when the input is bad: the session is checked first.
			e.Post(requestChangePath, map[string]any{"newEmail": "not an address"}, bearer(old)...),
		} {
			r.ExpectError(t, http.StatusBadRequest, "SESSION_EXPIRED")
			if string(r.Body) != `{"message":"Session expired. Re-authenticate to perform this action.","code":"SESSION_EXPIRED"}` {
				t.Fatalf("body %s", r.Body)
			}
		}
		if n := len(e.Mailer.Messages()); n != sent {
			t.Fatalf("%d e-mails sent for refused requests", n-sent)
		}
		if u := userOf(t, e, old.UserID); u.Email != "alice2@example.com" || u.DeletedAt.Valid {
			t.Fatalf("a refused request changed the account: %+v", u)
		}
		// Signing in again gives a fresh session, which may.
		again := e.SignIn("alice2@example.com")
		if r := e.Post(requestChangePath, map[string]any{"newEmail": "alice3@example.com"}, bearer(again)...); r.Status != 200 {
			t.Fatalf("fresh session: %d %s", r.Status, r.Body)
		}
		if r := e.Post("/api/account/delete", nil, bearer(again)...); r.Status != 200 {
			t.Fatalf("delete with a fresh session: %d %s", r.Status, r.Body)
		}
	})
}

// The account page offers to sign in again in place of the e-mail and deletion forms when the
// session is too old; the sign-in page then asks for a new code even though a session exists, and
// the new session replaces the old one in the browser and in the database.
func TestFreshness_AccountPageSignsInAgain(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	origin := http.Header{"Origin": {e.URL}}
	page := e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()})
	if page.Status != 200 || strings.Contains(string(page.Body), `data-testid="reauth"`) || !strings.Contains(string(page.Body), `action="/account/delete"`) {
		t.Fatalf("fresh account page: %d", page.Status)
	}
	e.Clock.Advance(auth.FreshAge + time.Second)
	page = e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()})
	body := string(page.Body)
	reauth := `href="/auth/sign-in?reauth=1&amp;redirect=%2Faccount"`
	if page.Status != 200 || strings.Count(body, `data-testid="reauth"`) != 2 || !strings.Contains(body, reauth) ||
		strings.Contains(body, `action="/account/delete"`) || strings.Contains(body, `action="/account/email"`) {
		t.Fatalf("stale account page: %d %s", page.Status, body)
	}
	// A form loaded before the session went stale is refused the same way, with and without htmx.
	post := func(path string, form url.Values, htmx bool) *testkit.Response {
		h := origin.Clone()
		if htmx {
			h.Set("HX-Request", "true")
		}
		return e.Do(testkit.Request{Method: "POST", Path: path, Body: form.Encode(), ContentType: "application/x-www-form-urlencoded", Cookies: s.Cookies(), Header: h})
	}
	for _, r := range []*testkit.Response{
		post("/account/email", url.Values{"newEmail": {"new@example.com"}}, true),
		post("/account/email", url.Values{"newEmail": {"new@example.com"}}, false),
		post("/account/delete", url.Values{"confirm": {"yes"}}, false),
	} {
		if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), reauth) {
			t.Fatalf("stale form: %d %s", r.Status, r.Body)
		}
	}
	if u := userOf(t, e, s.UserID); u.Email != "alice@example.com" || u.DeletedAt.Valid || len(e.Mailer.Find(mail.KindChangeEmailLink, "new@example.com")) != 0 {
		t.Fatal("a refused form changed something")
	}
	// Without reauth the sign-in page sends a signed-in person on; with it, it asks for a code,
	// the address filled in.
	if r := e.Do(testkit.Request{Path: "/auth/sign-in?redirect=%2Faccount", Cookies: s.Cookies()}); r.Status != http.StatusSeeOther {
		t.Fatalf("sign-in page while signed in: %d", r.Status)
	}
	r := e.Do(testkit.Request{Path: "/auth/sign-in?reauth=1&redirect=%2Faccount", Cookies: s.Cookies()})
	if r.Status != 200 || !strings.Contains(string(r.Body), "Confirm it") || !strings.Contains(string(r.Body), `value="alice@example.com"`) {
		t.Fatalf("reauth page: %d %s", r.Status, r.Body)
	}
	code := e.SendCode("alice@example.com")
	r = post("/auth/verify", url.Values{"email": {"alice@example.com"}, "otp": {code}, "mode": {"sign-in"}, "redirect": {"/account"}}, false)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" {
		t.Fatalf("verify: %d %q", r.Status, r.Header.Get("Location"))
	}
	expectNoSession(t, getSession(e, nil, bearer(s)...))
	fresh := []*http.Cookie{{Name: "auth.session_token", Value: r.Cookie("auth.session_token").Value}}
	page = e.Do(testkit.Request{Path: "/account", Cookies: fresh})
	if page.Status != 200 || strings.Contains(string(page.Body), `data-testid="reauth"`) {
		t.Fatalf("account page after signing in again: %d", page.Status)
	}
}

// Someone who took the account over and moved it twice, to addresses they hold, cannot use the
// restore link their first address received to take it back from the owner: restoring voids the
// links of every later change. In the other order the owner's older link still wins.
func TestRestore_LaterLinksDieWithARestore(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		thief := e.SignIn("victim@example.com")
		ownerLink := changeByCode(t, e, thief, "victim@example.com", "thief1@example.com")
		e.Clock.Advance(time.Minute)
		thiefLink := changeByCode(t, e, thief, "thief1@example.com", "thief2@example.com")

		if r := restore(e, ownerLink, nil); r.Status != 200 {
			t.Fatalf("owner's restore: %d", r.Status)
		}
		if r := restore(e, thiefLink, nil); r.Status != 400 {
			t.Fatalf("the thief's later link after the owner's restore: %d", r.Status)
		}
		if u := userOf(t, e, thief.UserID); u.Email != "victim@example.com" {
			t.Fatalf("address: %s", u.Email)
		}

		// The other order: the thief restores to their first address, the owner then to theirs.
		thief = e.SignIn("victim@example.com")
		ownerLink = changeByCode(t, e, thief, "victim@example.com", "thief3@example.com")
		e.Clock.Advance(time.Minute)
		thiefLink = changeByCode(t, e, thief, "thief3@example.com", "thief4@example.com")
		if r := restore(e, thiefLink, nil); r.Status != 200 {
			t.Fatalf("thief's restore: %d", r.Status)
		}
		if r := restore(e, ownerLink, nil); r.Status != 200 {
			t.Fatalf("owner's restore after the thief's: %d", r.Status)
		}
		if u := userOf(t, e, thief.UserID); u.Email != "victim@example.com" {
			t.Fatalf("address: %s", u.Email)
		}
		if n := e.Count(&models.Session{}, "user_id = ?", thief.UserID); n != 0 {
			t.Fatalf("%d sessions survived", n)
		}
	})
}

// Deleting the account does not destroy the owner's way back: after a takeover, a move to the
// thief's address and a deletion, the old address is told, and its restore link brings the
// address back and undoes the deletion. The restore page leaves a browser signed in to another
// account alone, and signs out a browser whose session it ended.
func TestRestore_UndoesADeletion(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		thief, link := takeOverAndDelete(t, e)
		notice := e.Mailer.Last(mail.KindFormerAddressDeleted, "victim@example.com")
		if !strings.Contains(notice.Text, "thief@example.com") || !strings.Contains(notice.Text, "restore link") {
			t.Fatalf("notice to the old address: %+v", notice)
		}
		if e.Mailer.Last(mail.KindAccountDeleted, "thief@example.com").Text == "" {
			t.Fatal("no deletion notice to the current address")
		}
		page := e.Get("/auth/restore-email?token=" + url.QueryEscape(link))
		if page.Status != 200 || !strings.Contains(string(page.Body), "restoring the address also cancels the deletion") {
			t.Fatalf("restore page of a deleted account: %d %s", page.Status, page.Body)
		}
		bystander := e.SignIn("bystander@example.com")
		r := restore(e, link, bystander.Cookies())
		if r.Status != 200 || !strings.Contains(r.Text(), "victim@example.com") {
			t.Fatalf("restore: %d", r.Status)
		}
		if c := r.Cookie("auth.session_token"); c != nil {
			t.Fatal("restoring signed out a browser signed in to another account")
		}
		u := userOf(t, e, thief.UserID)
		if u.Email != "victim@example.com" || u.DeletedAt.Valid {
			t.Fatalf("after the restore: %+v", u)
		}
		if back := e.SignIn("victim@example.com"); back.UserID != thief.UserID {
			t.Fatal("the owner did not get the same account back")
		}

		// A browser whose session the restore ended is signed out by the page.
		owner := e.SignIn("victim@example.com")
		link = changeByCode(t, e, owner, "victim@example.com", "new@example.com")
		r = restore(e, link, owner.Cookies())
		if c := r.Cookie("auth.session_token"); r.Status != 200 || c == nil || c.Value != "" {
			t.Fatalf("restore in the ended session's browser: %d, cookie %v", r.Status, c)
		}
	})
}

// With a grace period shorter than a restore link's life, the link dies with the account: it
// cannot bring back an account past its grace, and the notice to the old address says when it
// stops working.
func TestRestore_NotPastTheGracePeriod(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		thief, link := takeOverAndDelete(t, e)
		purgeDay := i18n.English().Date(e.Clock.Now().Add(2 * time.Hour))
		if notice := e.Mailer.Last(mail.KindFormerAddressDeleted, "victim@example.com"); !strings.Contains(notice.Text, "It works until "+purgeDay) {
			t.Fatalf("the notice does not give the purge day %s: %s", purgeDay, notice.Text)
		}
		e.Clock.Advance(2*time.Hour + time.Second)
		if r := e.Get("/auth/restore-email?token=" + url.QueryEscape(link)); r.Status != 400 {
			t.Fatalf("restore page past the grace period: %d", r.Status)
		}
		if r := restore(e, link, nil); r.Status != 400 {
			t.Fatalf("restore past the grace period: %d", r.Status)
		}
		if u := userOf(t, e, thief.UserID); !u.DeletedAt.Valid || u.Email != "thief@example.com" {
			t.Fatalf("an account past its grace came back: %+v", u)
		}
	}, testkit.WithDeletionGrace(2*time.Hour))
}
