package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"codeauth/auth"
	"codeauth/internal/testkit"
)

// Stats counts each session check that went to the database as a read, live session or not,
// and the store's queries that answered them: one each on SQLite, fewer under concurrency on
// PostgreSQL, where reads share queries. A check the cookie cache answers is no read.
func TestStatsCountSessionReadsAndQueries(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("counted@example.com")
		signedOut := e.SignIn("gone@example.com").Token
		if err := e.Auth.SignOut(context.Background(), signedOut); err != nil {
			t.Fatal(err)
		}
		unknown := strings.Repeat("A", len(signedOut))
		const each = 40
		before := e.Auth.Stats()
		var wg sync.WaitGroup
		for i := range 3 * each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				token := []string{s.Token, signedOut, unknown}[i%3]
				st, err := e.Auth.Session(context.Background(), auth.SessionQuery{Token: token, FromDatabase: true, NoRefresh: true})
				if err != nil || (st != nil) != (token == s.Token) {
					t.Errorf("check of token %d: %v, %v", i%3, st, err)
				}
			}()
		}
		wg.Wait()
		if st, err := e.Auth.Session(context.Background(), auth.SessionQuery{Token: s.Token, Cache: []byte(s.DataCookie.Value)}); err != nil || st == nil || !st.Cached {
			t.Fatalf("a check the cookie cache answers: %+v, %v", st, err)
		}
		after := e.Auth.Stats()
		reads, queries := after.SessionReads-before.SessionReads, after.SessionQueries-before.SessionQueries
		if reads != 3*each {
			t.Fatalf("%d session reads counted, want %d", reads, 3*each)
		}
		if e.Dialect == testkit.Postgres {
			if queries < 1 || queries > reads {
				t.Fatalf("%d reads took %d queries", reads, queries)
			}
		} else if queries != reads {
			t.Fatalf("%d reads took %d queries on SQLite, want one each", reads, queries)
		}
	})
}
