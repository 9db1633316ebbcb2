package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"

	"github.com/google/uuid"
)

// The prune removes expired throttle rows, codes and sessions, and nothing live. A session ends
// at its idle expiry or at its cap, and its expiry never passes its cap (creating and refreshing
// a session clamp it), so a session at its cap has both passed.
func TestPruneExpired_OnlyExpiredRows(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
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
		if res != (auth.PruneResult{Throttles: 1, Verifications: 1, Sessions: 2, Statements: 6}) {
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

// signedIn signs email in and returns the client and its session as the service sees it.
func signedIn(t *testing.T, e *testkit.Env, email string) (testkit.Session, *auth.SessionState) {
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
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
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
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
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
