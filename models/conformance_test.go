package models

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"codeauth/internal/testdb"
)

// The storage conformance suite: every case of the store runs, unchanged, on the embedded SQLite
// database and on PostgreSQL, so the dialect branches behind Store's methods answer alike. The
// cases live beside the methods they test (store_outbox_test.go …). This file opens the
// databases itself, with PostgreSQL schemas from internal/testdb: internal/testkit builds on
// models, so a test inside models cannot use it.

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

// testPostgresURL is a schema of the test's own in the TEST_DATABASE_URL database (testdb).
func testPostgresURL(t *testing.T) string { return testdb.PostgresURL(t) }
