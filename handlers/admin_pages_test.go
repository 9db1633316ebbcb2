package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// The admin pages refuse anyone but an admin, and a destructive action without its tick, and
// change nothing then.
func TestAdminPages_Refusals(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("plain@example.com")
		page := func(s testkit.Session, method, path string, form url.Values) *testkit.Response {
			return e.Do(testkit.Request{Method: method, Path: path, Body: form.Encode(), ContentType: "application/x-www-form-urlencoded",
				Cookies: s.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		}
		for _, path := range []string{"/admin", "/admin/users/" + admin.UserID} {
			if r := page(user, "GET", path, nil); r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "This page is for admins.") {
				t.Fatalf("a user at %s: %d", path, r.Status)
			}
		}
		if r := page(user, "POST", "/admin/users/"+user.UserID+"/ban", url.Values{"confirm": {"yes"}}); r.Status != http.StatusForbidden || !live(t, e, user) {
			t.Fatalf("a user banning: %d", r.Status)
		}
		for _, action := range []string{"ban", "revoke", "remove"} {
			r := page(admin, "POST", "/admin/users/"+user.UserID+"/"+action, url.Values{})
			if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "Tick the box to confirm.") || !live(t, e, user) {
				t.Fatalf("%s without the tick: %d", action, r.Status)
			}
		}
		if r := page(admin, "POST", "/admin/users/"+admin.UserID+"/remove", url.Values{"confirm": {"yes"}}); r.Status != http.StatusUnprocessableEntity ||
			!strings.Contains(string(r.Body), "You cannot remove yourself.") {
			t.Fatalf("an admin removing themself: %d", r.Status)
		}
		// An empty result says so, with the way back, instead of an empty list.
		if r := page(admin, "GET", "/admin?q=nobody-at-all", nil); r.Status != http.StatusOK ||
			!strings.Contains(string(r.Body), "No account matches “nobody-at-all”.") || strings.Contains(string(r.Body), `data-testid="admin-users"`) {
			t.Fatalf("a search that finds nothing: %d", r.Status)
		}
		if r := page(admin, "GET", "/admin?page=99", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "This page is past the last one.") {
			t.Fatalf("a page past the last: %d", r.Status)
		}
		if r := page(admin, "GET", "/admin?q=a%00b", nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "cannot be run") {
			t.Fatalf("a search with a NUL: %d", r.Status)
		}
		if r := page(admin, "GET", "/admin/users/nobody", nil); r.Status != http.StatusNotFound {
			t.Fatalf("an unknown account: %d", r.Status)
		}
		// One device's "Sign out" acts on the account of its page only: another account's session,
		// named on this page, is left alone (review of issue 16).
		other := e.SignIn("other@example.com")
		var otherSession models.Session
		e.DB.Take(&otherSession, "user_id = ?", other.UserID)
		if r := page(admin, "POST", "/admin/users/"+user.UserID+"/sessions/revoke", url.Values{"session": {otherSession.ID}}); r.Status != http.StatusUnprocessableEntity ||
			!live(t, e, other) {
			t.Fatalf("another account's session revoked from this account's page: %d", r.Status)
		}
		var ownSession models.Session
		e.DB.Take(&ownSession, "user_id = ?", user.UserID)
		if r := page(admin, "POST", "/admin/users/"+user.UserID+"/sessions/revoke", url.Values{"session": {ownSession.ID}}); r.Status != http.StatusSeeOther || live(t, e, user) {
			t.Fatalf("the account's own session: %d", r.Status)
		}
		user = e.SignIn("plain@example.com")
		// A ban length the form does not offer is refused, not read as "for good".
		if r := page(admin, "POST", "/admin/users/"+user.UserID+"/ban", url.Values{"confirm": {"yes"}, "for": {"-5h"}}); r.Status != http.StatusUnprocessableEntity ||
			!strings.Contains(string(r.Body), "Choose how long the ban lasts.") || !live(t, e, user) {
			t.Fatalf("a negative ban length: %d", r.Status)
		}
		// A reason that could disguise what it says is refused on the page, in words, as a name is,
		// at its field, and the form comes back as it was sent: the reason to correct and the
		// length chosen. The admin pages are in English, whatever the admin's language.
		refused := e.Do(testkit.Request{Method: "POST", Path: "/admin/users/" + user.UserID + "/ban",
			Body:        url.Values{"confirm": {"yes"}, "for": {"168h"}, "reason": {"pay \u202egnp.exe"}}.Encode(),
			ContentType: "application/x-www-form-urlencoded", Cookies: admin.Cookies(),
			Header: http.Header{"Origin": {e.URL}, "Accept-Language": {"de"}}})
		body := string(refused.Body)
		if refused.Status != http.StatusUnprocessableEntity || !live(t, e, user) ||
			!regexp.MustCompile(`id="ban-reason-error"[^>]*>\s*(<svg[\s\S]*?</svg>)?\s*<span>Use at most 500 characters, with no control or invisible characters.</span>`).MatchString(body) ||
			!regexp.MustCompile(`<input id="ban-reason"[^>]* value="pay \x{202e}gnp.exe"[^>]* aria-invalid="true"`).MatchString(body) ||
			!regexp.MustCompile(`<option value="168h" selected>`).MatchString(body) || strings.Contains(body, `value="24h" selected`) ||
			strings.Contains(body, `data-testid="admin-error"`) {
			t.Fatalf("a reason with a bidirectional override: %d\n%s", refused.Status, body)
		}
		r := page(admin, "POST", "/admin/users/"+user.UserID+"/ban", url.Values{"confirm": {"yes"}, "for": {"24h"}, "reason": {"spam"}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/admin/users/"+user.UserID+"?done=banned" || live(t, e, user) {
			t.Fatalf("a ban: %d %v", r.Status, r.Header.Get("Location"))
		}
	}, withAdmin)
}
