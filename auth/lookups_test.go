package auth_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
)

// Session checks that reach the database at the same moment share queries on PostgreSQL. Each
// must still get its own session: many concurrent reads of different tokens, the same token more
// than once, and tokens that match nothing, all answered right. On PostgreSQL the test also sees
// that reads did share queries, so it exercises the batches and not one query per read.
func TestConcurrentSessionReadsGetTheirOwnSession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const users, readsEach = 12, 25
		emails := make([]string, users)
		tokens := make([]string, users)
		userIDs := make([]string, users)
		for i := range users {
			emails[i] = fmt.Sprintf("reader-%d@example.com", i)
			s := e.SignIn(emails[i])
			tokens[i], userIDs[i] = s.Token, s.UserID
		}
		signedOut := e.SignIn("gone@example.com").Token
		if err := e.Auth.SignOut(context.Background(), signedOut); err != nil {
			t.Fatal(err)
		}
		unknown := strings.Repeat("A", len(signedOut))

		before := e.Auth.Stats()
		start := make(chan struct{})
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for r := range readsEach {
			for i := range users + 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					token, want, wantID := unknown, "", ""
					switch {
					case i < users:
						token, want, wantID = tokens[i], emails[i], userIDs[i]
					case i == users:
						token = signedOut
					}
					st, err := e.Auth.Session(context.Background(), auth.SessionQuery{Token: token, FromDatabase: true, NoRefresh: true})
					got := ""
					if st != nil {
						got = st.User.Email
						if st.Session.UserID != wantID {
							got = "another account's session: " + got
						}
					}
					if err != nil || got != want {
						if wrong.Add(1) == 1 {
							t.Errorf("read %d of token %d: %q, %v; want %q", r, i, got, err, want)
						}
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		after := e.Auth.Stats()
		reads, queries := after.SessionReads-before.SessionReads, after.SessionQueries-before.SessionQueries
		if reads != users*readsEach+2*readsEach {
			t.Fatalf("%d session reads counted, want %d", reads, (users+2)*readsEach)
		}
		if wrong.Load() > 0 {
			t.Fatalf("%d of %d reads got a wrong answer", wrong.Load(), reads)
		}
		switch e.Dialect {
		case testkit.Postgres:
			if queries >= reads {
				t.Fatalf("%d reads took %d queries: none were shared", reads, queries)
			}
		default:
			if queries != reads {
				t.Fatalf("%d reads took %d queries on SQLite, want one each", reads, queries)
			}
		}
		t.Logf("%d reads, %d queries", reads, queries)
	})
}

// A sign-out holds for every check that starts after it, while other requests keep queries
// running and other checks of the same token are waiting or in flight: a read never joins a
// query that began before it arrived, nor takes the answer of one (catalogue #75, ASVS 5.0 7.4.1:
// a signed-out bearer token is refused at once).
func TestSignOutHoldsWhileReadsShareQueries(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		busy := e.SignIn("busy@example.com").Token
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if st, err := e.Auth.Session(ctx, auth.SessionQuery{Token: busy, FromDatabase: true, NoRefresh: true}); st == nil && ctx.Err() == nil {
						t.Errorf("the busy session vanished: %v", err)
						return
					}
				}
			}()
		}
		for i := range 10 {
			token := e.SignIn(fmt.Sprintf("leaving-%d@example.com", i)).Token
			q := auth.SessionQuery{Token: token, FromDatabase: true, NoRefresh: true}
			var out atomic.Bool
			var seen, after atomic.Int64
			readers, readersDone := context.WithCancel(ctx)
			var rg sync.WaitGroup
			for range 8 {
				rg.Add(1)
				go func() {
					defer rg.Done()
					for readers.Err() == nil {
						started := out.Load()
						st, err := e.Auth.Session(readers, q)
						if err != nil {
							if readers.Err() == nil {
								t.Errorf("sign-in %d: %v", i, err)
							}
							return
						}
						switch {
						case started && st != nil:
							t.Errorf("sign-in %d: a read that started after the sign-out saw the session", i)
							return
						case started:
							after.Add(1)
						case st != nil:
							seen.Add(1)
						}
					}
				}()
			}
			for seen.Load() == 0 && !t.Failed() {
				runtime.Gosched()
			}
			if err := e.Auth.SignOut(ctx, token); err != nil {
				t.Fatal(err)
			}
			out.Store(true)
			for after.Load() < 20 && !t.Failed() {
				runtime.Gosched()
			}
			readersDone()
			rg.Wait()
			if t.Failed() {
				return
			}
		}
	})
}

// On PostgreSQL a query that fails answers every read in it with the error, never with "no
// session"; a read that waits for the database stops waiting when its request's context ends,
// while the query it was part of goes on for the others; and when the database does not keep
// up, reads past SessionReadQueue fail at once instead of queueing without end.
func TestSessionReadsWhileTheDatabaseHangs(t *testing.T) {
	e := testkit.New(t, testkit.Postgres)
	s := e.SignIn("patient@example.com")
	q := auth.SessionQuery{Token: s.Token, FromDatabase: true, NoRefresh: true}
	sqlDB, err := e.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	lock := func() (release func()) {
		t.Helper()
		conn, err := sqlDB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		release = func() {
			once.Do(func() {
				conn.ExecContext(context.Background(), "ROLLBACK")
				conn.Close()
			})
		}
		t.Cleanup(release)
		if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		return release
	}
	// returns fails the test unless f returns within 30 s, well before the batch query's own
	// bound of a minute.
	returns := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still waiting for the locked table", what)
		}
	}

	// A query that fails (here: times out) answers its reads with its error.
	if !e.Auth.SetSessionReadTimeout(300 * time.Millisecond) {
		t.Fatal("the PostgreSQL session reader is not batched")
	}
	release := lock()
	returns("a read whose query times out", func() {
		st, err := e.Auth.Session(context.Background(), q)
		if st != nil || err == nil {
			t.Errorf("got %v, %v; want the query's error", st, err)
		}
	})
	release()
	e.Auth.SetSessionReadTimeout(time.Minute)

	release = lock()
	returns("a read whose context ends", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		st, err := e.Auth.Session(ctx, q)
		if st != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, %v; want the context's error", st, err)
		}
	})
	// Fill the line behind the hung queries: the reads past it are refused at once, while the
	// others wait.
	waiting, stopWaiting := context.WithCancel(context.Background())
	n := auth.SessionReadQueue + 8*64 + 64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Auth.Session(waiting, q)
			errs <- err
		}()
	}
	select {
	case err := <-errs:
		if !errors.Is(err, auth.ErrSessionReadsBusy) {
			t.Fatalf("with the line full, a read got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no read was refused with the line full")
	}
	stopWaiting()
	wg.Wait()
	release()
	returns("reads after the lock", func() {
		if st, err := e.Auth.Session(context.Background(), q); err != nil || st == nil {
			t.Errorf("after the lock: %v, %v", st, err)
		}
	})
}

// A hash that matches no live session is reported as none by the store's read itself, on both
// databases, not as a zero session that happens to look expired.
func TestSessionReaderNoRows(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("someone@example.com")
		if err := e.Auth.SignOut(context.Background(), s.Token); err != nil {
			t.Fatal(err)
		}
		for _, hash := range []string{strings.Repeat("0", 64), ""} {
			if _, _, found, err := e.Auth.ReadSession(context.Background(), hash); found || err != nil {
				t.Errorf("hash %q: found %v, %v; want none", hash, found, err)
			}
		}
	})
}
