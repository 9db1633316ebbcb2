package models_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"codeauth/internal/apptest"
	"codeauth/models"

	"gorm.io/gorm"
)

// openEach runs fn on a fresh, migrated database of each kind.
func openEach(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	for _, dialect := range []string{apptest.SQLite, apptest.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			opts := models.Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite")}
			if dialect == apptest.Postgres {
				opts = models.Options{DatabaseURL: apptest.PostgresURL(t)}
			}
			ctx := context.Background()
			db, err := models.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if sqlDB, err := db.DB(); err == nil {
					sqlDB.Close()
				}
			})
			if err := models.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			fn(t, db)
		})
	}
}

func counter(key string) *models.AuthThrottle {
	return &models.AuthThrottle{Key: key, Count: 1, ResetAt: time.Now().UTC().Add(time.Hour), UpdatedAt: time.Now().UTC()}
}

func insert(row *models.AuthThrottle) func(*gorm.DB) *gorm.DB {
	return func(tx *gorm.DB) *gorm.DB { return tx.Create(row) }
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
				if err := models.Later(tx, insert(counter(k))); err != nil {
					return err
				}
			}
			// An ordinary GORM read sees what waited.
			sameKeys(t, keys(t, tx), "a", "b", "c")
			if err := models.Later(tx, func(tx *gorm.DB) *gorm.DB {
				return tx.Model(&models.AuthThrottle{}).Where("key = ?", "b").Update("count", 7)
			}); err != nil {
				return err
			}
			n, err := models.Now(tx, func(tx *gorm.DB) *gorm.DB {
				return tx.Where("key IN ?", []string{"a", "c", "x"}).Delete(&models.AuthThrottle{})
			})
			if err != nil || n != 2 {
				t.Errorf("Now deleted %d rows (%v), want 2", n, err)
			}
			return models.Later(tx, insert(counter("d")))
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
			if err := models.LaterScan(tx, &bumped, func(tx *gorm.DB) *gorm.DB {
				return tx.Raw("UPDATE auth_throttle SET count = count + 4 WHERE key = ? RETURNING key, count, reset_at, updated_at", "a")
			}); err != nil {
				return err
			}
			if err := models.LaterScan(tx, &none, func(tx *gorm.DB) *gorm.DB {
				return tx.Raw("SELECT key, count, reset_at, updated_at FROM auth_throttle WHERE key = ?", "missing")
			}); err != nil {
				return err
			}
			// NowScan sends what waits with its own query: both results are there when it returns.
			var seen []models.AuthThrottle
			if err := models.NowScan(tx, &seen, func(tx *gorm.DB) *gorm.DB {
				return tx.Raw("SELECT key, count, reset_at, updated_at FROM auth_throttle WHERE key = ?", "a")
			}); err != nil {
				return err
			}
			if len(bumped) != 1 || len(seen) != 1 || seen[0].Count != 5 {
				t.Errorf("after NowScan: scanned %+v and %+v, want the row a with count 5 in both", bumped, seen)
			}
			// The delete comes after the update in the order, so it sees the count of 5.
			n, err := models.Now(tx, func(tx *gorm.DB) *gorm.DB {
				return tx.Where("key = ? AND count = ?", "a", 5).Delete(&models.AuthThrottle{})
			})
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
			models.Later(tx, insert(counter("h1")))
			if err := models.LaterScan(tx, &dup, func(tx *gorm.DB) *gorm.DB {
				return tx.Raw("INSERT INTO auth_throttle (key, count, reset_at, updated_at) VALUES (?, 1, ?, ?) RETURNING key", "kept", time.Now().UTC(), time.Now().UTC())
			}); err != nil {
				return err
			}
			_, err := models.Now(tx, insert(counter("h2")))
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
			models.Later(tx, insert(counter("e1")))
			if _, err := models.Now(tx, insert(counter("e2"))); err != nil {
				return err
			}
			models.Later(tx, insert(counter("e3")))
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("err = %v, want the transaction's own error", err)
		}

		// A waiting statement that fails (a duplicate key) fails the commit and undoes the
		// statements before it.
		err = models.Transaction(ctx, db, func(tx *gorm.DB) error {
			models.Later(tx, insert(counter("f1")))
			return models.Later(tx, insert(counter("kept")))
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
				models.Now(tx, insert(counter("p1")))
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
			return models.Later(tx, insert(counter("only")))
		}); err != nil {
			t.Fatal(err)
		}
		sameKeys(t, keys(t, db), "only")
	})
}

// On PostgreSQL a statement handed to Later is not sent on its own: it goes with the next one
// that is read. An advisory lock shows, from another connection, when it was sent.
func TestPipelineHoldsStatementsBackOnPostgres(t *testing.T) {
	db, err := models.Open(context.Background(), models.Options{DatabaseURL: apptest.PostgresURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	const lock = 7426001
	held := func() bool {
		var n int64
		if err := db.Raw("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ? AND granted", lock).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	err = models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
		if err := models.Later(tx, func(tx *gorm.DB) *gorm.DB { return tx.Exec("SELECT pg_advisory_xact_lock(?)", lock) }); err != nil {
			return err
		}
		if held() {
			t.Error("the waiting statement was sent before anything read")
		}
		if _, err := models.Now(tx, func(tx *gorm.DB) *gorm.DB { return tx.Exec("SELECT 1") }); err != nil {
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
	db, err := models.Open(context.Background(), models.Options{DatabaseURL: apptest.PostgresURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	if err := models.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(counter("kept")).Error; err != nil {
		t.Fatal(err)
	}
	err = models.Transaction(context.Background(), db, func(tx *gorm.DB) error {
		models.Later(tx, insert(counter("g1")))
		_ = tx.Create(counter("kept")).Error // a duplicate, and its error ignored
		models.Later(tx, insert(counter("g2")))
		return nil
	})
	if err == nil {
		t.Fatal("a transaction with a failed statement reported a commit")
	}
	sameKeys(t, keys(t, db), "kept")
}
