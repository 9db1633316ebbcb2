package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/apptest"
	"codeauth/models"

	"github.com/google/uuid"
)

func TestNextNightly(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	cases := map[time.Time]time.Time{
		time.Date(2026, 5, 1, 2, 59, 59, 0, loc): time.Date(2026, 5, 1, 3, 0, 0, 0, loc),
		time.Date(2026, 5, 1, 3, 0, 0, 0, loc):   time.Date(2026, 5, 2, 3, 0, 0, 0, loc),
		time.Date(2026, 5, 1, 23, 0, 0, 0, loc):  time.Date(2026, 5, 2, 3, 0, 0, 0, loc),
		time.Date(2026, 12, 31, 4, 0, 0, 0, loc): time.Date(2027, 1, 1, 3, 0, 0, 0, loc),
	}
	for in, want := range cases {
		if got := auth.NextNightly(in); !got.Equal(want) {
			t.Errorf("NextNightly(%v) = %v, want %v", in, got, want)
		}
	}
}

// The prune removes expired throttle rows, codes and sessions, and nothing live. A session ends
// at its idle expiry or at its cap, and its expiry never passes its cap (creating and refreshing
// a session clamp it), so a session at its cap has both passed.
func TestPruneExpired_OnlyExpiredRows(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		now := e.Clock.Now()
		user := models.User{ID: uuid.NewString(), Email: "a@example.com", CreatedAt: now, UpdatedAt: now}
		e.DB.Create(&user)
		rows := []any{
			&models.AuthThrottle{Key: "send:old", Count: 5, ResetAt: now.Add(-time.Second), UpdatedAt: now},
			&models.AuthThrottle{Key: "send:live", Count: 5, ResetAt: now.Add(time.Minute), UpdatedAt: now},
			&models.Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: "old@x.io", Email: "old@x.io", CodeHash: "h", ExpiresAt: now.Add(-time.Second), CreatedAt: now},
			&models.Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: "live@x.io", Email: "live@x.io", CodeHash: "h", ExpiresAt: now.Add(time.Minute), CreatedAt: now},
			&models.Session{ID: uuid.NewString(), Token: "idle", UserID: user.ID, ExpiresAt: now.Add(-time.Second), AbsoluteExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now},
			&models.Session{ID: uuid.NewString(), Token: "capped", UserID: user.ID, ExpiresAt: now.Add(-time.Second), AbsoluteExpiresAt: now.Add(-time.Second), CreatedAt: now, UpdatedAt: now},
			&models.Session{ID: uuid.NewString(), Token: "live", UserID: user.ID, ExpiresAt: now.Add(time.Hour), AbsoluteExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now},
		}
		for _, r := range rows {
			if err := e.DB.Create(r).Error; err != nil {
				t.Fatal(err)
			}
		}
		res, err := e.Auth.PruneExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// One statement for each table, each deleting less than a batch.
		if res != (auth.PruneResult{Throttles: 1, Verifications: 1, Sessions: 2, Statements: 4}) {
			t.Fatalf("pruned %+v", res)
		}
		for model, key := range map[any]string{&models.AuthThrottle{}: "send:live", &models.Session{}: "live"} {
			col := "key"
			if _, ok := model.(*models.Session); ok {
				col = "token"
			}
			if n := e.Count(model); n != 1 || e.Count(model, col+" = ?", key) != 1 {
				t.Fatalf("%T: %d rows left, want only %s", model, n, key)
			}
		}
		if n := e.Count(&models.Verification{}, "subject = ?", "live@x.io"); n != 1 || e.Count(&models.Verification{}) != 1 {
			t.Fatal("the live code was pruned or the expired one kept")
		}
	})
}

// Two instances on one PostgreSQL database never run a scheduled job at once: while one holds
// it, the other skips.
func TestRunExclusive_OneInstanceAtATime(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		other := e
		if e.Dialect == apptest.Postgres {
			other = e.Sibling() // a second service on the same database
		}
		started, release := make(chan struct{}), make(chan struct{})
		e.Auth.SetJobStarted(func(string) {
			close(started)
			<-release
		})
		job := e.Auth.PruneJob()
		var wg sync.WaitGroup
		var firstRan bool
		var firstErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			firstRan, firstErr = e.Auth.RunExclusive(context.Background(), job)
		}()
		<-started
		ran, err := other.Auth.RunExclusive(context.Background(), other.Auth.PruneJob())
		if err != nil || ran {
			t.Fatalf("second run while the first holds the lock: ran=%v err=%v", ran, err)
		}
		close(release)
		wg.Wait()
		if !firstRan || firstErr != nil {
			t.Fatalf("first run: ran=%v err=%v", firstRan, firstErr)
		}
		// Once released, the job can run again, and no advisory lock is left behind.
		e.Auth.SetJobStarted(nil)
		if ran, err := other.Auth.RunExclusive(context.Background(), other.Auth.PruneJob()); !ran || err != nil {
			t.Fatalf("run after release: ran=%v err=%v", ran, err)
		}
		if e.Dialect == apptest.Postgres {
			var held int64
			e.DB.Raw("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext(?)::oid AND granted",
				"codeauth job "+auth.JobPruneThrottle).Scan(&held)
			if held != 0 {
				t.Fatalf("%d advisory locks still held after the job", held)
			}
		}
	})
}

// A job that panics is an error of that job, not a crash of the server, and releases its lock.
func TestRunExclusive_PanicIsAnError(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		boom := auth.Job{Name: "boom", Run: func(context.Context) error { panic("boom") }}
		if ran, err := e.Auth.RunExclusive(context.Background(), boom); !ran || err == nil {
			t.Fatalf("panicking job: ran=%v err=%v", ran, err)
		}
		if ran, err := e.Auth.RunExclusive(context.Background(), auth.Job{Name: "boom", Run: func(context.Context) error { return nil }}); !ran || err != nil {
			t.Fatalf("the lock was not released: ran=%v err=%v", ran, err)
		}
	})
}

// signedIn signs email in and returns the client and its session as the service sees it.
func signedIn(t *testing.T, e *apptest.Env, email string) (apptest.Session, *auth.SessionState) {
	t.Helper()
	s := e.SignIn(email)
	st, err := e.Auth.Session(context.Background(), auth.SessionQuery{Token: s.Token, FromDatabase: true})
	if err != nil || st == nil {
		t.Fatalf("session: %v", err)
	}
	return s, st
}

// An account picked by the purge but restored before its transaction (by a sign-in or a restore
// link) is left alone: the purge checks again under the row lock.
func TestPurge_RechecksUnderTheLock(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		s, st := signedIn(t, e, "alice@example.com")
		if _, err := e.Auth.DeleteAccount(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(auth.DefaultDeletionGrace + time.Hour)
		cutoff := e.Clock.Now().Add(-auth.DefaultDeletionGrace)
		// Picked, then restored before the purge's transaction.
		e.DB.Unscoped().Model(&models.User{}).Where("id = ?", s.UserID).Update("deleted_at", nil)
		if n, err := e.Auth.PurgeUsersForTest(context.Background(), []string{s.UserID}, cutoff); err != nil || n != 0 {
			t.Fatalf("purged %d, %v; want 0", n, err)
		}
		if n := e.Count(&models.User{}, "id = ?", s.UserID); n != 1 {
			t.Fatal("a restored account was purged")
		}
		// Still deleted: purged.
		e.DB.Unscoped().Model(&models.User{}).Where("id = ?", s.UserID).Update("deleted_at", cutoff.Add(-time.Minute))
		if n, err := e.Auth.PurgeUsersForTest(context.Background(), []string{s.UserID}, cutoff); err != nil || n != 1 {
			t.Fatalf("purged %d, %v; want 1", n, err)
		}
	})
}

// A deletion from a session that has ended since the request was authenticated (a restore link
// used meanwhile ends every session) changes nothing.
func TestDeleteAccount_RechecksTheSession(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		s, st := signedIn(t, e, "alice@example.com")
		if err := e.Auth.SignOut(context.Background(), s.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Auth.DeleteAccount(context.Background(), st); !errors.Is(err, auth.ErrUserNotFound) {
			t.Fatalf("delete from an ended session: %v", err)
		}
		if n := e.Count(&models.User{}, "id = ? AND deleted_at IS NULL", s.UserID); n != 1 {
			t.Fatal("the account was deleted")
		}
	})
}
