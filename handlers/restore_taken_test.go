package handlers_test

import (
	"net/url"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/mail"
)

// A restore link whose old address another account has taken since is refused with
// 409 and the account keeps its address, on both databases (RestoreEmail's unique violation
// inside the pipelined transaction must still become ErrAddressTaken).
func TestRestoreEmail_ToAnAddressTakenSince(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		victim := e.SignIn("victim@example.com")
		e.Post(requestChangePath, map[string]any{"newEmail": "thief@example.com"}, bearer(victim)...)
		code := e.Mailer.Last(mail.KindChangeEmailCode, "thief@example.com").Code
		if r := e.Post(changeWithCode, map[string]any{"newEmail": "thief@example.com", "otp": code}, bearer(victim)...); r.Status != 200 {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		token, _ := linkToken(t, e.Mailer.Last(mail.KindEmailChanged, "victim@example.com").Link)
		other := e.SignIn("victim@example.com") // a new account takes the freed address
		form := url.Values{"token": {token}}
		r := e.Do(testkit.Request{Method: "POST", Path: "/auth/restore-email", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded"})
		if r.Status != 409 || !strings.Contains(string(r.Body), "belongs to another account") {
			t.Fatalf("restore to a taken address: %d %.300s", r.Status, r.Body)
		}
		if u := userOf(t, e, victim.UserID); u.Email != "thief@example.com" {
			t.Fatalf("address after a refused restore: %s", u.Email)
		}
		if u := userOf(t, e, other.UserID); u.Email != "victim@example.com" {
			t.Fatalf("the other account: %s", u.Email)
		}
	})
}
