package auth_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"codeauth/auth"
	"codeauth/internal/apptest"
)

// Session checks that reach the database at the same moment share queries on PostgreSQL. Each
// must still get its own session: many concurrent reads of different tokens, the same token more
// than once, and tokens that match nothing, all answered right. On PostgreSQL the test also sees
// that reads did share queries, so it exercises the batches and not one query per read.
func TestConcurrentSessionReadsGetTheirOwnSession(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		const users, readsEach = 12, 25
		emails := make([]string, users)
		tokens := make([]string, users)
		for i := range users {
			emails[i] = fmt.Sprintf("reader-%d@example.com", i)
			tokens[i] = e.SignIn(emails[i]).Token
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
					token, want := unknown, ""
					switch {
					case i < users:
						token, want = tokens[i], emails[i]
					case i == users:
						token = signedOut
					}
					st, err := e.Auth.Session(context.Background(), auth.SessionQuery{Token: token, FromDatabase: true, NoRefresh: true})
					got := ""
					if st != nil {
						got = st.User.Email
						if st.Token != token || st.Session.UserID != st.User.ID {
							got = "mismatched: " + got
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
		case apptest.Postgres:
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
// running: a read never joins a query that began before it arrived (catalogue #75, ASVS 5.0
// 7.4.1: a signed-out bearer token is refused at once).
func TestSignOutHoldsWhileReadsShareQueries(t *testing.T) {
	apptest.ForEachDB(t, func(t *testing.T, e *apptest.Env) {
		busy := e.SignIn("busy@example.com").Token
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 8 {
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
		defer func() { stop(); wg.Wait() }()
		for i := range 15 {
			token := e.SignIn(fmt.Sprintf("leaving-%d@example.com", i)).Token
			q := auth.SessionQuery{Token: token, FromDatabase: true, NoRefresh: true}
			if st, err := e.Auth.Session(ctx, q); err != nil || st == nil {
				t.Fatalf("sign-in %d: no session before the sign-out: %v", i, err)
			}
			if err := e.Auth.SignOut(ctx, token); err != nil {
				t.Fatal(err)
			}
			if st, err := e.Auth.Session(ctx, q); err != nil || st != nil {
				t.Fatalf("sign-in %d: session still read after the sign-out (%v)", i, err)
			}
		}
	})
}
