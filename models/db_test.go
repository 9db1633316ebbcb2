package models

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Migrating a database made by an earlier version replaces the outbox's full due-message index
// with the partial one, and migrating again changes nothing. The partial index's condition is
// the one the outbox's statements write (pendingSQL), or PostgreSQL would not use it.
func TestMigrateReplacesTheOutboxIndex(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE INDEX idx_outbox_due ON outbox (status, next_attempt_at)").Error; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		m := db.Migrator()
		if m.HasIndex(&OutboxMessage{}, "idx_outbox_due") || !m.HasIndex(&OutboxMessage{}, "idx_outbox_pending") {
			t.Fatal("the outbox indexes were not migrated")
		}
	}
	var ddl string
	db.Raw("SELECT sql FROM sqlite_master WHERE name = 'idx_outbox_pending'").Scan(&ddl)
	if want := "WHERE " + pendingSQL; len(ddl) < len(want) || ddl[len(ddl)-len(want):] != want {
		t.Fatalf("the pending index is %q, want a partial index %s", ddl, want)
	}
}

// Migrating a database made before accounts had a language adds the column, its accounts without
// one (""), on both databases.
func TestMigrateAddsTheAccountsLanguage(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		if err := s.db.Migrator().DropColumn(&User{}, "locale"); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Exec("INSERT INTO users (id, email, name, email_verified, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
			"00000000-0000-4000-8000-000000000001", "old@x.io", "", true, "2026-01-01 00:00:00", "2026-01-01 00:00:00").Error; err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := Migrate(ctx, s.db); err != nil {
				t.Fatal(err)
			}
		}
		u, err := s.User(ctx, "00000000-0000-4000-8000-000000000001")
		if err != nil || u.Locale != "" {
			t.Fatalf("the old account: %+v, %v", u, err)
		}
	})
}

// The embedded database is the file at its path, whatever the folder's name holds: a '#' or a
// '?' (a test's subfolder "sqlite#01", a DATA_DIR such as "/srv/app#2") ended the file's name in
// SQLite's URI, and every such folder wrote one shared file beside it, "/srv/app".
func TestOpen_SQLitePathWithURICharacters(t *testing.T) {
	ctx := context.Background()
	for _, folder := range []string{"data#01", "data?x=1", "data%20", "a b#c?d%e"} {
		dir := filepath.Join(t.TempDir(), folder)
		path := filepath.Join(dir, "auth.db")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		db, err := Open(ctx, Options{SQLitePath: path})
		if err != nil {
			t.Fatalf("%q: %v", folder, err)
		}
		if err := db.Exec("CREATE TABLE probe (x int)").Error; err != nil {
			t.Fatal(err)
		}
		var file string
		db.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file)
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
		if file != path {
			t.Fatalf("%q: the database is %q, want %q", folder, file, path)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%q: no file at the path: %v", folder, err)
		}
	}
}
