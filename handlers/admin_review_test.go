package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// Findings of the second security review of the admin layer (issue 16): what an admin's
// authority backs ends with it, an impersonation cannot take the account away, the service never
// ends up with no admin, and the edges of bans, searches and gating.

// impersonate opens an impersonation of user by admin (bearer) and returns it.
func impersonate(t *testing.T, e *testkit.Env, admin testkit.Session, userID string) testkit.Session {
	t.Helper()
	r := adminPost(e, admin, "impersonate-user", map[string]any{"userId": userID})
	if r.Status != http.StatusOK {
		t.Fatalf("impersonate-user: %d %s", r.Status, r.Body)
	}
	return testkit.Session{Bearer: r.Header.Get("set-auth-token"), UserID: userID}
}

// A JWT of a session an admin opened as an account names the admin as the actor (act, RFC 8693
// 4.1), so a back end that trusts it can tell an admin is acting; the account's own JWTs do not.
func TestAdmin_ImpersonationJWTNamesTheAdmin(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("acted-for@example.com")
		set := fetchJWKS(t, e)
		_, own, err := verifyJWT(t, set, getToken(t, e, user.Bearer))
		if err != nil || own.Act != nil {
			t.Fatalf("the account's own JWT: %+v %v", own, err)
		}
		acting := impersonate(t, e, admin, user.UserID)
		_, claims, err := verifyJWT(t, set, getToken(t, e, acting.Bearer))
		if err != nil || claims.Sub != user.UserID || claims.Act == nil || claims.Act.Sub != admin.UserID {
			t.Fatalf("the impersonation's JWT: %+v %v", claims, err)
		}
	}, withAdmin)
}

// An impersonation rests on the admin's authority: banning, demoting or removing the admin ends
// the sessions they opened as others (ASVS 7.4.2: sessions end when the authority behind them
// goes).
func TestAdmin_BanOfAnAdminEndsTheImpersonationsTheyOpened(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		other := e.SignIn("second-admin@example.com")
		adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
		user := e.SignIn("impersonated@example.com")
		for _, end := range []struct {
			how  string
			do   func() *testkit.Response
			undo func()
		}{
			{"ban", func() *testkit.Response {
				return adminPost(e, admin, "ban-user", map[string]any{"userId": other.UserID})
			}, func() {
				adminPost(e, admin, "unban-user", map[string]any{"userId": other.UserID}).Decode(t, &struct{}{})
			}},
			{"demotion", func() *testkit.Response {
				return adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "user"})
			}, func() {
				adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
			}},
			{"removal", func() *testkit.Response {
				return adminPost(e, admin, "remove-user", map[string]any{"userId": other.UserID})
			}, nil},
		} {
			other = e.SignIn("second-admin@example.com")
			imp := impersonate(t, e, other, user.UserID)
			if !live(t, e, imp) {
				t.Fatalf("%s: the impersonation is not live to begin with", end.how)
			}
			if r := end.do(); r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", end.how, r.Status, r.Body)
			}
			if live(t, e, imp) {
				t.Fatalf("the impersonation outlived the %s of the admin who opened it", end.how)
			}
			if !live(t, e, user) {
				t.Fatalf("the %s of an admin ended the impersonated account's own session", end.how)
			}
			if end.undo != nil {
				end.undo()
			}
		}
	}, withAdmin)
}

// A session an admin opened as the account cannot move the account to another address or delete
// it: the first would hand the account to whoever holds the new mailbox, past every restore link
// sent to the owner.
func TestAdmin_ImpersonationCannotMoveTheAccountToAnotherAddress(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("owner@example.com")
		imp := impersonate(t, e, admin, user.UserID)
		e.Post("/api/auth/email-otp/request-email-change", map[string]any{"newEmail": "taker@example.com"}, bearer(imp)...).
			ExpectError(t, http.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING")
		e.Post("/api/auth/change-email", map[string]any{"newEmail": "taker@example.com"}, bearer(imp)...).
			ExpectError(t, http.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING")
		e.Post("/api/auth/email-otp/change-email", map[string]any{"newEmail": "taker@example.com", "otp": "123456"}, bearer(imp)...).
			ExpectError(t, http.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING")
		e.Post("/api/auth/delete-user", map[string]any{}, bearer(imp)...).
			ExpectError(t, http.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING")
		e.Mailer.Flush()
		if len(e.Mailer.Find(mail.KindChangeEmailCode, "taker@example.com"))+len(e.Mailer.Find(mail.KindChangeEmailLink, "taker@example.com")) != 0 {
			t.Fatal("an e-mail went to the new address")
		}
		var u models.User
		e.DB.Unscoped().Take(&u, "id = ?", user.UserID)
		if u.Email != "owner@example.com" || u.DeletedAt.Valid || !live(t, e, imp) || !live(t, e, user) {
			t.Fatalf("the account changed: %s deleted=%v", u.Email, u.DeletedAt.Valid)
		}
		// The owner still can.
		if r := e.Post("/api/auth/email-otp/request-email-change", map[string]any{"newEmail": "owner2@example.com"}, bearer(user)...); r.Status != http.StatusOK {
			t.Fatalf("the owner's own change: %d %s", r.Status, r.Body)
		}
	}, withAdmin)
}

// AUTH_ADMIN_EMAILS giving an account the admin role at its sign-in is an admin grant like any
// other: it is in the audit log (ASVS 16.3.2), with no account as its actor.
func TestAudit_AdminRoleGrantedAtSignInIsRecorded(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		events, _ := auditLog(t, e, admin, "action=admin.role_set&userId="+admin.UserID)
		if len(events) != 1 || events[0].ActorID != nil || events[0].Detail["role"] != "admin" || events[0].Detail["by"] != "AUTH_ADMIN_EMAILS" {
			t.Fatalf("the grant at sign-up: %+v", events)
		}
		// Demoted by another admin, then back through the list at the next sign-in: recorded.
		other := e.SignIn("second-admin@example.com")
		adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
		e.Clock.Advance(time.Second)
		adminPost(e, other, "set-role", map[string]any{"userId": admin.UserID, "role": "user"}).Decode(t, &struct{}{})
		e.Clock.Advance(time.Second)
		e.SignIn(adminEmail)
		events, _ = auditLog(t, e, other, "action=admin.role_set&userId="+admin.UserID)
		if len(events) != 3 || events[0].ActorID != nil || events[0].Detail["role"] != "admin" ||
			events[1].ActorID == nil || *events[1].ActorID != other.UserID || events[1].Detail["role"] != "user" {
			t.Fatalf("the grants and the demotion: %+v", events)
		}
		// A sign-in that changes nothing records no grant.
		e.SignIn(adminEmail)
		if _, n := auditLog(t, e, other, "action=admin.role_set&userId="+admin.UserID); n != 3 {
			t.Fatalf("%d grants after a sign-in of an admin", n)
		}
	}, withAdmin)
}

// Signing out while acting as someone signs out of everything the browser holds: the
// impersonation and the admin's own session in the admin cookie, which is cleared.
func TestAdmin_SignOutWhileImpersonatingLeavesNoAdminCredential(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("impersonated@example.com")
		r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/admin/impersonate-user", JSON: map[string]any{"userId": user.UserID},
			Cookies: admin.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		if r.Status != http.StatusOK {
			t.Fatalf("impersonate-user: %d %s", r.Status, r.Body)
		}
		adminCookie := r.Cookie("auth.admin_session")
		imp := testkit.Session{TokenCookie: r.Cookie("auth.session_token"), Bearer: r.Header.Get("set-auth-token")}
		browser := append(imp.Cookies(), &http.Cookie{Name: adminCookie.Name, Value: adminCookie.Value})
		r = e.Do(testkit.Request{Method: "POST", Path: "/api/auth/sign-out", JSON: map[string]any{}, Cookies: browser, Header: http.Header{"Origin": {e.URL}}})
		if r.Status != http.StatusOK {
			t.Fatalf("sign-out: %d %s", r.Status, r.Body)
		}
		if c := r.Cookie("auth.admin_session"); c == nil || c.Value != "" || (c.MaxAge >= 0 && !c.Expires.Before(time.Now())) {
			t.Fatalf("the admin session cookie was not cleared: %v", c)
		}
		if live(t, e, imp) || live(t, e, admin) {
			t.Fatalf("after sign-out: impersonation live %v, the admin's session live %v", live(t, e, imp), live(t, e, admin))
		}
		if !live(t, e, user) {
			t.Fatal("the impersonated account's own session ended")
		}
		// stop-impersonating with the stale admin cookie brings nothing back.
		r = e.Do(testkit.Request{Method: "POST", Path: "/api/auth/admin/stop-impersonating", JSON: map[string]any{}, Cookies: browser, Header: http.Header{"Origin": {e.URL}}})
		if r.Status == http.StatusOK {
			t.Fatalf("stop-impersonating after sign-out: %d %s", r.Status, r.Body)
		}
	}, withAdmin)
}

// revoke-user-session names the account whose session it ended in the audit row, so the
// account's trail shows it.
func TestAudit_RevokeUserSessionIsInTheAccountsTrail(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("trail@example.com")
		if r := adminPost(e, admin, "revoke-user-session", map[string]any{"sessionToken": user.Token}); r.Status != http.StatusOK {
			t.Fatalf("revoke-user-session: %d %s", r.Status, r.Body)
		}
		events, _ := auditLog(t, e, admin, "action=session.revoked&userId="+user.UserID)
		if len(events) != 1 || events[0].ActorID == nil || *events[0].ActorID != admin.UserID {
			t.Fatalf("the account's trail: %+v", events)
		}
	}, withAdmin)
}

// The service never ends up with no admin in force through the API: the last admin cannot demote,
// and two admins banning each other at once leave one.
func TestAdmin_LastAdminCannotDemoteThemself(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		adminPost(e, admin, "set-role", map[string]any{"userId": admin.UserID, "role": "user"}).
			ExpectError(t, http.StatusBadRequest, "YOU_CANNOT_REMOVE_THE_LAST_ADMIN")
		var u models.User
		e.DB.Take(&u, "id = ?", admin.UserID)
		if u.Role != "admin" {
			t.Fatalf("the last admin's role is %q", u.Role)
		}
		// With a second admin, either may step down; then the other is the last.
		other := e.SignIn("second-admin@example.com")
		adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
		if r := adminPost(e, other, "set-role", map[string]any{"userId": other.UserID, "role": "user"}); r.Status != http.StatusOK {
			t.Fatalf("the second admin stepping down: %d %s", r.Status, r.Body)
		}
		adminPost(e, admin, "set-role", map[string]any{"userId": admin.UserID, "role": "user"}).
			ExpectError(t, http.StatusBadRequest, "YOU_CANNOT_REMOVE_THE_LAST_ADMIN")

		// Two admins banning each other at once: one ban lands, the other is refused.
		adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
		for round := range 3 {
			e.Clock.Advance(time.Hour) // past the per-address send limits
			a, b := e.SignIn(adminEmail), e.SignIn("second-admin@example.com")
			var wg sync.WaitGroup
			status := make([]int, 2)
			for i, pair := range [][2]testkit.Session{{a, b}, {b, a}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status[i] = adminPost(e, pair[0], "ban-user", map[string]any{"userId": pair[1].UserID}).Status
				}()
			}
			wg.Wait()
			var inForce int64
			e.DB.Model(&models.User{}).Where("role = ? AND banned = ?", "admin", false).Count(&inForce)
			if inForce != 1 {
				t.Fatalf("round %d: %d admins in force after mutual bans (answers %v)", round, inForce, status)
			}
			e.DB.Model(&models.User{}).Where("role = ?", "admin").Updates(map[string]any{"banned": false, "ban_reason": nil, "ban_expires": nil})
		}
		// The operator's command line is not held to it (AUTH_ADMIN_EMAILS brings one back), and
		// removal of the last admin by another admin's stale session is refused too.
	}, withAdmin)
}

// A ban length typed on the admin page that rounds to nothing is refused, never read as a ban
// until lifted.
func TestAdminPages_TinyBanLengthIsNotAPermanentBan(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("tiny@example.com")
		for _, length := range []string{"0.5ns", "999ms", "0s", "1e3h", "forever", "-1s"} {
			r := e.Do(testkit.Request{Method: "POST", Path: "/admin/users/" + user.UserID + "/ban",
				Body: url.Values{"confirm": {"yes"}, "for": {length}}.Encode(), ContentType: "application/x-www-form-urlencoded",
				Cookies: admin.Cookies(), Header: http.Header{"Origin": {e.URL}}})
			if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "Choose how long the ban lasts.") || !live(t, e, user) {
				t.Fatalf("ban for %q: %d", length, r.Status)
			}
		}
		r := e.Do(testkit.Request{Method: "POST", Path: "/admin/users/" + user.UserID + "/ban",
			Body: url.Values{"confirm": {"yes"}, "for": {"90m"}}.Encode(), ContentType: "application/x-www-form-urlencoded",
			Cookies: admin.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		var u models.User
		e.DB.Take(&u, "id = ?", user.UserID)
		if r.Status != http.StatusSeeOther || !u.Banned || u.BanExpires == nil || !u.BanExpires.Equal(e.Clock.Now().Add(90*time.Minute)) {
			t.Fatalf("a ban for 90m: %d, banned %v until %v", r.Status, u.Banned, u.BanExpires)
		}
	}, withAdmin)
}

// Dates are checked in UTC, as they are stored: a date within the year 9999 in its own offset
// but past it in UTC is refused, never a 500 or a wrong answer.
func TestAdmin_ListUsersDateFilterWithAnOffsetPastYear9999(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		for _, date := range []string{"9999-12-31T23:00:00-02:00", "0001-01-01T01:00:00+02:00"} {
			q := url.Values{"filterField": {"createdAt"}, "filterOperator": {"lt"}, "filterValue": {date}}
			e.Get("/api/auth/admin/list-users?"+q.Encode(), bearer(admin)...).ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		}
		q := url.Values{"filterField": {"createdAt"}, "filterOperator": {"lt"}, "filterValue": {"9999-12-31T23:00:00+02:00"}}
		var page struct{ Total int }
		e.Get("/api/auth/admin/list-users?"+q.Encode(), bearer(admin)...).Decode(t, &page)
		if page.Total != 1 {
			t.Fatalf("accounts created before 9999: %d", page.Total)
		}
	}, withAdmin)
}

// The search ignores case beyond ASCII on both databases: "élodie" finds "Élodie", as
// PostgreSQL's LOWER does and SQLite's own did not.
func TestAdmin_ListUsersFindsANonASCIINameOnBothDatabases(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("elodie@example.com")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"name": "Élodie Ünal"}}).Decode(t, &struct{}{})
		for _, search := range []string{"élodie", "ÉLODIE", "ünal", "DIE ÜN"} {
			q := url.Values{"searchField": {"name"}, "searchOperator": {"contains"}, "searchValue": {search}}
			var page struct {
				Users []wireUser
				Total int
			}
			e.Get("/api/auth/admin/list-users?"+q.Encode(), bearer(admin)...).Decode(t, &page)
			if page.Total != 1 || page.Users[0].ID != user.UserID {
				t.Fatalf("searching %q found %d", search, page.Total)
			}
		}
	}, withAdmin)
}

// Closed sign-up still lets the operator's AUTH_ADMIN_EMAILS create their account, so a fresh
// install with sign-up closed has a way in; other addresses still fail as a wrong code.
func TestSignUpGating_AdminEmailsCanStillBootstrapTheFirstAdmin(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		var u models.User
		e.DB.Take(&u, "id = ?", admin.UserID)
		if u.Role != "admin" {
			t.Fatalf("the first admin's role is %q", u.Role)
		}
		sendFor(t, e, "stranger@example.com")
		e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "stranger@example.com", "otp": "000000"}).
			ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
		if n := e.Count(&models.User{}, "email = ?", "stranger@example.com"); n != 0 {
			t.Fatal("a stranger signed up with sign-up closed")
		}
	}, withAdmin, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"), testkit.WithEnv("AUTH_ALLOWED_EMAIL_DOMAINS", "other.org"))
}
