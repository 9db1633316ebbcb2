package models

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The storage conformance suite: every case of the store runs, unchanged, on the embedded SQLite
// database and on PostgreSQL, so the dialect branches behind Store's methods answer alike. The
// cases live beside the methods they test (store_outbox_test.go …). This file opens the
// databases itself: internal/apptest builds on models, so a test inside models cannot use it.

// forEachStore runs fn as a subtest on a fresh, migrated store of each database. another opens
// one more store on the same database: on PostgreSQL with a connection pool of its own, as
// another instance of the service has; SQLite serves one process, so there it is the same store.
func forEachStore(t *testing.T, fn func(t *testing.T, s *Store, another func() *Store)) {
	t.Helper()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			opts := Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")}
			if dialect == "postgres" {
				opts = Options{DatabaseURL: testPostgresURL(t)}
			}
			s := openTestStore(t, opts)
			if err := Migrate(context.Background(), s.db); err != nil {
				t.Fatal(err)
			}
			another := func() *Store {
				if opts.DatabaseURL == "" {
					return s
				}
				return openTestStore(t, opts)
			}
			fn(t, s, another)
		})
	}
}

// openTestStore opens the store of opts, closed when the test ends.
func openTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	db, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	s, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deadlock bounds the waits of the cases; it only fires when something is stuck.
const deadlock = 10 * time.Second

var (
	testAdminOnce sync.Once
	testAdmin     *gorm.DB
	testAdminErr  error
)

// testPostgresURL creates a schema of its own for one test in the TEST_DATABASE_URL database and
// returns a URL whose connections use it; the schema is dropped when the test ends. Without
// TEST_DATABASE_URL the test is skipped, or fails under CI=true, where every test runs on
// PostgreSQL too (as internal/apptest's PostgresURL does).
func testPostgresURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is not set: CI runs every test on PostgreSQL too (use scripts/test)")
		}
		t.Skip("TEST_DATABASE_URL is not set; run scripts/test to include PostgreSQL")
	}
	testAdminOnce.Do(func() {
		testAdmin, testAdminErr = gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	})
	if testAdminErr != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", testAdminErr)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	if err := testAdmin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() { testAdmin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
