package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

// Migrating a database made by an earlier version replaces the outbox's indexes with the
// partial ones of each queue's pending rows and of rows with a supersede key, and migrating again
// changes nothing.
func TestMigrateReplacesTheOutboxIndex(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	// The indexes of earlier versions: the due index over every status, the pending index over
	// both queues, the supersede index over every row.
	for _, ddl := range []string{
		"CREATE INDEX idx_outbox_due ON outbox (status, next_attempt_at)",
		"CREATE INDEX idx_outbox_pending ON outbox (next_attempt_at) WHERE " + pendingSQL,
		"CREATE INDEX idx_outbox_supersede ON outbox (supersede)",
	} {
		if err := db.Exec(ddl).Error; err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		m := db.Migrator()
		for _, old := range []string{"idx_outbox_due", "idx_outbox_pending", "idx_outbox_supersede"} {
			if m.HasIndex(&OutboxMessage{}, old) {
				t.Fatalf("the outbox index %s was not dropped", old)
			}
		}
	}
	// Each index's condition is the one the outbox's statements write, or PostgreSQL's generic
	// plans would not use it.
	for name, want := range map[string]string{
		"idx_outbox_due_email":     "WHERE " + pendingSQL + " AND " + emailQueueSQL,
		"idx_outbox_due_webhook":   "WHERE " + pendingSQL + " AND " + webhookQueueSQL,
		"idx_outbox_supersede_key": "WHERE supersede <> ''",
	} {
		var ddl string
		db.Raw("SELECT sql FROM sqlite_master WHERE name = ?", name).Scan(&ddl)
		if !strings.HasSuffix(ddl, want) {
			t.Fatalf("the index %s is %q, want a partial index %s", name, ddl, want)
		}
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

// A new embedded database, and its write-ahead log, are readable by their owner only, also in a
// data folder that already existed and others may read (security review: 0644 under umask 022).
func TestOpen_SQLiteFileIsTheOwnersOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "auth.db")
	db, err := Open(context.Background(), Options{SQLitePath: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE probe (x int)").Error; err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal"} {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: %v", filepath.Base(name), perm)
		}
	}
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}

// Migrating a database made by an earlier version, on both databases, replaces users' index of
// every deleted_at with the partial one, migrating again changes nothing, and the purge's read
// (deleted_at IS NOT NULL AND deleted_at <= cutoff) uses it.
func TestMigrateReplacesTheUsersDeletedIndex(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		m := s.db.Migrator()
		if err := m.DropIndex(&User{}, "idx_users_deleted"); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Exec("CREATE INDEX idx_users_deleted_at ON users (deleted_at)").Error; err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := Migrate(ctx, s.db); err != nil {
				t.Fatal(err)
			}
			if m.HasIndex(&User{}, "idx_users_deleted_at") || !m.HasIndex(&User{}, "idx_users_deleted") {
				t.Fatal("the users indexes were not migrated")
			}
		}
		var plan []string
		if s.postgres {
			if err := s.db.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
					return err
				}
				return tx.Raw("EXPLAIN SELECT id FROM users WHERE deleted_at IS NOT NULL AND deleted_at <= now() LIMIT 100").Scan(&plan).Error
			}); err != nil {
				t.Fatal(err)
			}
		} else {
			var rows []struct{ Detail string }
			if err := s.db.Raw("EXPLAIN QUERY PLAN SELECT id FROM users WHERE deleted_at IS NOT NULL AND deleted_at <= ? LIMIT 100", time.Now()).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				plan = append(plan, r.Detail)
			}
		}
		if !strings.Contains(strings.Join(plan, "\n"), "idx_users_deleted") {
			t.Fatalf("the purge's read does not use the partial index:\n%s", strings.Join(plan, "\n"))
		}
	})
}

// oldUsersIndex puts back on a migrated PostgreSQL database the index of every deleted_at that
// versions before idx_users_deleted made, with one account.
func oldUsersIndex(t *testing.T, s *Store) {
	t.Helper()
	if err := Migrate(context.Background(), s.db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP INDEX idx_users_deleted", "CREATE INDEX idx_users_deleted_at ON users (deleted_at)",
		"INSERT INTO users (id, email, name, email_verified, created_at, updated_at) VALUES ('00000000-0000-4000-8000-000000000001', 'a@x.io', '', true, now(), now())"} {
		if err := s.db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// An instance of the new version migrates while an old one serves: a transaction that read an
// account before the migration began and writes it after must go through, and so must the
// migration. With the old index dropped inside the migration's transaction (after creating its
// replacement, which locks the table against writes) the two deadlocked, and PostgreSQL aborted
// one of them: a failed request, or an instance that would not start.
func TestMigrate_IndexSwapDoesNotDeadlockWithAServingInstance(t *testing.T) {
	url := testPostgresURL(t)
	s := openTestStore(t, Options{DatabaseURL: url})
	ctx := context.Background()
	oldUsersIndex(t, s)
	app := openTestStore(t, Options{DatabaseURL: url}).db.Begin()
	if err := app.Exec("SELECT id FROM users WHERE id = '00000000-0000-4000-8000-000000000001'").Error; err != nil {
		t.Fatal(err)
	}
	migrator := openTestStore(t, Options{DatabaseURL: url})
	migrated := make(chan error, 1)
	go func() { migrated <- Migrate(ctx, migrator.db) }()
	time.Sleep(300 * time.Millisecond) // the migration has created the new index, or waits to
	appErr := app.Exec("UPDATE users SET name = 'x' WHERE id = '00000000-0000-4000-8000-000000000001'").Error
	if appErr != nil {
		app.Rollback()
	} else {
		appErr = app.Commit().Error
	}
	if err := <-migrated; err != nil || appErr != nil {
		t.Fatalf("migration: %v; the serving instance's transaction: %v", err, appErr)
	}
	if m := s.db.Migrator(); m.HasIndex(&User{}, "idx_users_deleted_at") || !m.HasIndex(&User{}, "idx_users_deleted") {
		t.Fatal("the users indexes were not migrated")
	}
}

// While the migration drops the old index, reads of users go on: a reader left open (a report, a
// pg_dump) makes the drop wait, and a drop that waits for the table's exclusive lock makes every
// later read, each request's session read among them, queue behind it.
func TestMigrate_IndexSwapDoesNotHoldUpReads(t *testing.T) {
	url := testPostgresURL(t)
	s := openTestStore(t, Options{DatabaseURL: url})
	ctx := context.Background()
	oldUsersIndex(t, s)
	reader := openTestStore(t, Options{DatabaseURL: url}).db.Begin()
	if err := reader.Exec("SELECT count(*) FROM users").Error; err != nil {
		t.Fatal(err)
	}
	migrator := openTestStore(t, Options{DatabaseURL: url})
	migrated := make(chan error, 1)
	go func() { migrated <- Migrate(ctx, migrator.db) }()
	// The read is made once the migration waits for a lock the reader holds (or has finished).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int64
		if err := s.db.Raw("SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&waiting).Error; err != nil {
			t.Fatal(err)
		}
		if waiting > 0 || len(migrated) > 0 || time.Now().After(deadline) {
			break
		}
	}
	request := openTestStore(t, Options{DatabaseURL: url})
	err := request.db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL statement_timeout = '1s'").Error; err != nil {
			return err
		}
		var n int64
		return tx.Raw("SELECT count(*) FROM users WHERE deleted_at IS NULL").Scan(&n).Error
	})
	reader.Rollback()
	if merr := <-migrated; merr != nil {
		t.Fatalf("migration: %v", merr)
	}
	if err != nil {
		t.Fatalf("a read of users while the migration dropped the old index: %v", err)
	}
}

// A connection attempt to a server that accepts it and never answers (stopped with SIGSTOP, a
// network dropping packets) gives up after ConnectTimeout, unless the URL sets its own bound:
// the start, and every request that needs a new connection, would otherwise wait for ever.
func TestPgxConfig_BoundsTheConnectionAttempt(t *testing.T) {
	for url, want := range map[string]time.Duration{
		"postgres://u@db.example/app?sslmode=disable":                   ConnectTimeout,
		"postgres://u@db.example/app?sslmode=disable&connect_timeout=3": 3 * time.Second,
		"host=db.example user=u dbname=app":                             ConnectTimeout,
	} {
		cfg, err := pgxConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ConnectTimeout != want {
			t.Errorf("%s: ConnectTimeout %v, want %v", url, cfg.ConnectTimeout, want)
		}
	}
}

// GORM's printf-style messages are logged without their verbs, with their errors as the
// record's "error", and nothing else of their arguments (which may be a query's values).
func TestGormMessage_KeepsErrorsOnly(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	msg, attrs := gormMessage("failed to initialize database, got error %v", []any{cause})
	if msg != "gorm: failed to initialize database, got error" || len(attrs) != 2 || attrs[0] != "error" || attrs[1] != cause {
		t.Fatalf("%q %v", msg, attrs)
	}
	msg, attrs = gormMessage("invalid value %v for %s", []any{"alice@example.com", "email"})
	if strings.Contains(msg, "%") || len(attrs) != 0 {
		t.Fatalf("%q %v: a value that is not an error was kept", msg, attrs)
	}
}
