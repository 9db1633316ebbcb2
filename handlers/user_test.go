package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/models"
)

const updateUserPath = "/api/auth/update-user"

func TestUpdateUser_ChangesTheName(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		r := e.Do(testkit.Request{Method: "POST", Path: updateUserPath, JSON: map[string]any{"name": "Alice Liddell"}, Cookies: s.Cookies(),
			Header: http.Header{"Origin": {e.URL}}})
		if r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("update-user: %d %s", r.Status, r.Body)
		}
		if r.Header.Get("set-auth-token") != s.Bearer {
			t.Fatal("update-user did not re-send set-auth-token")
		}
		// The fresh cookie cache carries the new name.
		fresh := r.Cookie("auth.session_data")
		if fresh == nil {
			t.Fatal("update-user did not refresh the cookie cache")
		}
		cookies := []*http.Cookie{{Name: s.TokenCookie.Name, Value: s.TokenCookie.Value}, {Name: fresh.Name, Value: fresh.Value}}
		var b struct{ User struct{ Name string } }
		getSession(e, cookies).Decode(t, &b)
		if b.User.Name != "Alice Liddell" {
			t.Fatalf("name after update = %q", b.User.Name)
		}
		// By bearer too, and the image can be set and cleared.
		r = e.Post(updateUserPath, map[string]any{"image": "https://cdn.example.com/a.png"}, "Authorization", "Bearer "+s.Bearer)
		if r.Status != 200 {
			t.Fatalf("update image: %d %s", r.Status, r.Body)
		}
		var u models.User
		e.DB.Where("id = ?", s.UserID).Take(&u)
		if u.Image == nil || *u.Image != "https://cdn.example.com/a.png" || u.Name != "Alice Liddell" {
			t.Fatalf("user = %+v", u)
		}
		// The session lookup reads it back (a bearer read always asks the database).
		var withImage struct{ User struct{ Image *string } }
		getSession(e, nil, "Authorization", "Bearer "+s.Bearer).Decode(t, &withImage)
		if withImage.User.Image == nil || *withImage.User.Image != "https://cdn.example.com/a.png" {
			t.Fatalf("get-session image %v", withImage.User.Image)
		}
		e.Post(updateUserPath, map[string]any{"image": nil}, "Authorization", "Bearer "+s.Bearer)
		e.DB.Where("id = ?", s.UserID).Take(&u)
		if u.Image != nil {
			t.Fatal("image not cleared")
		}
		var cleared struct{ User struct{ Image *string } }
		getSession(e, nil, "Authorization", "Bearer "+s.Bearer).Decode(t, &cleared)
		if cleared.User.Image != nil {
			t.Fatal("get-session still has the image")
		}
	})
}

func TestUpdateUser_RefusesBadInput(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		bearer := []string{"Authorization", "Bearer " + s.Bearer}
		e.Post(updateUserPath, map[string]any{"name": "x"}).ExpectError(t, 401, "UNAUTHORIZED")
		e.Post(updateUserPath, map[string]any{"email": "mallory@example.com"}, bearer...).ExpectError(t, 400, "EMAIL_CAN_NOT_BE_UPDATED")
		e.Post(updateUserPath, map[string]any{"name": "x", "email": "mallory@example.com"}, bearer...).ExpectError(t, 400, "EMAIL_CAN_NOT_BE_UPDATED")
		e.Post(updateUserPath, map[string]any{}, bearer...).ExpectError(t, 400, "NO_FIELDS_TO_UPDATE")
		for _, email := range []any{true, 1, map[string]any{}, []string{}, "0"} {
			e.Post(updateUserPath, map[string]any{"name": "x", "email": email}, bearer...).ExpectError(t, 400, "EMAIL_CAN_NOT_BE_UPDATED")
		}
		// As better-auth reads it (if (body.email)), a falsy address is no address: it changes
		// nothing, and the rest of the body is done.
		for _, email := range []any{nil, "", false, 0} {
			e.Post(updateUserPath, map[string]any{"email": email}, bearer...).ExpectError(t, 400, "NO_FIELDS_TO_UPDATE")
		}
		// Invisible characters too (ASVS 2.2.1): a name must not render blank or disguise itself.
		for _, name := range []any{strings.Repeat("n", 101), "bad\nline", "evil\u202egnp.exe", 42, true, []string{"a"},
			"\u200b", "Al\ufeffice", "\u00ad", "\u3164", "\u2800", "Alice\U000E0041", "\u2060\u2060"} {
			r := e.Post(updateUserPath, map[string]any{"name": name}, bearer...)
			r.ExpectError(t, 400, "VALIDATION_ERROR")
			if !strings.Contains(string(r.Body), "[body.name]") {
				t.Fatalf("message does not name the field: %s", r.Body)
			}
		}
		for _, img := range []any{"javascript:alert(1)", "/relative.png", "data:image/png;base64,xx", 7} {
			e.Post(updateUserPath, map[string]any{"image": img}, bearer...).ExpectError(t, 400, "VALIDATION_ERROR")
		}
		var u models.User
		e.DB.Where("id = ?", s.UserID).Take(&u)
		if u.Email != "alice@example.com" || u.Name != "" || u.Image != nil {
			t.Fatalf("rejected updates changed the user: %+v", u)
		}
		if r := e.Post(updateUserPath, map[string]any{"name": "Alice N", "email": nil}, bearer...); r.Status != 200 || string(r.Body) != `{"status":true}` {
			t.Fatalf("an update with a null address: %d %s", r.Status, r.Body)
		}
		var renamed models.User
		e.DB.Take(&renamed, "id = ?", s.UserID)
		if renamed.Name != "Alice N" || renamed.Email != "alice@example.com" {
			t.Fatalf("after an update with a null address: %q %q", renamed.Name, renamed.Email)
		}
	})
}

// ASVS 2.2.1: the name given at sign-up is held to the same rules, before the code is looked at:
// a refused name spends no attempt and creates nothing.
func TestSignIn_InvisibleNameIsRefused(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("new@example.com")
		for _, name := range []string{"\u200b", "\ufeff\ufeff", "\u3164", "Ada\U000E0041"} {
			r := e.Post(signInPath, map[string]any{"email": "new@example.com", "otp": code, "name": name})
			r.ExpectError(t, 400, "VALIDATION_ERROR")
		}
		if n := e.Count(&models.User{}); n != 0 {
			t.Fatalf("%d accounts created", n)
		}
		if r := e.Post(signInPath, map[string]any{"email": "new@example.com", "otp": code, "name": "Ada"}); r.Status != 200 {
			t.Fatalf("sign-in with the same code and a good name: %d %s", r.Status, r.Body)
		}
	})
}
