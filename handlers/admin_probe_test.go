package handlers_test

import (
	"net/http"
	"testing"

	"codeauth/internal/testkit"
)

// Defects found by probing the admin API with hostile inputs (review of issue 16). Each test
// fails until its defect is fixed.

// A text operator (contains, starts_with, ends_with) on the id field with a canonical UUID passes
// the UUID check and reaches the database as LOWER(id) LIKE ?, which PostgreSQL refuses for its
// uuid type ("function lower(uuid) does not exist"): a 500 from client input. SQLite, whose ids
// are text, answers it.
func TestAdmin_ListUsersTextFilterOnIDIsNot500(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		for _, op := range []string{"contains", "starts_with", "ends_with"} {
			r := e.Get("/api/auth/admin/list-users?filterField=id&filterOperator="+op+"&filterValue="+admin.UserID, bearer(admin)...)
			if r.Status != http.StatusOK && r.Status != http.StatusBadRequest {
				t.Errorf("list-users filterField=id filterOperator=%s: %d %s, want 200 or 400 VALIDATION_ERROR", op, r.Status, r.Body)
			}
		}
	}, withAdmin)
}

// banExpiresIn is checked to be greater than 0 and then converted to whole nanoseconds: a
// positive value below a nanosecond (1e-10) becomes 0, which BanUser reads as "for good". A ban
// meant to last (next to) no time is a permanent one.
func TestAdmin_TinyBanExpiresInIsNotAPermanentBan(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("short-ban@example.com")
		r := adminPost(e, admin, "ban-user", map[string]any{"userId": user.UserID, "banExpiresIn": 1e-10})
		if r.Status == http.StatusBadRequest {
			return // refused: fine
		}
		if r.Status != http.StatusOK {
			t.Fatalf("ban-user: %d %s", r.Status, r.Body)
		}
		var banned struct{ User wireUser }
		r.Decode(t, &banned)
		if banned.User.Banned && banned.User.BanExpires == nil {
			t.Fatalf("banExpiresIn 1e-10 banned the account for good: %+v", banned.User)
		}
	}, withAdmin)
}

// A date filter outside the years the databases store (year 10000 and later, as milliseconds
// since 1970) is accepted and compared wrongly: on SQLite "createdAt < year 10000" compares the
// stored text lexicographically ("10000-…" < "2026-…") and on PostgreSQL the microseconds since
// 2000 overflow, so each matches no account while every account was created before it.
func TestAdmin_ListUsersDateFilterOutOfRange(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		e.SignIn("member@example.com")
		for _, value := range []string{"253402300800000", "9223372036854775807"} {
			r := e.Get("/api/auth/admin/list-users?filterField=createdAt&filterOperator=lt&filterValue="+value, bearer(admin)...)
			if r.Status == http.StatusBadRequest {
				continue // refused: fine
			}
			if r.Status != http.StatusOK {
				t.Fatalf("createdAt lt %s: %d %s", value, r.Status, r.Body)
			}
			var page struct{ Total int }
			r.Decode(t, &page)
			if page.Total != 2 {
				t.Errorf("createdAt lt %s: %d accounts, want both (every account was created before it) or 400", value, page.Total)
			}
		}
	}, withAdmin)
}
