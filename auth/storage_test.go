package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/apptest"
	"codeauth/mail"
	"codeauth/models"
)

// Once sign-ins settle, no code and no e-mail is left behind: a code goes when it is used, its
// e-mail when it is delivered, and a code e-mail replaced before it went out with it.
func TestSignInsLeaveNoCodesOrMail(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		const accounts = 5
		for i := range accounts {
			e.SignIn(fmt.Sprintf("user%d@example.com", i))
		}
		e.SignIn("user0@example.com") // a sign-in, not a sign-up
		// A code whose e-mail could not go out at once, replaced by a newer one.
		e.Mailer.FailKind(mail.KindSignInCode, errors.New("provider slow"))
		if r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "user1@example.com", "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("send: %d", r.Status)
		}
		e.Mailer.Flush()
		e.Mailer.FailKind(mail.KindSignInCode, nil)
		e.SignIn("user1@example.com")
		e.Mailer.Flush()

		for i := range accounts {
			to := fmt.Sprintf("user%d@example.com", i)
			codes := 1
			if i <= 1 {
				codes = 2
			}
			if w, c := len(e.Mailer.Find(mail.KindWelcome, to)), len(e.Mailer.Find(mail.KindSignInCode, to)); w != 1 || c != codes {
				t.Fatalf("%s got %d welcomes and %d codes, want 1 and %d", to, w, c, codes)
			}
		}
		if n := e.Count(&models.Verification{}); n != 0 {
			t.Fatalf("%d codes left", n)
		}
		if n := e.Count(&models.OutboxMessage{}); n != 0 {
			t.Fatalf("%d e-mails left in the outbox", n)
		}
	})
}

// An e-mail given up (here refused for good after two failed tries) keeps a record without its
// content for operators, for OutboxRetention from when it was given up, and no longer.
func TestGivenUpMailIsRecordedForTheRetention(t *testing.T) {
	if auth.OutboxRetention != 7*24*time.Hour {
		t.Fatalf("OutboxRetention is %s; the review asked for 7 days", auth.OutboxRetention)
	}
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		e.Mailer.FailKind(mail.KindWelcome, errors.New("provider unavailable"))
		e.SignIn("alice@example.com")
		e.Mailer.Flush()
		e.Clock.Advance(mail.Backoff(1))
		e.Mailer.Flush()
		e.Clock.Advance(mail.Backoff(2))
		e.Mailer.FailKind(mail.KindWelcome, &mail.PermanentError{Err: errors.New("mailbox refused")})
		e.Mailer.Flush()
		record := func() []models.OutboxMessage {
			var rows []models.OutboxMessage
			if err := e.DB.Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			return rows
		}
		rows := record()
		if len(rows) != 1 {
			t.Fatalf("%d rows in the outbox, want the welcome's record", len(rows))
		}
		if r := rows[0]; r.Status != "abandoned" || r.Kind != string(mail.KindWelcome) || r.Recipient != "alice@example.com" ||
			r.LastError != "permanent: mailbox refused" || len(r.Payload) != 0 {
			t.Fatalf("the record: %+v", r)
		}
		prune := func() auth.PruneResult {
			r, err := e.Auth.PruneExpired(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		e.Clock.Advance(auth.OutboxRetention - 10*time.Second) // from when it was given up
		if r := prune(); r.Outbox != 0 || len(record()) != 1 {
			t.Fatalf("within the retention the prune removed %d records", r.Outbox)
		}
		e.Clock.Advance(20 * time.Second)
		if r := prune(); r.Outbox != 1 || len(record()) != 0 {
			t.Fatalf("past the retention the prune removed %d records, %d left", r.Outbox, len(record()))
		}
	})
}
