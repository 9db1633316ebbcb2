package handlers_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// Catalogue G71: deleting the account ends every session at once (bearer, and this instance's
// cookie caches); the person is told when the data goes; signing in before then restores the
// same account, preferences and all.
func TestDeletion_GraceAndRestore(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		app := e.SignIn("alice@example.com")
		browser := e.SignIn("alice@example.com")
		e.Post("/api/marketing-consent", nil, bearer(app)...)
		r := e.Post("/api/account/delete", nil, bearer(app)...)
		var body struct {
			Success  bool
			DeleteAt string
		}
		r.Decode(t, &body)
		want := e.Clock.Now().Add(auth.DefaultDeletionGrace).Format("2006-01-02T15:04:05.000Z")
		if !body.Success || body.DeleteAt != want {
			t.Fatalf("delete: %d %s, want deleteAt %s", r.Status, r.Body, want)
		}
		expectNoSession(t, getSession(e, nil, bearer(app)...))
		expectNoSession(t, getSession(e, browser.Cookies()))
		e.Get("/api/me", bearer(browser)...).ExpectError(t, 401, "UNAUTHORIZED")
		if !strings.Contains(e.Mailer.Last(mail.KindAccountDeleted, "alice@example.com").Text, "Sign in before then") {
			t.Fatal("no deletion notice")
		}
		// Anonymous and repeated deletions are refused.
		e.Post("/api/account/delete", nil).ExpectError(t, 401, "UNAUTHORIZED")

		e.Clock.Advance(auth.DefaultDeletionGrace - time.Hour)
		back := e.SignIn("alice@example.com")
		if back.UserID != app.UserID {
			t.Fatalf("signed in as %s, want the restored %s", back.UserID, app.UserID)
		}
		var me struct{ Preferences map[string]bool }
		e.Get("/api/me", bearer(back)...).Decode(t, &me)
		if !me.Preferences["marketingOptIn"] {
			t.Fatal("the restored account lost its preferences")
		}
	})
}

// The nightly purge removes accounts past their grace period with their sessions, address-change
// codes, restore links, records of e-mail given up, preferences and consent records; purchases
// stay, unlinked. A sign-in code asked for just before, and still waiting to go out, is delivered,
// and signing in with it makes a new account.
func TestDeletion_Purge(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		gone := e.SignIn("gone@example.com")
		kept := e.SignIn("kept@example.com")
		e.Post("/api/marketing-consent", nil, bearer(gone)...)
		p := models.Purchase{ID: uuid.NewString(), Email: "gone@example.com", UserID: &gone.UserID, Product: "Pro", PurchasedAt: e.Clock.Now(), CreatedAt: e.Clock.Now()}
		e.DB.Create(&p)
		// A change leaves a restore link.
		changeByCode(t, e, gone, "gone@example.com", "gone2@example.com")
		// The deletion notice is refused for good: the outbox keeps a record of it.
		e.Mailer.FailKind(mail.KindAccountDeleted, &mail.PermanentError{Err: errors.New("mailbox refused")})
		e.Post("/api/account/delete", nil, bearer(gone)...)
		e.Mailer.Flush()
		e.Mailer.FailKind(mail.KindAccountDeleted, nil)
		e.Clock.Advance(auth.DefaultDeletionGrace - time.Minute)
		// Deleted later: still in its grace period. The first session is too old to delete with.
		e.Post("/api/account/delete", nil, bearer(kept)...).ExpectError(t, 400, "SESSION_EXPIRED")
		kept = e.SignIn("kept@example.com")
		e.Post("/api/account/delete", nil, bearer(kept)...)
		e.Clock.Advance(2 * time.Minute)
		// A code asked for now, whose e-mail has not gone out yet.
		e.Mailer.FailKind(mail.KindSignInCode, errors.New("provider slow"))
		if r := e.Post(sendPath, map[string]any{"email": "gone2@example.com", "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("send: %d", r.Status)
		}
		e.Mailer.Flush()
		if c := e.Count(&models.Verification{}, "subject LIKE ?", gone.UserID+":%"); c != 1 {
			t.Fatalf("%d restore links before the purge, want 1: the checks below would prove nothing", c)
		}
		if c := e.Count(&models.OutboxMessage{}, "recipient = ? AND status = ?", "gone2@example.com", "abandoned"); c != 1 {
			t.Fatalf("%d records of e-mail given up before the purge, want 1: the checks below would prove nothing", c)
		}

		purged, err := e.Auth.PurgeDeletedAccounts(context.Background())
		if err != nil || purged != 1 {
			t.Fatalf("purged %d, %v; want 1", purged, err)
		}
		var n int64
		e.DB.Unscoped().Model(&models.User{}).Where("id = ?", gone.UserID).Count(&n)
		if n != 0 {
			t.Fatal("the purged account is still there")
		}
		for name, model := range map[string]any{"sessions": &models.Session{}, "user_data": &models.UserData{}, "consent": &models.ConsentEvent{}} {
			if c := e.Count(model, "user_id = ?", gone.UserID); c != 0 {
				t.Fatalf("%d %s rows of the purged account left", c, name)
			}
		}
		// Its codes, restore links and the records of its e-mail go too; the waiting code stays.
		if c := e.Count(&models.Verification{}, "subject = ? OR subject LIKE ?", gone.UserID, gone.UserID+":%"); c != 0 {
			t.Fatalf("%d codes or links of the purged account left", c)
		}
		if c := e.Count(&models.OutboxMessage{}, "recipient = ? AND status <> ?", "gone2@example.com", "pending"); c != 0 {
			t.Fatalf("%d records of e-mail to the purged account's address left", c)
		}
		e.Mailer.FailKind(mail.KindSignInCode, nil)
		e.Clock.Advance(mail.Backoff(1))
		if r := signIn(e, "gone2@example.com", e.Mailer.LastCode("gone2@example.com")); r.Status != 200 {
			t.Fatalf("signing in with the code that waited: %d %s", r.Status, r.Body)
		}
		var left models.Purchase
		e.DB.Where("id = ?", p.ID).Take(&left)
		if left.UserID != nil {
			t.Fatal("the purchase still points at the purged account")
		}
		e.DB.Unscoped().Model(&models.User{}).Where("id = ?", kept.UserID).Count(&n)
		if n != 1 {
			t.Fatal("an account inside its grace period was purged")
		}
		again := e.SignIn("gone@example.com")
		if again.UserID == gone.UserID {
			t.Fatal("the purged account came back")
		}
		// Past the grace period, signing in gets a new account even before the purge runs.
		e.Clock.Advance(auth.DefaultDeletionGrace)
		fresh := e.SignIn("kept@example.com")
		if fresh.UserID == kept.UserID {
			t.Fatal("an account past its grace period was restored")
		}
	})
}

// The account page deletes with a confirmation and lands on the grace-period page.
func TestDeletion_FromTheAccountPage(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	post := func(v url.Values) *testkit.Response {
		return e.Do(testkit.Request{Method: "POST", Path: "/account/delete", Body: v.Encode(), ContentType: "application/x-www-form-urlencoded",
			Cookies: s.Cookies(), Header: http.Header{"Origin": {e.URL}}})
	}
	if r := post(url.Values{}); r.Status != 422 || !strings.Contains(string(r.Body), "Tick the box") {
		t.Fatalf("without confirmation: %d", r.Status)
	}
	r := post(url.Values{"confirm": {"yes"}})
	day := e.Clock.Now().Add(auth.DefaultDeletionGrace).Format("2006-01-02")
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/auth/account-deleted?until="+day {
		t.Fatalf("delete: %d to %q", r.Status, r.Header.Get("Location"))
	}
	if c := r.Cookie("auth.session_token"); c == nil || c.Value != "" {
		t.Fatal("the cookie was not cleared")
	}
	page := e.Get(r.Header.Get("Location"))
	if page.Status != 200 || !strings.Contains(string(page.Body), "31 March 2026") {
		t.Fatalf("account-deleted page: %d", page.Status)
	}
}

// Provider delivery through a 10-minute outage: answers never wait, nothing is lost, nothing is
// sent twice, and codes that expired meanwhile are dropped (catalogue R4).
func TestDelivery_ProviderOutage(t *testing.T) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(dialect, func(t *testing.T) { providerOutage(t, dialect) })
	}
}

func providerOutage(t *testing.T, dialect string) {
	{
		provider := testkit.NewFakeProvider(t)
		resend, err := mail.NewResend(mail.ProviderConfig{APIKey: provider.APIKey, From: "Test <auth@test.example>", BaseURL: provider.URL})
		if err != nil {
			t.Fatal(err)
		}
		e := testkit.New(t, dialect, testkit.WithProvider(resend))
		svc := e
		// Flush waits for deliveries in flight, so the clock never jumps past a worker's lease
		// while it is sending.
		flush := e.Mailer.Flush
		provider.SetDown(true)
		// Sent at the start of the outage: expires before it ends.
		if r := svc.Post(sendPath, map[string]any{"email": "early@example.com", "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("send during the outage: %d", r.Status)
		}
		for minute := 0; minute < 10; minute++ {
			e.Clock.Advance(time.Minute)
			flush()
			if minute == 6 {
				// Sent late in the outage: still valid when it ends.
				svc.Post(sendPath, map[string]any{"email": "late@example.com", "type": "sign-in"})
			}
		}
		if len(provider.Delivered()) != 0 {
			t.Fatal("the provider was down but something was delivered")
		}
		provider.SetDown(false)
		e.Clock.Advance(5 * time.Minute) // past the retry backoff, before the late code expires
		flush()
		got := provider.Delivered()
		if len(got) != 1 || got[0].To[0] != "late@example.com" {
			t.Fatalf("delivered %+v, want only the late, still valid code", got)
		}
		if !strings.Contains(got[0].Subject, "is your") || !strings.Contains(got[0].HTML, "<html") || got[0].Text == "" {
			t.Fatalf("the e-mail: %+v", got[0])
		}
		// The expired code's message was dropped and the delivered one deleted: nothing is left.
		if n := e.Count(&models.OutboxMessage{}); n != 0 {
			t.Fatalf("%d messages left in the outbox", n)
		}
		// Later flushes send nothing more.
		requests := provider.Requests()
		e.Clock.Advance(time.Hour)
		flush()
		if provider.Requests() != requests || len(provider.Delivered()) != 1 {
			t.Fatal("a delivered message was sent again")
		}
	}
}

// A message whose delivery answer was lost is retried with the same idempotency key, so the
// provider sends it once.
func TestDelivery_LostAnswerIsNotSentTwice(t *testing.T) {
	provider := testkit.NewFakeProvider(t)
	resend, _ := mail.NewResend(mail.ProviderConfig{APIKey: provider.APIKey, From: "Test <auth@test.example>", BaseURL: provider.URL})
	e := testkit.New(t, testkit.SQLite, testkit.WithProvider(&lossy{Mailer: resend, lost: map[string]bool{}}))
	svc := e
	svc.Post(sendPath, map[string]any{"email": "alice@example.com", "type": "sign-in"})
	for i := 0; i < 3; i++ {
		e.Mailer.Flush()
		e.Clock.Advance(mail.Backoff(i + 1))
	}
	if provider.Requests() < 2 || len(provider.Delivered()) != 1 {
		t.Fatalf("%d requests, %d e-mails sent; want a retry and one e-mail", provider.Requests(), len(provider.Delivered()))
	}
}

// A revoked provider key is the operator's to fix: messages keep being retried well past
// MaxAttempts, each failure logged as an error, and go out once the key works again. They are
// given up only after a restore link's lifetime (auth.RestoreLinkLifetime).
func TestDelivery_RevokedKeyIsRetried(t *testing.T) {
	provider := testkit.NewFakeProvider(t)
	resend, _ := mail.NewResend(mail.ProviderConfig{APIKey: provider.APIKey, From: "Test <auth@test.example>", BaseURL: provider.URL})
	e := testkit.New(t, testkit.SQLite, testkit.WithProvider(resend))
	enqueue := func(to string) {
		t.Helper()
		row, err := e.Auth.Outbox().Prepare(mail.Draft{Kind: mail.KindWelcome, To: to}, mail.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.DB.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
	}
	message := func(to string) models.OutboxMessage {
		var m models.OutboxMessage
		e.DB.Where("recipient = ?", to).Take(&m)
		return m
	}
	provider.RevokeKey()
	enqueue("a@example.com")
	for i := 0; i < mail.MaxAttempts+5; i++ {
		e.Mailer.Flush()
		e.Clock.Advance(mail.Backoff(i + 1))
	}
	if m := message("a@example.com"); m.Status != "pending" || m.Attempts <= mail.MaxAttempts {
		t.Fatalf("after %d refusals: %s with %d attempts, want still pending", mail.MaxAttempts+5, m.Status, m.Attempts)
	}
	if !strings.Contains(e.Logs.String(), `level=ERROR msg="outbox: delivery failed, will retry"`) {
		t.Fatal("the refused key was not logged as an error")
	}
	if len(provider.Delivered()) != 0 {
		t.Fatal("delivered with a revoked key")
	}
	provider.RestoreKey()
	e.Clock.Advance(15 * time.Minute)
	e.Mailer.Flush()
	if got := provider.Delivered(); len(got) != 1 || got[0].To[0] != "a@example.com" || e.Count(&models.OutboxMessage{}, "recipient = ?", "a@example.com") != 0 {
		t.Fatalf("after the key was restored: %+v, or the message was kept", got)
	}
	// Past the window, the message is given up.
	provider.RevokeKey()
	enqueue("b@example.com")
	e.Mailer.Flush()
	e.Clock.Advance(auth.RestoreLinkLifetime)
	e.Mailer.Flush()
	if m := message("b@example.com"); m.Status != "abandoned" || len(m.Payload) != 0 {
		t.Fatalf("after the window: %s, %d bytes kept", m.Status, len(m.Payload))
	}
}

// lossy delivers each message but reports the first try as failed, as when the answer is lost on
// the way back.
type lossy struct {
	mail.Mailer
	mu   sync.Mutex
	lost map[string]bool
}

func (l *lossy) Send(ctx context.Context, m mail.Message) error {
	err := l.Mailer.Send(ctx, m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && !l.lost[m.ID] {
		l.lost[m.ID] = true
		return context.DeadlineExceeded
	}
	return err
}

// A message that cannot be opened (sealed under another AUTH_SECRET, say) cannot get better by
// retrying: it is given up at once, with the reason recorded and an error logged for someone to
// look at, and the messages beside it still go out.
func TestDelivery_UnreadableMessageIsGivenUpLoudly(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		now := e.Clock.Now().UTC()
		bad := models.OutboxMessage{ID: "6f1c2b9e-3d4a-4c5b-8e7f-0a1b2c3d4e5f", Kind: string(mail.KindWelcome), Recipient: "bad@example.com",
			Payload: make([]byte, 64), Status: "pending", NextAttemptAt: now, CreatedAt: now}
		if err := e.DB.Create(&bad).Error; err != nil {
			t.Fatal(err)
		}
		e.SendCode("good@example.com")
		e.Mailer.Flush()
		var got models.OutboxMessage
		if err := e.DB.Where("id = ?", bad.ID).Take(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got.Status != "abandoned" || !strings.HasPrefix(got.LastError, "unreadable") || len(got.Payload) != 0 {
			t.Fatalf("the unreadable message: status %q, last error %q, payload %d bytes", got.Status, got.LastError, len(got.Payload))
		}
		if !strings.Contains(e.Logs.String(), "cannot be opened or rendered") {
			t.Fatalf("nothing logged:\n%s", e.Logs.String())
		}
		if len(e.Mailer.Find(mail.KindWelcome, "bad@example.com")) != 0 || e.Mailer.LastCode("good@example.com") == "" {
			t.Fatal("the unreadable message went out, or the good one did not")
		}
	})
}
