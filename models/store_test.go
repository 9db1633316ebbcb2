package models_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"codeauth/internal/apptest"
	"codeauth/models"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// The store conformance suite: every case runs the same on the embedded SQLite database and on
// PostgreSQL (TEST_DATABASE_URL; skipped without it, failed under CI=true), so a statement that
// behaves differently on one of them is caught here rather than in a rule of auth or mail.

// forEachStore runs fn on a store over a fresh, migrated database of each kind; db is that
// database, for what a case writes or checks around the store.
func forEachStore(t *testing.T, fn func(t *testing.T, st *models.Store, db *gorm.DB)) {
	for _, dialect := range []string{apptest.SQLite, apptest.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			st, db := openStore(t, dialect)
			fn(t, st, db)
		})
	}
}

// openStore returns a store over a fresh, migrated database of dialect, closed when the test ends.
func openStore(t *testing.T, dialect string) (*models.Store, *gorm.DB) {
	t.Helper()
	opts := models.Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")}
	if dialect == apptest.Postgres {
		opts = models.Options{DatabaseURL: apptest.PostgresURL(t)}
	}
	db := open(t, opts)
	if err := models.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	st, err := models.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	return st, db
}

// now is a time as the callers of the store hand it: UTC at the microsecond.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newHash is a random token hash, shaped as auth's (64 hex digits).
func newHash() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// addUser writes an account of email straight to the database.
func addUser(t testing.TB, db *gorm.DB, email string) models.User {
	t.Helper()
	at := now().Add(-time.Hour)
	u := models.User{ID: uuid.NewString(), Email: email, Name: "Someone", EmailVerified: true, CreatedAt: at, UpdatedAt: at}
	if err := db.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

// addSession writes a live session of user straight to the database, its token hash new.
func addSession(t testing.TB, db *gorm.DB, user models.User) models.Session {
	t.Helper()
	at := now()
	s := models.Session{
		ID: uuid.NewString(), Token: newHash(), UserID: user.ID,
		ExpiresAt: at.Add(24 * time.Hour), AbsoluteExpiresAt: at.Add(48 * time.Hour),
		IPAddress: "192.0.2.1", UserAgent: "test", CreatedAt: at, UpdatedAt: at,
	}
	if err := db.Create(&s).Error; err != nil {
		t.Fatal(err)
	}
	return s
}
