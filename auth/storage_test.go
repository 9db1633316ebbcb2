package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// Once sign-ins settle, no code and no e-mail is left behind: a code goes when it is used, its
// e-mail when it is delivered, and a code e-mail replaced before it went out with it.
func TestSignInsLeaveNoCodesOrMail(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
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
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
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

// The prune's batch and pace follow the database: on SQLite, whose one writer every request waits
// for, a backlog goes in statements of 100 rows, with a rest between them three times as long as
// the statement took; on PostgreSQL in statements of 1,000, without rests. 150 expired counters
// take two statements on SQLite (100, 50; one rest) and one on PostgreSQL; the five other tables
// one each (it finds nothing).
func TestPruneExpired_BatchFollowsTheDatabase(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		now := e.Clock.Now()
		var throttles []models.AuthThrottle
		for i := range 150 {
			throttles = append(throttles, models.AuthThrottle{Key: fmt.Sprintf("send:%d", i), Count: 1, ResetAt: now.Add(-time.Second), UpdatedAt: now})
		}
		if err := e.DB.Create(throttles).Error; err != nil {
			t.Fatal(err)
		}
		res, err := e.Auth.PruneExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := auth.PruneResult{Throttles: 150, Statements: 1 + 5}
		if e.Dialect == testkit.SQLite {
			want.Statements = 2 + 5
		}
		rested := res.Rested
		res.Rested = 0
		if res != want {
			t.Fatalf("pruned %+v, want %+v", res, want)
		}
		if e.Dialect == testkit.SQLite && rested <= 0 || e.Dialect == testkit.Postgres && rested != 0 {
			t.Errorf("on %s the prune rested %v", e.Dialect, rested)
		}
	})
}

// A backlog larger than a batch is pruned whole, in statements that each delete at most a batch
// (here 10 rows), and no live row goes with it.
func TestPruneExpired_InBatches(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const batch = 10
		e.Auth.SetPruneBatch(batch)
		now := e.Clock.Now()
		past, future := now.Add(-time.Second), now.Add(time.Hour)
		user := models.User{ID: uuid.NewString(), Email: "a@example.com", CreatedAt: now, UpdatedAt: now}
		if err := e.DB.Create(&user).Error; err != nil {
			t.Fatal(err)
		}
		var throttles []models.AuthThrottle
		var codes []models.Verification
		var sessions []models.Session
		var records []models.OutboxMessage
		var devices []models.KnownDevice
		var events []models.AuditEvent
		for i := range 36 {
			expiry := past
			if i == 0 {
				expiry = future // the one live row of each table
			}
			throttles = append(throttles, models.AuthThrottle{Key: fmt.Sprintf("send:%d", i), Count: 1, ResetAt: expiry, UpdatedAt: now})
			if i < 24 {
				codes = append(codes, models.Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: fmt.Sprintf("%d@x.io", i), Email: "x@x.io", CodeHash: "h", ExpiresAt: expiry, CreatedAt: now})
			}
			if i < 21 {
				sessions = append(sessions, models.Session{ID: uuid.NewString(), Token: fmt.Sprintf("t%d", i), UserID: user.ID, ExpiresAt: expiry, AbsoluteExpiresAt: future, CreatedAt: now, UpdatedAt: now})
			}
			if i < 12 {
				at := now.Add(-auth.DefaultAuditRetention - time.Second)
				if i == 0 {
					at = now
				}
				events = append(events, models.AuditEvent{ID: uuid.NewString(), At: at, Action: auth.AuditSignIn, Detail: "{}"})
			}
			if i < 13 {
				seen := now.Add(-auth.KnownDeviceWindow - time.Second)
				if i == 0 {
					seen = now
				}
				devices = append(devices, models.KnownDevice{UserID: user.ID, DeviceKey: fmt.Sprintf("d%d", i), LastSeenAt: seen})
			}
			if i < 11 {
				givenUp := now.Add(-auth.OutboxRetention - time.Second)
				if i == 0 {
					givenUp = now
				}
				records = append(records, models.OutboxMessage{ID: uuid.NewString(), Kind: "welcome", Recipient: "x@x.io", Payload: []byte{},
					Status: "abandoned", NextAttemptAt: givenUp, CreatedAt: givenUp.Add(-time.Hour), GivenUpAt: &givenUp})
			}
		}
		for _, rows := range []any{throttles, codes, sessions, records, devices, events} {
			if err := e.DB.Create(rows).Error; err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.Auth.PruneExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// 35 expired counters take four statements (10, 10, 10, 5), 23 codes three, 20 sessions
		// three (the last finds none), 12 devices two, 11 audit events two, 10 records two.
		want := auth.PruneResult{Throttles: 35, Verifications: 23, Sessions: 20, KnownDevices: 12, Audit: 11, Outbox: 10,
			Statements: 4 + 3 + 3 + 2 + 2 + 2}
		res.Rested = 0 // TestPruneExpired_BatchFollowsTheDatabase
		if res != want {
			t.Fatalf("pruned %+v, want %+v", res, want)
		}
		for name, model := range map[string]any{"throttle": &models.AuthThrottle{}, "code": &models.Verification{}, "session": &models.Session{}, "record": &models.OutboxMessage{}, "device": &models.KnownDevice{}, "audit event": &models.AuditEvent{}} {
			if n := e.Count(model); n != 1 {
				t.Fatalf("%d %s rows left, want the live one", n, name)
			}
		}
	})
}

// A throttle counter whose window ends just as it counts again starts a new window (count 1,
// reset_at moved on) in the same row. A prune that picked the row as expired, and waited for that
// count to commit, must leave the new window alone: the check is made again on the row it finds.
// PostgreSQL only, where the two can interleave; SQLite runs one writer at a time.
func TestPruneExpired_LeavesACounterThatStartedAgain(t *testing.T) {
	e := testkit.New(t, testkit.Postgres)
	now := e.Clock.Now()
	if err := e.DB.Create(&models.AuthThrottle{Key: "send:k", Count: 5, ResetAt: now.Add(-time.Second), UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	tx := e.DB.Begin()
	defer tx.Rollback()
	// What a send does to a counter whose window has passed (hitQuery's upsert).
	if err := tx.Exec(`UPDATE auth_throttle SET count = 1, reset_at = ?, updated_at = ? WHERE key = ?`, now.Add(auth.SendWindow), now, "send:k").Error; err != nil {
		t.Fatal(err)
	}
	type result struct {
		auth.PruneResult
		err error
	}
	pruned := make(chan result, 1)
	go func() {
		r, err := e.Auth.PruneExpired(context.Background())
		pruned <- result{r, err}
	}()
	for stop := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var waiting int64
		e.DB.Raw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM auth_throttle%'`).Scan(&waiting)
		if waiting > 0 {
			break
		}
		if time.Now().After(stop) {
			t.Fatal("waited in vain for the prune to wait for the counter")
		}
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-pruned:
		if r.err != nil || r.Throttles != 0 {
			t.Fatalf("the prune deleted %d counters, %v", r.Throttles, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waited in vain for the prune")
	}
	var row models.AuthThrottle
	if err := e.DB.Where("key = ?", "send:k").Take(&row).Error; err != nil || row.Count != 1 {
		t.Fatalf("the counter of the new window: %+v, %v", row, err)
	}
}
