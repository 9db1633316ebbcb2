package handlers_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// purchase stores a guest purchase made before any account existed.
func purchase(t *testing.T, e *testkit.Env, email, product string) models.Purchase {
	t.Helper()
	p := models.Purchase{ID: uuid.NewString(), Email: email, Product: product, PurchasedAt: e.Clock.Now(), CreatedAt: e.Clock.Now()}
	if err := e.DB.Create(&p).Error; err != nil {
		t.Fatal(err)
	}
	return p
}

// The first verification creates the account with its UserData, links earlier purchases and
// sends one welcome e-mail; later sign-ins do none of that again.
func TestSignUp_EffectsHappenOnce(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		p1 := purchase(t, e, "new@example.com", "Pro plan")
		p2 := purchase(t, e, "new@example.com", "Stickers")
		other := purchase(t, e, "someone@example.com", "Pro plan")

		s := e.SignIn("NEW@example.com")
		e.SignIn("new@example.com")

		if n := e.Count(&models.UserData{}, "user_id = ?", s.UserID); n != 1 {
			t.Fatalf("user_data rows = %d, want 1", n)
		}
		for _, p := range []models.Purchase{p1, p2} {
			var got models.Purchase
			e.DB.Where("id = ?", p.ID).Take(&got)
			if got.UserID == nil || *got.UserID != s.UserID {
				t.Fatalf("purchase %s not linked to the new account", p.Product)
			}
		}
		var got models.Purchase
		e.DB.Where("id = ?", other.ID).Take(&got)
		if got.UserID != nil {
			t.Fatal("another address's purchase was linked")
		}
		if n := len(e.Mailer.Find(mail.KindWelcome, "new@example.com")); n != 1 {
			t.Fatalf("welcome e-mails = %d, want 1", n)
		}
	})
}

// Catalogue B25: parallel first verifications for one new address end in one account, with its
// effects run once.
func TestSignUp_ParallelFirstVerificationsMakeOneAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		purchase(t, e, "twin@example.com", "Pro plan")
		for round := 0; round < 5; round++ {
			code := e.SendCode("twin@example.com")
			var wg sync.WaitGroup
			ids := make(chan string, 3)
			for _, spelling := range []string{"twin@example.com", "twin@example.com", "TWIN@Example.com"} {
				wg.Add(1)
				go func(email string) {
					defer wg.Done()
					r := signIn(e, email, code)
					if r.Status == 200 {
						var b struct{ User struct{ ID string } }
						r.Decode(t, &b)
						ids <- b.User.ID
					} else if r.Status >= 500 {
						t.Errorf("status %d: %s", r.Status, r.Body)
					}
				}(spelling)
			}
			wg.Wait()
			close(ids)
			if n := len(ids); n != 1 {
				t.Fatalf("round %d: %d successful verifications, want 1", round, n)
			}
		}
		if n := e.Count(&models.User{}); n != 1 {
			t.Fatalf("users = %d, want 1", n)
		}
		if n := e.Count(&models.UserData{}); n != 1 {
			t.Fatalf("user_data = %d, want 1", n)
		}
		if n := len(e.Mailer.Find(mail.KindWelcome, "twin@example.com")); n != 1 {
			t.Fatalf("welcome e-mails = %d, want 1", n)
		}
		if n := e.Count(&models.Purchase{}, "user_id IS NOT NULL"); n != 1 {
			t.Fatalf("linked purchases = %d, want 1", n)
		}
	})
}

// A failed welcome e-mail does not undo the sign-up.
func TestSignUp_WelcomeFailureKeepsTheAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.Mailer.FailKind(mail.KindWelcome, errors.New("provider down"))
		s := e.SignIn("alice@example.com")
		if n := e.Count(&models.User{}); n != 1 {
			t.Fatalf("users = %d, want 1", n)
		}
		expectSession(t, getSession(e, nil, "Authorization", "Bearer "+s.Bearer), s.UserID)
	})
}

// The answer never waits on the mailer: when it fails, the code e-mail stays queued and is
// delivered once the mailer works again (catalogue R4).
func TestSendCode_MailerFailureIsRetried(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.Mailer.FailKind(mail.KindSignInCode, errors.New("provider down"))
		r := e.Post(sendPath, map[string]any{"email": "alice@example.com", "type": "sign-in"})
		if r.Status != 200 {
			t.Fatalf("send while the mailer fails: %d %s", r.Status, r.Body)
		}
		if e.Mailer.LastCode("alice@example.com") != "" {
			t.Fatal("a failing mailer delivered")
		}
		e.Mailer.FailKind(mail.KindSignInCode, nil)
		e.Clock.Advance(mail.Backoff(1))
		code := e.Mailer.LastCode("alice@example.com")
		if code == "" {
			t.Fatal("the code was not delivered after the mailer recovered")
		}
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("the delivered code: %d", r.Status)
		}
	})
}

// A soft-deleted account is restored by signing in during its grace period, rather than being
// shadowed by a second account for the same address.
func TestSignIn_RestoresSoftDeletedAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		if err := e.DB.Where("id = ?", s.UserID).Delete(&models.User{}).Error; err != nil {
			t.Fatal(err)
		}
		// Sessions of a deleted account are dead at once.
		expectNoSession(t, getSession(e, nil, "Authorization", "Bearer "+s.Bearer))
		e.Clock.Advance(24 * time.Hour)
		again := e.SignIn("alice@example.com")
		if again.UserID != s.UserID {
			t.Fatalf("signed in as %s, want the restored account %s", again.UserID, s.UserID)
		}
		if n := e.Count(&models.User{}); n != 1 {
			t.Fatalf("live users = %d, want 1", n)
		}
	})
}
