package models

import (
	"context"
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
