package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"codeauth/internal/apptest"
	"codeauth/models"
)

// postForm sends body as an HTML form would, to path with its query string.
func postForm(e *apptest.Env, path string, body url.Values, cookies ...*http.Cookie) *apptest.Response {
	return e.Do(apptest.Request{Method: "POST", Path: path, Body: body.Encode(), ContentType: "application/x-www-form-urlencoded",
		Cookies: cookies, Header: http.Header{"Origin": {e.URL}}})
}

// expectNotSignedIn fails if r opened a session or set a cookie.
func expectNotSignedIn(t *testing.T, e *apptest.Env, r *apptest.Response, what string) {
	t.Helper()
	if n := e.Count(&models.Session{}); n != 0 || len(r.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("%s: %d sessions, Set-Cookie %v", what, n, r.Header.Values("Set-Cookie"))
	}
}

// Catalogue #67, #112; ASVS 14.2.1, 15.3.7: the page forms read their fields from the form body
// only. A code in the query string signs nobody in (it would travel in URLs, logs and Referer
// headers), and a field sent in both places takes the body's value.
func TestPages_FormFieldsComeFromTheBodyOnly(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
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
