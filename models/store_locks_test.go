package models

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"testing"
	"time"

	"codeauth/internal/testdb"
)

// A job's lock is held in an open transaction for as long as the job runs; it must not hold back
// PostgreSQL's cleanup of dead rows meanwhile (its backend has no xmin), or a long prune bloats
// every busy table under it. (Issue 19 #2: a first prune of a million accounts' backlog let the
// outbox's dead rows pile up until each delivery's claim read thousands of them.)
func TestTryLockHoldsBackNoCleanup(t *testing.T) {
	s := openTestStore(t, Options{DatabaseURL: testPostgresURL(t)})
	ctx := context.Background()
	release, ok, err := s.TryLock(ctx, "test:xmin")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	defer release()
	var holders int
	var xmin sql.NullString
	if err := s.db.Raw(`SELECT count(*), max(a.backend_xmin::text) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.classid = hashtext(current_schema())::oid AND l.objid = hashtext(?)::oid`,
		"test:xmin").Row().Scan(&holders, &xmin); err != nil {
		t.Fatal(err)
	}
	if holders != 1 {
		t.Fatalf("%d backends hold the lock", holders)
	}
	if xmin.Valid {
		t.Errorf("the lock's backend holds back cleanup from xmin %s", xmin.String)
	}
}

// A server that ends transactions left idle (idle_in_transaction_session_timeout) does not end a
// job's lock while the job runs: another instance would take it and run the job a second time.
func TestTryLockOutlivesTheIdleTimeout(t *testing.T) {
	// The timeout is set for this test's connections only: as a startup parameter, or behind
	// PgBouncer (which passes on no such parameter) on the role the test has there to itself.
	u, err := url.Parse(testPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TEST_DATABASE_POOLER") == "transaction" {
		if err := testdb.Admin(t).Exec("ALTER ROLE " + u.User.Username() + " SET idle_in_transaction_session_timeout = 100").Error; err != nil {
			t.Fatal(err)
		}
	} else {
		q := u.Query()
		q.Set("idle_in_transaction_session_timeout", "100")
		u.RawQuery = q.Encode()
	}
	s := openTestStore(t, Options{DatabaseURL: u.String()})
	ctx := context.Background()
	var timeout string
	if err := s.db.Raw("SHOW idle_in_transaction_session_timeout").Row().Scan(&timeout); err != nil || timeout != "100ms" {
		t.Fatalf("the test's connections have idle_in_transaction_session_timeout %q (%v)", timeout, err)
	}
	release, ok, err := s.TryLock(ctx, "test:idle")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok, err := openTestStore(t, Options{DatabaseURL: u.String()}).TryLock(ctx, "test:idle"); err != nil || ok {
		t.Errorf("after the idle timeout another store got the lock: %v, %v", ok, err)
	}
	if err := release(); err != nil {
		t.Errorf("release after the idle timeout: %v", err)
	}
}
