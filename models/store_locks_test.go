package models

import (
	"context"
	"database/sql"
	"testing"
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
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = hashtext(current_schema())::oid AND l.objid = hashtext(?)::oid`,
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
