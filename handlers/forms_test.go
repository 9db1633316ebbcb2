package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/google/uuid"
)

// postForm sends body as an HTML form would, to path with its query string.
func postForm(e *testkit.Env, path string, body url.Values, cookies ...*http.Cookie) *testkit.Response {
	return e.Do(testkit.Request{Method: "POST", Path: path, Body: body.Encode(), ContentType: "application/x-www-form-urlencoded",
		Cookies: cookies, Header: http.Header{"Origin": {e.URL}}})
}

// expectNotSignedIn fails if r opened a session or set a cookie.
func expectNotSignedIn(t *testing.T, e *testkit.Env, r *testkit.Response, what string) {
	t.Helper()
	if n := e.Count(&models.Session{}); n != 0 || len(r.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("%s: %d sessions, Set-Cookie %v", what, n, r.Header.Values("Set-Cookie"))
	}
}

// Catalogue #67, #112; ASVS 14.2.1, 15.3.7: the page forms read their fields from the form body
// only. A code in the query string signs nobody in (it would travel in URLs, logs and Referer
// headers), and a field sent in both places takes the body's value.
func TestPages_FormFieldsComeFromTheBodyOnly(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		wrong := "000000"
		if code == wrong {
			wrong = "111111"
		}
		query := url.Values{"email": {"alice@example.com"}, "otp": {code}, "mode": {"sign-in"}, "redirect": {"/elsewhere"}}

		// Everything in the query, nothing in the body: the form has no address.
		r := postForm(e, "/auth/verify?"+query.Encode(), nil)
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "Enter a valid e-mail address") {
			t.Fatalf("empty body, fields in the query: %d %s", r.Status, r.Body)
		}
		expectNotSignedIn(t, e, r, "empty body, fields in the query")

		// The address in the body, the code in the query: the form has no code.
		r = postForm(e, "/auth/verify?"+query.Encode(), url.Values{"email": {"alice@example.com"}, "mode": {"sign-in"}})
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "That code is not right") {
			t.Fatalf("code in the query only: %d %s", r.Status, r.Body)
		}
		expectNotSignedIn(t, e, r, "code in the query only")

		// A wrong code in the body is wrong, whatever the query says.
		r = postForm(e, "/auth/verify?"+query.Encode(), url.Values{"email": {"alice@example.com"}, "otp": {wrong}, "mode": {"sign-in"}})
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "That code is not right") {
			t.Fatalf("wrong code in the body, right one in the query: %d %s", r.Status, r.Body)
		}
		expectNotSignedIn(t, e, r, "wrong code in the body, right one in the query")

		// The right code and the redirect target in the body win over the query's.
		bad := url.Values{"email": {"mallory@example.com"}, "otp": {wrong}, "mode": {"sign-up"}, "redirect": {"/elsewhere"}}
		r = postForm(e, "/auth/verify?"+bad.Encode(), url.Values{"email": {"alice@example.com"}, "otp": {code}, "mode": {"sign-in"}, "redirect": {"/account"}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" || r.Cookie("auth.session_token") == nil {
			t.Fatalf("fields in both: %d to %q", r.Status, r.Header.Get("Location"))
		}
		var users []models.User
		e.DB.Find(&users)
		if len(users) != 1 || users[0].Email != "alice@example.com" {
			t.Fatalf("users after signing in: %+v", users)
		}
	})
}

// dbSnapshot is every row of every table, in a stable order, to compare before and after a
// request that must change nothing.
func dbSnapshot(t *testing.T, e *testkit.Env) string {
	t.Helper()
	tables, err := e.DB.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(tables)
	var out strings.Builder
	for _, table := range tables {
		var rows []map[string]any
		if err := e.DB.Table(table).Find(&rows).Error; err != nil {
			t.Fatalf("reading %s: %v", table, err)
		}
		lines := make([]string, 0, len(rows))
		for _, row := range rows {
			b, _ := json.Marshal(row)
			lines = append(lines, string(b))
		}
		sort.Strings(lines)
		fmt.Fprintf(&out, "%s\n%s\n", table, strings.Join(lines, "\n"))
	}
	return out.String()
}

// Catalogue E44, #112: every POST route outside the API, those added later included, takes HTML
// form bodies only. Anything else (text/plain, which any site's form can send without a
// preflight, multipart, JSON, none) is 415 before a handler runs, even from the service's own
// origin with a fresh session, and changes nothing.
func TestPages_EveryFormRouteRequiresAFormBody(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		e.SendCode("alice@example.com") // a live code, for the verify route to find
		body := "email=alice@example.com&otp=123456&mode=sign-in&name=Mallory&confirm=yes&newEmail=new@example.com&token=x&purchase=" +
			uuid.NewString()
		before := dbSnapshot(t, e)
		seen := map[string]bool{}
		for _, route := range e.App.GetRoutes(true) {
			if route.Method != http.MethodPost || middleware.KindOfPath(route.Path) != middleware.PagePath {
				continue
			}
			seen[route.Path] = true
			for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "multipart/form-data; boundary=x", "application/json", ""} {
				r := e.Do(testkit.Request{Method: "POST", Path: route.Path, Body: body, ContentType: ct, Cookies: s.Cookies(),
					Header: http.Header{"Origin": {e.URL}, "Sec-Fetch-Site": {"same-origin"}}})
				if r.Status != http.StatusUnsupportedMediaType {
					t.Fatalf("POST %s as %q: %d, want 415", route.Path, ct, r.Status)
				}
				if got := r.Header.Values("Set-Cookie"); len(got) != 0 {
					t.Fatalf("POST %s as %q set cookies %v", route.Path, ct, got)
				}
			}
		}
		for _, want := range []string{"/auth/code", "/auth/verify", "/auth/sign-out", "/checkout/claim", "/auth/verify-email",
			"/auth/restore-email", "/account/name", "/account/consent", "/account/email", "/account/delete"} {
			if !seen[want] {
				t.Fatalf("POST %s was not among the routes tried: %v", want, seen)
			}
		}
		if after := dbSnapshot(t, e); after != before {
			t.Fatalf("refused form posts changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// The page's resend says the code went out again, in the same words whether the live code was
// sent again or a new one made, so it tells nobody whether someone asked for a code lately; the
// code from either e-mail signs in.
func TestPages_ResendSaysTheCodeWentOutAgain(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		resend := func(email string) string {
			t.Helper()
			r := postForm(e, "/auth/code", url.Values{"email": {email}, "mode": {"sign-in"}, "resend": {"1"}})
			if r.Status != http.StatusOK {
				t.Fatalf("resend: %d %s", r.Status, r.Body)
			}
			body := string(r.Body)
			i := strings.Index(body, `data-testid="code-resent"`)
			if i < 0 {
				t.Fatalf("the resend does not say the code went out again:\n%s", body)
			}
			return body[i : i+strings.Index(body[i:], "</p>")]
		}
		// The live code sent again, and a code made new after the first expired: the same words.
		first := e.SendCode("alice@example.com")
		again := resend("alice@example.com")
		if e.Mailer.LastCode("alice@example.com") != first {
			t.Fatal("the page's resend did not send the live code again")
		}
		e.Clock.Advance(time.Hour)
		fresh := resend("alice@example.com")
		if again != fresh {
			t.Fatalf("the resend's words tell the two cases apart: %q and %q", again, fresh)
		}
		// A first send says nothing of the kind.
		r := postForm(e, "/auth/code", url.Values{"email": {"bob@example.com"}, "mode": {"sign-in"}})
		if strings.Contains(string(r.Body), `data-testid="code-resent"`) {
			t.Fatal("a first send says the code was sent again")
		}
	})
}

// The code step sent again after it signed in, without JavaScript (a double click, a reload, back
// and submit): the browser goes on where the first went, signed in, instead of being told its
// spent code is wrong. Only for a session of the same address; any other browser is told.
func TestVerifyForm_SentAgainAfterSigningInGoesOn(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		form := url.Values{"email": {"alice@example.com"}, "mode": {"sign-in"}, "redirect": {"/account"}}
		if r := postForm(e, "/auth/code", form); r.Status != 200 {
			t.Fatalf("code: %d", r.Status)
		}
		form.Set("otp", e.Mailer.LastCode("alice@example.com"))
		first := postForm(e, "/auth/verify", form)
		session := first.Cookie("auth.session_token")
		if first.Status != http.StatusSeeOther || session == nil {
			t.Fatalf("first: %d", first.Status)
		}
		again := postForm(e, "/auth/verify", form, session)
		if again.Status != http.StatusSeeOther || again.Header.Get("Location") != "/account" {
			t.Fatalf("sent again: %d %q\n%s", again.Status, again.Header.Get("Location"), again.Body)
		}
		if n := e.Count(&models.Session{}); n != 1 {
			t.Fatalf("%d sessions", n)
		}
		// Another account's browser, or none, is told the code is not right.
		other := e.SignIn("bob@example.com")
		for _, cookies := range [][]*http.Cookie{nil, {other.TokenCookie}} {
			if r := postForm(e, "/auth/verify", form, cookies...); r.Status != http.StatusUnprocessableEntity && r.Status != http.StatusBadRequest {
				t.Fatalf("without alice's session: %d", r.Status)
			}
		}
	})
}
