package models_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"

	"gorm.io/gorm"
)

// openEach runs fn on a fresh, migrated database of each kind.
func openEach(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			opts := models.Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")}
			if dialect == testkit.Postgres {
				opts = models.Options{DatabaseURL: testkit.PostgresURL(t)}
			}
			db := open(t, opts)
			if err := models.Migrate(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			fn(t, db)
		})
	}
}

// open opens the database of opts, closed when the test ends.
func open(t *testing.T, opts models.Options) *gorm.DB {
	t.Helper()
	db, err := models.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

func counter(key string) *models.AuthThrottle {
	return &models.AuthThrottle{Key: key, Count: 1, ResetAt: time.Now().UTC().Add(time.Hour), UpdatedAt: time.Now().UTC()}
}

// insertCounter is the written-out insert of a counter named by its one argument.
const insertCounter = "INSERT INTO auth_throttle (key, count, reset_at, updated_at) VALUES (?, 1, ?, ?)"

// insert queues the insert of a counter with LaterInsert.
func insert(tx *gorm.DB, key string) error { return models.LaterInsert(tx, counter(key), "") }

// insertNow inserts a counter with Now.
func insertNow(tx *gorm.DB, key string) (int64, error) {
	now := time.Now().UTC()
	return models.Now(tx, insertCounter, key, now.Add(time.Hour), now)
}

func keys(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var out []string
	if err := db.Model(&models.AuthThrottle{}).Order("key").Pluck("key", &out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}

func sameKeys(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("rows %q, want %q", got, want)
		}
	}
}

// Statements handed to Later run in order, before any statement of the transaction that reads,
// and Now reports the rows its statement affected; everything commits together.
func TestPipelineRunsWaitingStatementsInOrder(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		err := models.Transaction(ctx, db, func(tx *gorm.DB) error {
			for _, k := range []string{"a", "b", "c"} {
				if err := insert(tx, k); err != nil {
					return err
				}
			}
			// An ordinary GORM read sees what waited.
			sameKeys(t, keys(t, tx), "a", "b", "c")
			if err := models.Later(tx, "UPDATE auth_throttle SET count = ? WHERE key = ?", 7, "b"); err != nil {
				return err
			}
			n, err := models.Now(tx, "DELETE FROM auth_throttle WHERE key IN (?, ?, ?)", "a", "c", "x")
			if err != nil || n != 2 {
				t.Errorf("Now deleted %d rows (%v), want 2", n, err)
			}
			return insert(tx, "d")
		})
		if err != nil {
			t.Fatal(err)
		}
		sameKeys(t, keys(t, db), "b", "d")
		var b models.AuthThrottle
		if err := db.Where("key = ?", "b").Take(&b).Error; err != nil || b.Count != 7 {
			t.Fatalf("b = %+v (%v), want the update that waited to have run", b, err)
		}
	})
}

// LaterScan reads the rows of a statement that returns them when it is sent with the statements
// after it: dest is filled once the transaction has talked to the database, and holds what the
// statement saw, in its place in the order. NowScan sends at once.
func TestPipelineScansRowsOfWaitingStatements(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		if err := db.Create(counter("a")).Error; err != nil {
			t.Fatal(err)
		}
		var bumped, none []models.AuthThrottle
		err := models.Transaction(ctx, db, func(tx *gorm.DB) error {
			if err := models.LaterScan(tx, &bumped, "UPDATE auth_throttle SET count = count + 4 WHERE key = ? RETURNING key, count, reset_at, updated_at", "a"); err != nil {
				return err
			}
			if err := models.LaterScan(tx, &none, "SELECT key, count, reset_at, updated_at FROM auth_throttle WHERE key = ?", "missing"); err != nil {
				return err
			}
			// NowScan sends what waits with its own query: both results are there when it returns.
			var seen []models.AuthThrottle
			if err := models.NowScan(tx, &seen, "SELECT key, count, reset_at, updated_at FROM auth_throttle WHERE key = ?", "a"); err != nil {
				return err
			}
			if len(bumped) != 1 || len(seen) != 1 || seen[0].Count != 5 {
				t.Errorf("after NowScan: scanned %+v and %+v, want the row a with count 5 in both", bumped, seen)
			}
			// The delete comes after the update in the order, so it sees the count of 5.
			n, err := models.Now(tx, "DELETE FROM auth_throttle WHERE key = ? AND count = ?", "a", 5)
			if err != nil || n != 1 {
				t.Errorf("Now deleted %d rows (%v), want the updated row", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(bumped) != 1 || bumped[0].Key != "a" || bumped[0].Count != 5 || bumped[0].ResetAt.IsZero() {
			t.Fatalf("scanned %+v, want the row a with count 5", bumped)
		}
		if len(none) != 0 {
			t.Fatalf("scanned %+v from a query that matched nothing", none)
		}
		sameKeys(t, keys(t, db))

		// A statement that fails while its rows are read fails the transaction.
		var dup []models.AuthThrottle
		if err := db.Create(counter("kept")).Error; err != nil {
			t.Fatal(err)
		}
		err = models.Transaction(ctx, db, func(tx *gorm.DB) error {
			insert(tx, "h1")
			if err := models.LaterScan(tx, &dup, insertCounter+" RETURNING key", "kept", time.Now().UTC(), time.Now().UTC()); err != nil {
				return err
			}
			_, err := insertNow(tx, "h2")
			return err
		})
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			t.Fatalf("err = %v, want gorm.ErrDuplicatedKey from the scanned insert", err)
		}
		sameKeys(t, keys(t, db), "kept")
	})
}

// A transaction that returns an error, fails in a waiting statement, or panics leaves nothing
// behind, and its connection goes back to the pool outside any transaction.
func TestPipelineRollsBackEverything(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		if err := db.Create(counter("kept")).Error; err != nil {
			t.Fatal(err)
		}
		refused := errors.New("refused")
		err := models.Transaction(ctx, db, func(tx *gorm.DB) error {
			insert(tx, "e1")
			if _, err := insertNow(tx, "e2"); err != nil {
				return err
			}
			insert(tx, "e3")
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("err = %v, want the transaction's own error", err)
		}

		// A waiting statement that fails (a duplicate key) fails the commit and undoes the
		// statements before it.
		err = models.Transaction(ctx, db, func(tx *gorm.DB) error {
			insert(tx, "f1")
			return insert(tx, "kept")
		})
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			t.Fatalf("err = %v, want gorm.ErrDuplicatedKey from the waiting insert", err)
		}

		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not come through")
				}
			}()
			models.Transaction(ctx, db, func(tx *gorm.DB) error {
				insertNow(tx, "p1")
				panic("boom")
			})
		}()
		sameKeys(t, keys(t, db), "kept")

		// Every pooled connection is usable and commits on its own: none was left in a
		// transaction or in a failed one.
		sqlDB, _ := db.DB()
		sqlDB.SetMaxOpenConns(1)
		if err := db.Create(counter("after")).Error; err != nil {
			t.Fatal(err)
		}
		sameKeys(t, keys(t, db), "after", "kept")
	})
}

// A transaction that did nothing sends nothing, and one that only waited commits.
func TestPipelineCommitsWhatWaited(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		if err := models.Transaction(ctx, db, func(tx *gorm.DB) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := models.Transaction(ctx, db, func(tx *gorm.DB) error {
			return insert(tx, "only")
		}); err != nil {
			t.Fatal(err)
		}
		sameKeys(t, keys(t, db), "only")
	})
}

// On PostgreSQL a statement handed to Later is not sent on its own: it goes with the next one
// that is read. An advisory lock shows, from another connection, when it was sent.
func TestPipelineHoldsStatementsBackOnPostgres(t *testing.T) {
	db := open(t, models.Options{DatabaseURL: testkit.PostgresURL(t)})
	const lock = 7426001
	held := func() bool {
		var n int64
		if err := db.Raw("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ? AND granted", lock).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	err := models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
		if err := models.Later(tx, "SELECT pg_advisory_xact_lock(?)", lock); err != nil {
			return err
		}
		if held() {
			t.Error("the waiting statement was sent before anything read")
		}
		if _, err := models.Now(tx, "SELECT 1"); err != nil {
			return err
		}
		if !held() {
			t.Error("Now did not send the statement waiting before it")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if held() {
		t.Error("the transaction's lock outlived its commit")
	}
}

// On PostgreSQL a statement that fails dooms its transaction. If fn goes on and returns nil
// anyway, the commit is refused, not reported as done.
func TestPipelineReportsADoomedCommit(t *testing.T) {
	db := open(t, models.Options{DatabaseURL: testkit.PostgresURL(t)})
	if err := models.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(counter("kept")).Error; err != nil {
		t.Fatal(err)
	}
	err := models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
		insert(tx, "g1")
		_ = tx.Create(counter("kept")).Error // a duplicate, and its error ignored
		insert(tx, "g2")
		return nil
	})
	if err == nil {
		t.Fatal("a transaction with a failed statement reported a commit")
	}
	sameKeys(t, keys(t, db), "kept")
}

// A written statement's ? placeholders become PostgreSQL's numbered ones. A ? inside quotes,
// which GORM would take for a placeholder and PostgreSQL for text, is refused.
func TestNumberedPlaceholders(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                                   "SELECT 1",
		"UPDATE t SET a = ?, b = ? WHERE c = ?":      "UPDATE t SET a = $1, b = $2 WHERE c = $3",
		"SELECT 'it''s', \"a b\" FROM t WHERE x = ?": "SELECT 'it''s', \"a b\" FROM t WHERE x = $1",
	} {
		if got, err := models.Numbered(in); got != want || err != nil {
			t.Errorf("%q became %q (%v), want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"SELECT '?' WHERE a = ?", "SELECT \"a?\" FROM t", "SELECT 'it''s ?'"} {
		if _, err := models.Numbered(in); err == nil {
			t.Errorf("%q was not refused", in)
		}
	}
}

// A list among a written statement's arguments is refused on both databases: SQLite would get it
// expanded for IN and PostgreSQL an array.
func TestWrittenStatementsRefuseLists(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		err := models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
			return models.Later(tx, "DELETE FROM auth_throttle WHERE key IN ?", []string{"a", "b"})
		})
		if err == nil || !strings.Contains(err.Error(), "list argument") {
			t.Fatalf("err = %v, want the list refused", err)
		}
		if _, err := models.Now(db, "DELETE FROM auth_throttle WHERE key = ?", []byte("a")); err != nil {
			t.Fatalf("a []byte is a value: %v", err)
		}
		if err := models.Later(db, "DELETE FROM auth_throttle WHERE key = ? AND count = ?", "a"); err == nil || !strings.Contains(err.Error(), "1 arguments for 2 placeholders") {
			t.Fatalf("an argument short: %v", err)
		}
	})
}

// LaterInsert writes every column of the model, nulls included, and its suffix applies.
func TestLaterInsertWritesEveryColumn(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		expires := now.Add(time.Hour)
		row := models.OutboxMessage{ID: "0d9e3d5a-8f0e-4f5e-9a63-0e7a9c1c2b11", Kind: "welcome", Recipient: "a@example.com",
			Supersede: "k", Payload: []byte{1, 2, 3}, Status: "pending", Attempts: 2, NextAttemptAt: now,
			ExpiresAt: &expires, LastError: "e", CreatedAt: now}
		err := models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
			if err := models.LaterInsert(tx, &row, ""); err != nil {
				return err
			}
			again := row
			again.Kind = "changed"
			return models.LaterInsert(tx, &again, " ON CONFLICT (id) DO NOTHING")
		})
		if err != nil {
			t.Fatal(err)
		}
		var got models.OutboxMessage
		if err := db.Take(&got).Error; err != nil {
			t.Fatal(err)
		}
		got.NextAttemptAt, got.CreatedAt = got.NextAttemptAt.UTC(), got.CreatedAt.UTC()
		if got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) || got.LockedUntil != nil || got.GivenUpAt != nil {
			t.Fatalf("times read back %+v", got)
		}
		got.ExpiresAt = row.ExpiresAt
		if !reflect.DeepEqual(got, row) {
			t.Fatalf("read back %+v, want %+v", got, row)
		}
	})
}

// Outside a pipelined transaction a written statement runs at once; inside a GORM transaction it
// joins it, and is undone with it.
func TestWrittenStatementsOutsidePipelines(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		if n, err := insertNow(db, "alone"); err != nil || n != 1 {
			t.Fatalf("alone: %d rows, %v", n, err)
		}
		var got []models.AuthThrottle
		if err := models.NowScan(db, &got, "SELECT key, count, reset_at, updated_at FROM auth_throttle WHERE key = ?", "alone"); err != nil || len(got) != 1 {
			t.Fatalf("read back %+v, %v", got, err)
		}
		if _, err := insertNow(db, "alone"); !errors.Is(err, gorm.ErrDuplicatedKey) {
			t.Fatalf("a duplicate: %v, want gorm.ErrDuplicatedKey", err)
		}
		undone := errors.New("undone")
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := insert(tx, "joined"); err != nil {
				return err
			}
			sameKeys(t, keys(t, tx), "alone", "joined")
			return undone
		})
		if !errors.Is(err, undone) {
			t.Fatal(err)
		}
		sameKeys(t, keys(t, db), "alone")
	})
}

// Round trips of pipelined statements, and written statements sent alone, are reported when slow,
// as GORM's own statements are: the logger sees them, without their arguments.
func TestPipelineReportsSlowRoundTrips(t *testing.T) {
	var logs strings.Builder
	db := open(t, models.Options{DatabaseURL: testkit.PostgresURL(t),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
		_, err := models.Now(tx, "SELECT pg_sleep(0.6) WHERE ? <> ''", "secret-argument")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "slow query"); n != 1 {
		t.Fatalf("%d slow-query reports, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "secret-argument") {
		t.Fatalf("an argument was logged:\n%s", logs.String())
	}
}

// LaterInsert writes fields as they are, so it refuses what GORM's Create would have filled in.
func TestLaterInsertRefusesWhatCreateWouldFill(t *testing.T) {
	openEach(t, func(t *testing.T, db *gorm.DB) {
		unset := models.AuthThrottle{Key: "k", Count: 1, ResetAt: time.Now().UTC()} // no UpdatedAt
		if err := models.LaterInsert(db, &unset, ""); err == nil || !strings.Contains(err.Error(), "UpdatedAt is not set") {
			t.Fatalf("a zero update time: %v", err)
		}
		type withDefault struct {
			ID   string `gorm:"primaryKey"`
			Kind string `gorm:"default:plain"`
		}
		if err := models.LaterInsert(db, &withDefault{ID: "a"}, ""); err == nil || !strings.Contains(err.Error(), "default") {
			t.Fatalf("a field with a default: %v", err)
		}
		sameKeys(t, keys(t, db))
	})
}

// holdInPool leaves db's pool holding n connections, each handed out within the last second:
// pgx pings a connection it hands out again after more than a second (or for the first time),
// which would find it dead before the service does, and a busy service's connections are handed
// out more often than that. It returns the connections' backends.
func holdInPool(t *testing.T, db *gorm.DB, n int) map[int]bool {
	t.Helper()
	ctx := context.Background()
	sqlDB, _ := db.DB()
	sqlDB.SetMaxIdleConns(0) // a fresh start: no connection left over from an earlier call
	sqlDB.SetMaxIdleConns(n)
	take := func() []*sql.Conn {
		conns := make([]*sql.Conn, 0, n)
		for range n {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		return conns
	}
	for _, c := range take() {
		c.Close()
	}
	pids := map[int]bool{}
	for _, c := range take() {
		var pid int
		if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
		c.Close()
	}
	return pids
}

// killIdle ends from the server's side, as a restart or a failover does, the backends of the n
// connections it leaves db's pool holding, waits until they have exited, and reports how many it
// ended.
func killIdle(t *testing.T, db *gorm.DB, n int) int {
	t.Helper()
	pids := holdInPool(t, db, n)
	for pid := range pids {
		terminateAndWait(t, pid)
	}
	return len(pids)
}

// terminateAndWait ends the backend pid and waits until it has exited.
func terminateAndWait(t *testing.T, pid int) {
	t.Helper()
	var gone bool
	if err := testkit.Admin(t).Raw("SELECT pg_terminate_backend(?, 10000)", pid).Scan(&gone).Error; err != nil || !gone {
		t.Fatalf("ending backend %d: %v (exited: %v)", pid, err, gone)
	}
}

// Catalogue R1: after a restart or a failover every pooled connection is dead, and the service
// learns it only by using one. A transaction, or a statement on its own, that finds its
// connection dead before anything was answered goes again on another, whatever it began with,
// so no request fails for it.
func TestPipelineGoesAgainOnAConnectionFoundDead(t *testing.T) {
	db := open(t, models.Options{DatabaseURL: testkit.PostgresURL(t)})
	ctx := context.Background()
	if err := models.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	writes := map[string]func(key string) error{
		"waiting": func(key string) error { // BEGIN, the insert and COMMIT in one round trip
			return models.Transaction(ctx, db, func(tx *gorm.DB) error { return insert(tx, key) })
		},
		"read": func(key string) error { // BEGIN and the insert, then COMMIT
			return models.Transaction(ctx, db, func(tx *gorm.DB) error {
				_, err := insertNow(tx, key)
				return err
			})
		},
		"gorm": func(key string) error { // BEGIN alone, then GORM's own statement
			return models.Transaction(ctx, db, func(tx *gorm.DB) error { return tx.Create(counter(key)).Error })
		},
		"alone": func(key string) error { // one autocommitted statement
			_, err := insertNow(db.WithContext(ctx), key)
			return err
		},
	}
	// Behind PgBouncer (transaction pooling) the service's four connections share the pooler's
	// connections to the server, one here: its end is the pooler's to handle, and the writes
	// must still succeed.
	want := 4
	if os.Getenv("TEST_DATABASE_POOLER") == "transaction" {
		want = 1
	}
	for key, write := range writes {
		if n := killIdle(t, db, 4); n < want {
			t.Fatalf("%d connections ended, want %d", n, want)
		}
		if err := write(key); err != nil {
			t.Fatalf("%s: the first write after a restart: %v", key, err)
		}
	}
	sameKeys(t, keys(t, db), "alone", "gorm", "read", "waiting")
}

// Catalogue R1, B19's guarantee kept: a connection that dies after its transaction was first
// answered is not replaced, since what ran on it went with it; the transaction fails as
// unavailable and leaves nothing.
func TestPipelineDoesNotGoAgainAfterAnAnswer(t *testing.T) {
	db := open(t, models.Options{DatabaseURL: testkit.PostgresURL(t)})
	ctx := context.Background()
	if err := models.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	err := models.Transaction(ctx, db, func(tx *gorm.DB) error {
		if _, err := insertNow(tx, "first"); err != nil {
			return err
		}
		var backend []struct{ Pid int }
		if err := models.NowScan(tx, &backend, "SELECT pg_backend_pid() AS pid"); err != nil {
			return err
		}
		terminateAndWait(t, backend[0].Pid)
		return insert(tx, "second")
	})
	if err == nil || !models.Unavailable(err) {
		t.Fatalf("a transaction whose connection died after an answer: %v, want unavailable", err)
	}
	sameKeys(t, keys(t, db))
}

// Catalogue R1: a crash of another backend (or an immediate shutdown) ends every session with a
// WARNING, at any point, a commit included, then closes the connection. A write that met such a
// connection goes again when pgx was still preparing its statements (nothing ran), as on every
// connection that had not run them before; otherwise a transaction that held its COMMIT stays
// "commit unknown", since the crash may have come after the commit.
func TestPipelineGoesAgainAfterACrashWhenNothingRan(t *testing.T) {
	cluster := testkit.NewCluster(t)
	db := open(t, models.Options{DatabaseURL: cluster.URL()})
	ctx := context.Background()
	if err := models.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("pgx", cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writes := map[string]func(key string) error{
		"waiting": func(key string) error { // BEGIN, the insert and COMMIT in one round trip
			return models.Transaction(ctx, db, func(tx *gorm.DB) error { return insert(tx, key) })
		},
		"alone": func(key string) error { // one autocommitted statement
			_, err := insertNow(db.WithContext(ctx), key)
			return err
		},
	}
	for key, write := range writes {
		holdInPool(t, db, 4)
		var pid int
		if err := other.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // the postmaster ends every session and recovers
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); other.PingContext(ctx) != nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the server did not recover from the crash")
			}
		}
		if err := write(key); err != nil {
			t.Fatalf("%s: the first write after a crash: %v (commit unknown: %v)", key, err, errors.Is(err, models.ErrCommitUnknown))
		}
	}
	sameKeys(t, keys(t, db), "alone", "waiting")
}
