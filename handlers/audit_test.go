package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// The audit log: every security event written with who acted, on whose account, from where and
// under which request, readable by admins only, never holding a code, a token or another
// person's full address, and pruned after its retention.

type auditEntry struct {
	ID, Action, IPAddress, UserAgent, RequestID string
	ActorID, UserID                             *string
	At                                          time.Time
	Detail                                      map[string]any
}

func auditLog(t *testing.T, e *testkit.Env, admin testkit.Session, query string) (events []auditEntry, total int) {
	t.Helper()
	r := e.Get("/api/auth/admin/audit-log?"+query, bearer(admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("audit-log?%s: %d %s", query, r.Status, r.Body)
	}
	var body struct {
		Events []auditEntry
		Total  int
	}
	r.Decode(t, &body)
	return body.Events, body.Total
}

func actions(events []auditEntry) string {
	var out []string
	for i := len(events) - 1; i >= 0; i-- { // oldest first
		out = append(out, events[i].Action)
	}
	return strings.Join(out, ",")
}

func TestAudit_AccountEvents(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		email := "audited@example.com"
		s := signInFrom(t, e, email, uaChromeMac, "203.0.113.7")
		e.Clock.Advance(time.Second)
		signInFrom(t, e, email, uaFirefoxWin, "203.0.113.8") // another device, to revoke
		var me struct{ User struct{ ID string } }
		e.Get("/api/auth/get-session", bearer(s)...).Decode(t, &me)
		id := me.User.ID
		steps := []struct {
			path string
			body any
			who  testkit.Session
		}{
			{"/api/marketing-consent", map[string]any{}, s},
			{"/api/marketing-consent/withdraw", map[string]any{}, s},
			{"/api/auth/revoke-other-sessions", map[string]any{}, s},
			{"/api/auth/email-otp/request-email-change", map[string]any{"newEmail": "someone-else@example.org"}, s},
			{"/api/auth/sign-out", map[string]any{}, s},
		}
		for _, st := range steps {
			e.Clock.Advance(time.Second)
			if r := e.Post(st.path, st.body, append(bearer(st.who), "Origin", e.URL, "User-Agent", uaChromeMac)...); r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", st.path, r.Status, r.Body)
			}
		}
		events, total := auditLog(t, e, admin, "userId="+id)
		want := "user.signed_up,user.signed_in,consent.granted,consent.withdrawn,session.revoked,user.email_change_requested,session.signed_out"
		if got := actions(events); got != want || total != 7 {
			t.Fatalf("the account's events: %s (%d in all), want %s", got, total, want)
		}
		first, second := events[6], events[5]
		if first.ActorID == nil || *first.ActorID != id || first.IPAddress != "203.0.113.7" || first.UserAgent != uaChromeMac ||
			first.RequestID == "" || first.Detail["method"] != "email-otp" {
			t.Fatalf("the sign-up event: %+v", first)
		}
		if second.Detail["new_device"] != true {
			t.Fatalf("a sign-in from a new device: %+v", second.Detail)
		}
		change := events[1]
		if change.Detail["to"] != "s…@example.org" {
			t.Fatalf("the change's detail: %v", change.Detail)
		}
		raw, _ := json.Marshal(events)
		for _, secret := range []string{"someone-else@example.org", s.Token, s.Bearer, e.Mailer.LastCode(email)} {
			if secret != "" && strings.Contains(string(raw), secret) {
				t.Fatalf("the audit log holds %q", secret)
			}
		}
		// Filters, paging, and who may read it.
		if events, total := auditLog(t, e, admin, "action=session.revoked"); total != 1 || events[0].Action != "session.revoked" {
			t.Fatalf("filtered by action: %d", total)
		}
		if events, total := auditLog(t, e, admin, "userId="+id+"&limit=2&offset=1"); len(events) != 2 || total != 7 ||
			events[0].Action != "user.email_change_requested" {
			t.Fatalf("a page: %+v", events)
		}
		user := e.SignIn("nosy@example.com")
		e.Get("/api/auth/admin/audit-log", bearer(user)...).ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_READ_THE_AUDIT_LOG")
		e.Get("/api/auth/admin/audit-log").ExpectError(t, http.StatusUnauthorized, "UNAUTHORIZED")
		e.Get("/api/auth/admin/audit-log?limit=x", bearer(admin)...).ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		// Each refusal names the parameter it refused.
		for query, field := range map[string]string{"userId=abc": "[query.userId]", "action=a%00b": "[query.action]", "action=%FF": "[query.action]"} {
			r := e.Get("/api/auth/admin/audit-log?"+query, bearer(admin)...)
			r.ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
			if !strings.Contains(string(r.Body), field) {
				t.Errorf("audit-log?%s: %s, want it to name %s", query, r.Body, field)
			}
		}
	}, withAdmin)
}

// Every admin action is written with the admin as its actor; a lock after failed verifications
// is written too.
func TestAudit_AdminActionsAndLocks(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		target := e.SignIn("target@example.com")
		for _, call := range []struct {
			route string
			body  map[string]any
		}{
			{"set-role", map[string]any{"userId": target.UserID, "role": "user"}},
			{"update-user", map[string]any{"userId": target.UserID, "data": map[string]any{"name": "Renamed"}}},
			{"ban-user", map[string]any{"userId": target.UserID, "banReason": "spam"}},
			{"unban-user", map[string]any{"userId": target.UserID}},
			{"impersonate-user", map[string]any{"userId": target.UserID}},
			{"revoke-user-sessions", map[string]any{"userId": target.UserID}},
			{"remove-user", map[string]any{"userId": target.UserID}},
		} {
			e.Clock.Advance(time.Second)
			if r := adminPost(e, admin, call.route, call.body); r.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", call.route, r.Status, r.Body)
			}
		}
		events, _ := auditLog(t, e, admin, "userId="+target.UserID)
		want := "user.signed_up,admin.role_set,admin.user_updated,admin.user_banned,admin.user_unbanned,admin.impersonation_started,session.revoked,admin.user_removed"
		if got := actions(events); got != want {
			t.Fatalf("the target's events: %s, want %s", got, want)
		}
		for _, ev := range events[:len(events)-1] {
			if ev.ActorID == nil || *ev.ActorID != admin.UserID {
				t.Fatalf("%s was not written with the admin as actor: %v", ev.Action, ev.ActorID)
			}
		}
		// The events outlive the account they concern.
		if e.Count(&models.User{}, "id = ?", target.UserID) != 0 || len(events) != 8 {
			t.Fatal("the removed account's events went with it")
		}

		// A lock: the address's last allowed failure writes one event, with the address masked.
		locked := "locked@example.com"
		for i := range 3 {
			e.SendCode(locked)
			e.Clock.Advance(time.Minute)
			r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": locked, "otp": fmt.Sprintf("00000%d", i)})
			if r.Status == http.StatusOK {
				t.Fatal("a wrong code signed in")
			}
		}
		events, _ = auditLog(t, e, admin, "action=user.verification_locked")
		if len(events) != 1 || events[0].Detail["address"] != "l…@example.com" || events[0].UserID != nil {
			t.Fatalf("the lock's events: %+v", events)
		}
	}, withAdmin, testkit.WithMaxFailedVerifications(3))
}

func TestAudit_Retention(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.SignIn("old@example.com")
		e.Clock.Advance(48 * time.Hour)
		e.SignIn("new@example.com")
		r, err := e.Auth.PruneExpired(t.Context())
		if err != nil || r.Audit != 1 || e.Count(&models.AuditEvent{}) != 1 {
			t.Fatalf("prune: %+v, %v; %d events left", r, err, e.Count(&models.AuditEvent{}))
		}
	}, testkit.WithEnv("AUTH_AUDIT_RETENTION", "24h"))
}

// The deletion's events: requested, restored by signing in within the grace period, and purged
// after it; and an address changed by code.
func TestAudit_DeletionAndAddressChange(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		s := e.SignIn("leaving@example.com")
		e.Clock.Advance(time.Second)
		if r := e.Post("/api/account/delete", map[string]any{}, bearer(s)...); r.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		e.Clock.Advance(time.Second)
		back := e.SignIn("leaving@example.com") // within the grace period: restored
		e.Clock.Advance(time.Second)
		if r := e.Post("/api/auth/email-otp/request-email-change", map[string]any{"newEmail": "moved@example.com"}, bearer(back)...); r.Status != http.StatusOK {
			t.Fatalf("request change: %d", r.Status)
		}
		code := e.Mailer.Last("change-email-code", "moved@example.com").Code
		e.Clock.Advance(time.Second)
		if r := e.Post("/api/auth/email-otp/change-email", map[string]any{"newEmail": "moved@example.com", "otp": code}, bearer(back)...); r.Status != http.StatusOK {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		events, _ := auditLog(t, e, admin, "userId="+s.UserID)
		want := "user.signed_up,user.deletion_requested,user.deletion_restored,user.email_change_requested,user.email_changed"
		if got := actions(events); got != want {
			t.Fatalf("events: %s, want %s", got, want)
		}
		gone := e.SignIn("gone@example.com")
		if r := e.Post("/api/account/delete", map[string]any{}, bearer(gone)...); r.Status != http.StatusOK {
			t.Fatalf("delete: %d", r.Status)
		}
		e.Clock.Advance(31 * 24 * time.Hour)
		if _, err := e.Auth.PurgeDeletedAccounts(t.Context()); err != nil {
			t.Fatal(err)
		}
		purged, _ := auditLog(t, e, admin, "action=user.purged")
		if len(purged) != 1 || purged[0].Detail["accounts"] != float64(1) {
			t.Fatalf("the purge's event: %+v", purged)
		}
	}, withAdmin)
}

// What is done in a session an admin opened as an account is the admin's doing in the audit log.
func TestAudit_ImpersonatedActionsAreTheAdmins(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("impersonated-audit@example.com")
		r := adminPost(e, admin, "impersonate-user", map[string]any{"userId": user.UserID})
		if r.Status != http.StatusOK {
			t.Fatalf("impersonate: %d %s", r.Status, r.Body)
		}
		imp := testkit.Session{Bearer: r.Header.Get("set-auth-token")}
		e.Clock.Advance(time.Second)
		if r := e.Post("/api/auth/revoke-other-sessions", map[string]any{}, bearer(imp)...); r.Status != http.StatusOK {
			t.Fatalf("revoking as the user: %d %s", r.Status, r.Body)
		}
		events, _ := auditLog(t, e, admin, "action=session.revoked&userId="+user.UserID)
		if len(events) != 1 || events[0].ActorID == nil || *events[0].ActorID != admin.UserID || events[0].Detail["impersonated"] != true {
			t.Fatalf("the revocation made in an impersonation: %+v", events)
		}
		// Consent is the person's own: an admin acting as them cannot give or withdraw it.
		for _, path := range []string{"/api/marketing-consent", "/api/marketing-consent/withdraw"} {
			e.Post(path, map[string]any{}, bearer(imp)...).ExpectError(t, http.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING")
		}
		if n := e.Count(&models.ConsentEvent{}, "user_id = ?", user.UserID); n != 0 {
			t.Fatalf("%d consent events recorded in an impersonation", n)
		}
	}, withAdmin)
}
