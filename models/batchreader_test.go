package models

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A batch query that panics answers each of its reads with an error, never with "no session" and
// never by leaving them waiting, and the reader still starts a query for the next read. The
// reader here has no pool, so its query panics on the nil *sql.DB.
func TestBatchReaderAnswersAPanicWithAnError(t *testing.T) {
	var queries atomic.Int64
	r := &batchReader{queries: &queries}
	r.timeout.Store(int64(time.Second))
	for i := range 2 {
		done := make(chan error, 1)
		go func() {
			var sess Session
			var user User
			done <- r.read(context.Background(), "hash", &sess, &user)
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "the session query panicked") {
				t.Fatalf("read %d: %v; want the panic as an error", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("read %d: still waiting after its query panicked", i)
		}
	}
	// The query's goroutine wakes the reads before it gives its turn back, so the reader settles
	// a moment after the last read returns: wait for it (a reader stuck in flight would start no
	// query for the next read).
	settled := func() (inFlight, waiting, queued int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.inFlight, r.waiting, len(r.queue)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		inFlight, waiting, queued := settled()
		if inFlight == 0 && waiting == 0 && queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the panics: %d queries in flight, %d reads waiting, %d queued; want none", inFlight, waiting, queued)
		}
	}
}

// A read is answered once: the row goes into the request's own Session and User only while the
// request still waits, never after it stopped waiting (its context ended first), and a failure
// of the rest of the query does not take back a row already handed out.
func TestSessionReadIsAnsweredOnce(t *testing.T) {
	row := &Session{ID: "found"}
	owner := &User{Name: "owner"}

	var sess Session
	var user User
	abandoned := &sessionRead{sess: &sess, user: &user, done: make(chan struct{})}
	if !abandoned.state.CompareAndSwap(readWaiting, readAbandoned) {
		t.Fatal("a waiting read could not be abandoned")
	}
	if abandoned.deliver(row, owner) || sess.ID != "" || user.Name != "" {
		t.Fatalf("a row was written into an abandoned read's destination: %q %q", sess.ID, user.Name)
	}
	abandoned.fail(context.Canceled) // must not close done a second time, nor at all

	answered := &sessionRead{sess: &sess, user: &user, done: make(chan struct{})}
	if !answered.deliver(row, owner) || sess.ID != "found" || user.Name != "owner" || answered.err != nil {
		t.Fatalf("a waiting read was not answered: %q %q %v", sess.ID, user.Name, answered.err)
	}
	<-answered.done
	answered.fail(context.DeadlineExceeded)
	if answered.err != nil || answered.deliver(&Session{ID: "other"}, owner) || sess.ID != "found" {
		t.Fatalf("an answered read was answered again: %v %q", answered.err, sess.ID)
	}

	failed := &sessionRead{sess: &sess, user: &user, done: make(chan struct{})}
	failed.fail(context.DeadlineExceeded)
	<-failed.done
	if failed.err != context.DeadlineExceeded || failed.deliver(row, owner) {
		t.Fatalf("a failed read: %v, or answered after it", failed.err)
	}
}

// Reads answered by one query: a row found is written into its request's own Session and User
// even when the rest of the query then fails, a read of a row not yet found gets the failure, and
// a read whose context ends meanwhile returns at once and has nothing written into its Session
// after it returned, even when the query finds its row later (run with -race).
func TestBatchReaderAnswersEachReadOnce(t *testing.T) {
	var queries atomic.Int64
	r := &batchReader{queries: &queries}
	r.timeout.Store(int64(10 * time.Second))
	release, delivered, cancelled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	boom := errors.New("the connection broke")
	r.queryHook = func(ctx context.Context, hashes []string, found func(string, *Session, *User)) error {
		if len(hashes) == 1 && hashes[0] == "first" {
			<-release // holds the reader busy while the others queue behind it
			return nil
		}
		found("h1", &Session{ID: "one"}, &User{Name: "one"})
		close(delivered)
		<-cancelled
		found("h3", &Session{ID: "three"}, &User{Name: "three"}) // its request has gone
		return boom
	}
	type result struct {
		sess Session
		user User
		err  error
	}
	read := func(ctx context.Context, hash string) chan *result {
		out := make(chan *result, 1)
		go func() {
			res := &result{}
			res.err = r.read(ctx, hash, &res.sess, &res.user)
			out <- res // the same Session and User the query would write into
		}()
		return out
	}
	first := read(context.Background(), "first")
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.inFlight == 1 && len(r.queue) == 0 })
	ctx3, cancel3 := context.WithCancel(context.Background())
	one, two, three := read(context.Background(), "h1"), read(context.Background(), "h2"), read(ctx3, "h3")
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.waiting == 3 })
	close(release)
	if res := <-first; !errors.Is(res.err, sql.ErrNoRows) {
		t.Fatalf("a read of no session: %v", res.err)
	}
	<-delivered
	cancel3()
	res3 := <-three
	if !errors.Is(res3.err, context.Canceled) {
		t.Fatalf("a read whose context ended: %v", res3.err)
	}
	close(cancelled)
	if res := <-one; res.err != nil || res.sess.ID != "one" || res.user.Name != "one" {
		t.Fatalf("a read whose row was found before the query failed: %+v", res)
	}
	if res := <-two; !errors.Is(res.err, boom) {
		t.Fatalf("a read whose row was not found when the query failed: %v", res.err)
	}
	if res3.sess.ID != "" || res3.user.Name != "" {
		t.Fatalf("a row was written into an abandoned read: %+v", res3)
	}
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not come about within 10 s")
		}
	}
}
