package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"
)

// better-auth's admin plugin routes through the real app on both databases: who may call them,
// the user list, roles, bans (and the banned sign-in), session revocation, removal and
// impersonation.

const adminEmail = "admin@example.com"

// withAdmin makes adminEmail an admin when it signs in (AUTH_ADMIN_EMAILS).
var withAdmin = testkit.WithEnv("AUTH_ADMIN_EMAILS", "Admin@Example.com")

// adminPost posts body to an admin route as s, by bearer token.
func adminPost(e *testkit.Env, s testkit.Session, route string, body any) *testkit.Response {
	return e.Post("/api/auth/admin/"+route, body, bearer(s)...)
}

type wireUser struct {
	ID, Email, Name, Role string
	Banned                bool
	BanReason             *string
	BanExpires            *time.Time
}

func TestAdmin_RolesAndWhoMayCall(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("user@example.com")
		var got struct{ User wireUser }
		e.Get("/api/auth/get-session", bearer(admin)...).Decode(t, &got)
		if got.User.Role != "admin" || got.User.Banned || got.User.BanReason != nil {
			t.Fatalf("the admin's session says %+v", got.User)
		}
		e.Get("/api/auth/get-session", bearer(user)...).Decode(t, &got)
		if got.User.Role != "user" {
			t.Fatalf("a user's session says role %q", got.User.Role)
		}
		// Every route: 401 without a session, its own 403 for a user.
		body := map[string]any{"userId": admin.UserID, "role": "user", "sessionToken": "x", "data": map[string]any{"name": "x"}}
		for route, code := range map[string]string{
			"update-user":          "YOU_ARE_NOT_ALLOWED_TO_UPDATE_USERS",
			"set-role":             "YOU_ARE_NOT_ALLOWED_TO_CHANGE_USERS_ROLE",
			"ban-user":             "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS",
			"unban-user":           "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS",
			"list-user-sessions":   "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS_SESSIONS",
			"revoke-user-session":  "YOU_ARE_NOT_ALLOWED_TO_REVOKE_USERS_SESSIONS",
			"revoke-user-sessions": "YOU_ARE_NOT_ALLOWED_TO_REVOKE_USERS_SESSIONS",
			"remove-user":          "YOU_ARE_NOT_ALLOWED_TO_DELETE_USERS",
			"impersonate-user":     "YOU_ARE_NOT_ALLOWED_TO_IMPERSONATE_USERS",
		} {
			e.Post("/api/auth/admin/"+route, body).ExpectError(t, http.StatusUnauthorized, "UNAUTHORIZED")
			adminPost(e, user, route, body).ExpectError(t, http.StatusForbidden, code)
		}
		e.Get("/api/auth/admin/list-users", bearer(user)...).ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS")
		e.Get("/api/auth/admin/get-user?id="+admin.UserID, bearer(user)...).ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_GET_USER")
		if !live(t, e, admin) {
			t.Fatal("a refused call changed something")
		}

		// has-permission answers for the caller's own role.
		perm := map[string]any{"permissions": map[string][]string{"user": {"ban", "list"}}}
		var answer struct {
			Error   *string
			Success bool
		}
		adminPost(e, admin, "has-permission", perm).Decode(t, &answer)
		if !answer.Success || answer.Error != nil {
			t.Fatalf("the admin may not ban: %+v", answer)
		}
		adminPost(e, user, "has-permission", perm).Decode(t, &answer)
		if answer.Success {
			t.Fatal("a user may ban")
		}
		adminPost(e, admin, "has-permission", map[string]any{"permissions": map[string][]string{"user": {"fly"}}}).Decode(t, &answer)
		if answer.Success {
			t.Fatal("an unknown action was granted")
		}
		adminPost(e, admin, "has-permission", map[string]any{}).ExpectError(t, http.StatusBadRequest, "BAD_REQUEST")

		// set-role: only known roles; the new role shows in the account's next session check.
		adminPost(e, admin, "set-role", map[string]any{"userId": user.UserID, "role": "superuser"}).
			ExpectError(t, http.StatusBadRequest, "YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE")
		adminPost(e, admin, "set-role", map[string]any{"userId": "00000000-0000-0000-0000-000000000000", "role": "admin"}).
			ExpectError(t, http.StatusNotFound, "USER_NOT_FOUND")
		var set struct{ User wireUser }
		adminPost(e, admin, "set-role", map[string]any{"userId": user.UserID, "role": []string{"user", "admin"}}).Decode(t, &set)
		if set.User.Role != "user,admin" {
			t.Fatalf("set-role answered role %q", set.User.Role)
		}
		e.Get("/api/auth/admin/list-users", bearer(user)...).Decode(t, &struct{}{})
	}, withAdmin)
}

func TestAdmin_ListUsers(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		for i := range 5 {
			e.Clock.Advance(time.Second)
			e.SignIn(fmt.Sprintf("member%d@example.com", i))
		}
		type page struct {
			Users                []wireUser
			Total, Limit, Offset int
		}
		list := func(query string) page {
			t.Helper()
			var p page
			r := e.Get("/api/auth/admin/list-users?"+query, bearer(admin)...)
			if r.Status != http.StatusOK {
				t.Fatalf("list-users?%s: %d %s", query, r.Status, r.Body)
			}
			r.Decode(t, &p)
			return p
		}
		emails := func(p page) string {
			var out []string
			for _, u := range p.Users {
				out = append(out, u.Email)
			}
			return strings.Join(out, ",")
		}
		if p := list(""); p.Total != 6 || len(p.Users) != 6 || p.Limit != 100 || p.Users[0].Email != adminEmail {
			t.Fatalf("the whole list: %+v", p)
		}
		if p := list("limit=2&offset=1&sortBy=createdAt&sortDirection=desc"); emails(p) != "member3@example.com,member2@example.com" || p.Total != 6 {
			t.Fatalf("a page: %q of %d", emails(p), p.Total)
		}
		if p := list("searchValue=MEMBER1&searchField=email&searchOperator=starts_with"); emails(p) != "member1@example.com" || p.Total != 1 {
			t.Fatalf("a search: %q", emails(p))
		}
		if p := list("filterField=role&filterValue=admin&filterOperator=eq"); emails(p) != adminEmail {
			t.Fatalf("a filter: %q", emails(p))
		}
		if p := list("filterField=banned&filterValue=false"); p.Total != 6 {
			t.Fatalf("a boolean filter: %d", p.Total)
		}
		if p := list("filterField=email&filterOperator=in&filterValue=" + url.QueryEscape(`["member0@example.com","member4@example.com"]`)); p.Total != 2 {
			t.Fatalf("an in filter: %q", emails(p))
		}
		// better-auth's client sends an array as the key repeated; a comma inside one of them is
		// part of that value.
		if p := list("filterField=email&filterOperator=in&filterValue=member0@example.com&filterValue=member4@example.com&filterValue=a,member1@example.com"); p.Total != 2 {
			t.Fatalf("an in filter with the key repeated: %q", emails(p))
		}
		if p := list("filterField=email&filterOperator=not_in&filterValue=member0@example.com&filterValue=member4@example.com"); p.Total != 4 {
			t.Fatalf("a not_in filter with the key repeated: %q", emails(p))
		}
		for _, bad := range []string{"sortBy=password", "sortDirection=up", "limit=-1", "limit=x", "searchValue=a&searchField=role",
			"filterField=secret&filterValue=1", "filterField=banned&filterValue=maybe", "filterField=email&filterOperator=regex&filterValue=a",
			"filterField=createdAt&filterValue=yesterday", "filterField=role&filterValue=admin&filterValue=user",
			// Values the databases cannot compare are the caller's mistake, never a 500: a user
			// id that is no UUID (PostgreSQL's uuid type), a NUL in text (PostgreSQL's text).
			"filterField=id&filterValue=abc", "filterField=id&filterOperator=in&filterValue=abc,def",
			"searchValue=%00x", "filterField=name&filterValue=a%00b", "searchValue=%ff%fe"} {
			e.Get("/api/auth/admin/list-users?"+bad, bearer(admin)...).ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		}
		var one wireUser
		e.Get("/api/auth/admin/get-user?id="+admin.UserID, bearer(admin)...).Decode(t, &one)
		if one.Email != adminEmail || one.Role != "admin" {
			t.Fatalf("get-user: %+v", one)
		}
		e.Get("/api/auth/admin/get-user?id=nobody", bearer(admin)...).ExpectError(t, http.StatusNotFound, "USER_NOT_FOUND")
	}, withAdmin)
}

func TestAdmin_UpdateUser(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		user := e.SignIn("renamed@example.com")
		var u wireUser
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"name": "New Name"}}).Decode(t, &u)
		if u.Name != "New Name" {
			t.Fatalf("update-user answered %+v", u)
		}
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"email": "x@example.com"}}).
			ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_SET_USERS_EMAIL")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"role": "admin"}}).
			ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_CHANGE_USERS_ROLE")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"password": "hunter2"}}).
			ExpectError(t, http.StatusBadRequest, "PASSWORD_CANNOT_BE_UPDATED_VIA_UPDATE_USER")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{}}).
			ExpectError(t, http.StatusBadRequest, "NO_DATA_TO_UPDATE")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": map[string]any{"name": "bad\u202ename"}}).
			ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		adminPost(e, admin, "update-user", map[string]any{"userId": user.UserID, "data": "name"}).
			ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		var stored models.User
		e.DB.Take(&stored, "id = ?", user.UserID)
		if stored.Name != "New Name" || stored.Email != "renamed@example.com" || stored.Role != "user" {
			t.Fatalf("a refused update changed the account: %+v", stored)
		}
	}, withAdmin)
}

// ASVS 6.3.x, catalogue: a ban ends every session at once, and a banned account still gets its
// code (nobody learns of the ban but the mailbox's owner) but signs in no more until the ban
// expires or is lifted.
func TestAdmin_BanUser(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		victim := "banned@example.com"
		a, b := e.SignIn(victim), e.SignIn(victim)
		adminPost(e, admin, "ban-user", map[string]any{"userId": admin.UserID}).ExpectError(t, http.StatusBadRequest, "YOU_CANNOT_BAN_YOURSELF")
		adminPost(e, admin, "ban-user", map[string]any{"userId": "00000000-0000-0000-0000-000000000000"}).ExpectError(t, http.StatusNotFound, "USER_NOT_FOUND")
		adminPost(e, admin, "ban-user", map[string]any{"userId": a.UserID, "banExpiresIn": -5}).ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		// A reason is held to a name's rules, and refused, not cut, past its length; a length
		// past a hundred years is named too big. None of them bans anyone.
		for body, want := range map[string]string{
			`{"userId":"` + a.UserID + `","banReason":"` + strings.Repeat("x", auth.MaxBanReason+1) + `"}`: "[body.banReason] Too big: expected string to have <=500 characters",
			`{"userId":"` + a.UserID + `","banReason":"pay me \u202egnp.exe"}`:                             "[body.banReason] Invalid input: control and invisible characters are not allowed",
			`{"userId":"` + a.UserID + `","banReason":"a\u0000b"}`:                                         "[body.banReason] Invalid input: control and invisible characters are not allowed",
			`{"userId":"` + a.UserID + `","banReason":"\u200b"}`:                                           "[body.banReason] Invalid input: control and invisible characters are not allowed",
			`{"userId":"` + a.UserID + `","banExpiresIn":9223372036}`:                                      "[body.banExpiresIn] Too big: expected at most 3153600000 seconds",
		} {
			r := e.Do(testkit.Request{Method: http.MethodPost, Path: "/api/auth/admin/ban-user", Body: body, ContentType: "application/json",
				Header: http.Header{"Authorization": {"Bearer " + admin.Bearer}}})
			r.ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
			var answer struct{ Message string }
			if r.Decode(t, &answer); !strings.HasPrefix(answer.Message, want) {
				t.Errorf("ban-user %.60s: %q, want %q", body, answer.Message, want)
			}
		}
		if !live(t, e, a) {
			t.Fatal("a refused ban ended a session")
		}
		// Exactly the longest reason, spaces around it trimmed, is kept whole.
		longest := strings.Repeat("é", auth.MaxBanReason)
		var kept struct{ User wireUser }
		adminPost(e, admin, "ban-user", map[string]any{"userId": b.UserID, "banReason": "  " + longest + " "}).Decode(t, &kept)
		if kept.User.BanReason == nil || *kept.User.BanReason != longest {
			t.Fatalf("the longest reason: %v", kept.User.BanReason)
		}
		adminPost(e, admin, "unban-user", map[string]any{"userId": b.UserID}).Decode(t, &struct{}{})
		b = e.SignIn(victim)
		var banned struct{ User wireUser }
		adminPost(e, admin, "ban-user", map[string]any{"userId": a.UserID, "banReason": "spam", "banExpiresIn": 3600}).Decode(t, &banned)
		if !banned.User.Banned || banned.User.BanReason == nil || *banned.User.BanReason != "spam" || banned.User.BanExpires == nil ||
			!banned.User.BanExpires.Equal(e.Clock.Now().Add(time.Hour).Truncate(time.Millisecond)) {
			t.Fatalf("ban-user answered %+v", banned.User)
		}
		if live(t, e, a) || live(t, e, b) || !live(t, e, admin) {
			t.Fatal("the ban left a session alive, or ended the admin's")
		}
		// The code still goes out; the right code is refused with BANNED_USER and opens nothing.
		code := e.SendCode(victim)
		before := e.Count(&models.Session{})
		r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": victim, "otp": code})
		r.ExpectError(t, http.StatusForbidden, "BANNED_USER")
		if e.Count(&models.Session{}) != before || r.Cookie("auth.session_token") != nil {
			t.Fatal("a banned sign-in opened a session")
		}
		// The same code works once the ban has expired, which lifts it.
		e.Clock.Advance(time.Hour + time.Second)
		code = e.SendCode(victim)
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": victim, "otp": code}); r.Status != http.StatusOK {
			t.Fatalf("sign-in after the ban expired: %d %s", r.Status, r.Body)
		}
		var stored models.User
		e.DB.Take(&stored, "id = ?", a.UserID)
		if stored.Banned || stored.BanReason != nil || stored.BanExpires != nil {
			t.Fatalf("the expired ban was not lifted: %+v", stored)
		}
		// A ban for good, without a reason, until unbanned.
		adminPost(e, admin, "ban-user", map[string]any{"userId": a.UserID}).Decode(t, &banned)
		if banned.User.BanExpires != nil || banned.User.BanReason == nil || *banned.User.BanReason != "No reason" {
			t.Fatalf("a ban for good: %+v", banned.User)
		}
		e.Clock.Advance(1000 * time.Hour)
		code = e.SendCode(victim)
		e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": victim, "otp": code}).ExpectError(t, http.StatusForbidden, "BANNED_USER")
		adminPost(e, admin, "unban-user", map[string]any{"userId": a.UserID}).Decode(t, &banned)
		if banned.User.Banned {
			t.Fatal("unban-user left the ban")
		}
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": victim, "otp": code}); r.Status != http.StatusOK {
			t.Fatalf("sign-in after the unban: %d %s", r.Status, r.Body)
		}
	}, withAdmin)
}

func TestAdmin_SessionsAndRemoval(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		email := "someone@example.com"
		a := e.SignIn(email)
		e.Clock.Advance(time.Second)
		b := e.SignIn(email)
		var listed struct {
			Sessions []listedSession
		}
		adminPost(e, admin, "list-user-sessions", map[string]any{"userId": a.UserID}).Decode(t, &listed)
		if len(listed.Sessions) != 2 || listed.Sessions[0].Token != listed.Sessions[0].ID {
			t.Fatalf("list-user-sessions: %+v", listed.Sessions)
		}
		adminPost(e, admin, "revoke-user-session", map[string]any{"sessionToken": listed.Sessions[0].Token}).Decode(t, &struct{}{})
		if live(t, e, b) || !live(t, e, a) {
			t.Fatal("revoke-user-session ended the wrong session")
		}
		// Gone already: nothing more ends, and it is no error, as in better-auth.
		adminPost(e, admin, "revoke-user-session", map[string]any{"sessionToken": listed.Sessions[0].Token}).Decode(t, &struct{}{})
		if !live(t, e, a) {
			t.Fatal("revoking a session gone already ended another")
		}
		adminPost(e, admin, "revoke-user-sessions", map[string]any{"userId": a.UserID}).Decode(t, &struct{}{})
		if live(t, e, a) {
			t.Fatal("revoke-user-sessions left a session")
		}
		c := e.SignIn(email)
		adminPost(e, admin, "remove-user", map[string]any{"userId": admin.UserID}).ExpectError(t, http.StatusBadRequest, "YOU_CANNOT_REMOVE_YOURSELF")
		var ok struct{ Success bool }
		adminPost(e, admin, "remove-user", map[string]any{"userId": a.UserID}).Decode(t, &ok)
		if !ok.Success || live(t, e, c) || e.Count(&models.User{}, "id = ?", a.UserID) != 0 {
			t.Fatal("remove-user left the account or a session")
		}
		adminPost(e, admin, "remove-user", map[string]any{"userId": a.UserID}).ExpectError(t, http.StatusNotFound, "USER_NOT_FOUND")
		// The address signs up afresh, as a new account.
		if fresh := e.SignIn(email); fresh.UserID == a.UserID {
			t.Fatal("the removed account came back")
		}
	}, withAdmin)
}

func TestAdmin_Impersonation(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		other := e.SignIn("second-admin@example.com")
		adminPost(e, admin, "set-role", map[string]any{"userId": other.UserID, "role": "admin"}).Decode(t, &struct{}{})
		user := e.SignIn("impersonated@example.com")
		adminPost(e, admin, "impersonate-user", map[string]any{"userId": other.UserID}).ExpectError(t, http.StatusForbidden, "YOU_CANNOT_IMPERSONATE_ADMINS")

		// By cookie, as a dashboard in the admin's browser does.
		r := e.Do(testkit.Request{Method: "POST", Path: "/api/auth/admin/impersonate-user", JSON: map[string]any{"userId": user.UserID},
			Cookies: admin.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		if r.Status != http.StatusOK {
			t.Fatalf("impersonate-user: %d %s", r.Status, r.Body)
		}
		var as struct {
			Session struct {
				Token          string
				ImpersonatedBy *string
				ExpiresAt      time.Time
			}
			User wireUser
		}
		r.Decode(t, &as)
		if as.User.ID != user.UserID || as.Session.ImpersonatedBy == nil || *as.Session.ImpersonatedBy != admin.UserID ||
			!as.Session.ExpiresAt.Equal(e.Clock.Now().Add(time.Hour).Truncate(time.Millisecond)) {
			t.Fatalf("impersonate-user answered %+v", as)
		}
		adminCookie := r.Cookie("auth.admin_session")
		imp := testkit.Session{TokenCookie: r.Cookie("auth.session_token"), DataCookie: r.Cookie("auth.session_data"), Bearer: r.Header.Get("set-auth-token")}
		if adminCookie == nil || imp.TokenCookie == nil || strings.Contains(adminCookie.Value, admin.Token) == false {
			t.Fatalf("impersonation cookies: admin %v, session %v", adminCookie, imp.TokenCookie)
		}
		// The impersonation session is the user's, marked, cannot use the admin routes, and is
		// not in the user's own list of sessions.
		var got struct {
			Session struct{ ImpersonatedBy *string }
			User    wireUser
		}
		e.Do(testkit.Request{Path: "/api/auth/get-session", Cookies: imp.Cookies()}).Decode(t, &got)
		if got.User.ID != user.UserID || got.Session.ImpersonatedBy == nil {
			t.Fatalf("the impersonation session reads %+v", got)
		}
		adminPost(e, imp, "list-users", nil)
		e.Get("/api/auth/admin/list-users", bearer(imp)...).ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS")
		adminPost(e, imp, "ban-user", map[string]any{"userId": other.UserID}).ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS")
		if own := listSessions(t, e, user); len(own) != 1 {
			t.Fatalf("the user's own list shows %d sessions, want 1 (not the impersonation)", len(own))
		}

		// stop-impersonating: the impersonation ends, the admin's session is the browser's again.
		r = e.Do(testkit.Request{Method: "POST", Path: "/api/auth/admin/stop-impersonating", JSON: map[string]any{},
			Cookies: append(imp.Cookies(), &http.Cookie{Name: adminCookie.Name, Value: adminCookie.Value}), Header: http.Header{"Origin": {e.URL}}})
		if r.Status != http.StatusOK {
			t.Fatalf("stop-impersonating: %d %s", r.Status, r.Body)
		}
		var back struct{ User wireUser }
		r.Decode(t, &back)
		if back.User.ID != admin.UserID || live(t, e, imp) || !live(t, e, admin) {
			t.Fatalf("stop-impersonating answered %+v", back.User)
		}
		if c := r.Cookie("auth.admin_session"); c == nil || c.Value != "" {
			t.Fatal("the admin session cookie was not cleared")
		}
		// Without the admin's cookie (a bearer client), or from a session nobody impersonates.
		adminPost(e, admin, "stop-impersonating", map[string]any{}).ExpectError(t, http.StatusBadRequest, "BAD_REQUEST")
		r = e.Post("/api/auth/admin/impersonate-user", map[string]any{"userId": user.UserID}, bearer(admin)...)
		r.Decode(t, &as)
		imp2 := testkit.Session{Bearer: r.Header.Get("set-auth-token")}
		adminPost(e, imp2, "stop-impersonating", map[string]any{}).ExpectError(t, http.StatusBadRequest, "ADMIN_SESSION_NOT_FOUND")
		// An impersonation lasts an hour.
		e.Clock.Advance(time.Hour + time.Second)
		if live(t, e, imp2) {
			t.Fatal("the impersonation outlived its hour")
		}
	}, withAdmin)
}

// Where better-auth's admin plugin answers success or an empty list, so does this service: a
// session gone already, an account that does not exist (it has no session to list or end), a ban
// of banExpiresIn 0 (read as not given: for good); and get-user without its id is the query's
// validation error. A client written for better-auth throws on none of them.
func TestAdmin_AnswersAsBetterAuthAtTheEdges(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		admin := e.SignIn(adminEmail)
		a := e.SignIn("edges@example.com")
		nobody := "00000000-0000-4000-8000-000000000000"
		var listed struct{ Sessions []map[string]any }
		adminPost(e, admin, "list-user-sessions", map[string]any{"userId": nobody}).Decode(t, &listed)
		if listed.Sessions == nil || len(listed.Sessions) != 0 {
			t.Fatalf("list-user-sessions of no account: %v; want []", listed.Sessions)
		}
		for _, r := range []*testkit.Response{
			adminPost(e, admin, "revoke-user-sessions", map[string]any{"userId": nobody}),
			adminPost(e, admin, "revoke-user-session", map[string]any{"sessionToken": nobody}),
		} {
			if r.Status != http.StatusOK || string(r.Body) != `{"success":true}` {
				t.Fatalf("%d %s; want {\"success\":true}", r.Status, r.Body)
			}
		}
		if !live(t, e, a) || !live(t, e, admin) {
			t.Fatal("ending nothing ended a session")
		}
		e.Get("/api/auth/admin/get-user", bearer(admin)...).ExpectError(t, http.StatusBadRequest, "VALIDATION_ERROR")
		var banned struct{ User wireUser }
		adminPost(e, admin, "ban-user", map[string]any{"userId": a.UserID, "banExpiresIn": 0}).Decode(t, &banned)
		if !banned.User.Banned || banned.User.BanExpires != nil {
			t.Fatalf("banExpiresIn 0: %+v; want a ban for good", banned.User)
		}
		// A non-admin still gets the route's refusal first.
		adminPost(e, e.SignIn("plain@example.com"), "list-user-sessions", map[string]any{"userId": nobody}).
			ExpectError(t, http.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS_SESSIONS")
	}, withAdmin)
}
