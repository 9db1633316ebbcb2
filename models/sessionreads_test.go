package models

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// Session reads that reach the database at the same moment share queries on PostgreSQL. Each
// must still get its own session: many concurrent reads of different tokens, the same token more
// than once, and tokens that match nothing, all answered right. On PostgreSQL the test also sees
// that reads did share queries, so it exercises the batches and not one query per read.
func TestConcurrentSessionReadsGetTheirOwnSession(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		const users, readsEach = 12, 25
		emails := make([]string, users)
		hashes := make([]string, users)
		userIDs := make([]string, users)
		for i := range users {
			emails[i] = fmt.Sprintf("reader-%d@example.com", i)
			u := addUser(t, db, emails[i])
			hashes[i], userIDs[i] = addSession(t, db, u).Token, u.ID
		}
		signedOut := addSession(t, db, addUser(t, db, "gone@example.com")).Token
		if _, _, err := st.EndSession(context.Background(), signedOut); err != nil {
			t.Fatal(err)
		}
		unknown := strings.Repeat("A", len(signedOut))

		before := st.SessionQueries()
		start := make(chan struct{})
		var wg sync.WaitGroup
		var reads, wrong atomic.Int64
		for r := range readsEach {
			for i := range users + 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					hash, want, wantID := unknown, "", ""
					switch {
					case i < users:
						hash, want, wantID = hashes[i], emails[i], userIDs[i]
					case i == users:
						hash = signedOut
					}
					var sess Session
					var user User
					reads.Add(1)
					found, err := st.ReadSession(context.Background(), hash, &sess, &user)
					got := ""
					if found {
						got = user.Email
						if sess.UserID != wantID || user.ID != wantID {
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
		queries := st.SessionQueries() - before
		if n := reads.Load(); n != users*readsEach+2*readsEach {
			t.Fatalf("%d session reads made, want %d", n, (users+2)*readsEach)
		}
		if wrong.Load() > 0 {
			t.Fatalf("%d of %d reads got a wrong answer", wrong.Load(), reads.Load())
		}
		if st.postgres {
			if queries >= reads.Load() {
				t.Fatalf("%d reads took %d queries: none were shared", reads.Load(), queries)
			}
		} else if queries != reads.Load() {
			t.Fatalf("%d reads took %d queries on SQLite, want one each", reads.Load(), queries)
		}
		t.Logf("%d reads, %d queries", reads.Load(), queries)
	})
}

// A sign-out holds for every read that starts after it, while other requests keep queries
// running and other reads of the same token are waiting or in flight: a read never joins a
// query that began before it arrived, nor takes the answer of one (catalogue #75, ASVS 5.0 7.4.1:
// a signed-out bearer token is refused at once).
func TestSignOutHoldsWhileReadsShareQueries(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		busy := addSession(t, db, addUser(t, db, "busy@example.com")).Token
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		read := func(ctx context.Context, hash string) (bool, error) {
			var sess Session
			var user User
			return st.ReadSession(ctx, hash, &sess, &user)
		}
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if found, err := read(ctx, busy); !found && ctx.Err() == nil {
						t.Errorf("the busy session vanished: %v", err)
						return
					}
				}
			}()
		}
		for i := range 10 {
			hash := addSession(t, db, addUser(t, db, fmt.Sprintf("leaving-%d@example.com", i))).Token
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
						found, err := read(readers, hash)
						if err != nil {
							if readers.Err() == nil {
								t.Errorf("sign-in %d: %v", i, err)
							}
							return
						}
						switch {
						case started && found:
							t.Errorf("sign-in %d: a read that started after the sign-out saw the session", i)
							return
						case started:
							after.Add(1)
						case found:
							seen.Add(1)
						}
					}
				}()
			}
			for seen.Load() == 0 && !t.Failed() {
				runtime.Gosched()
			}
			if id, _, err := st.EndSession(ctx, hash); err != nil || id == "" {
				t.Fatalf("signing out: %q, %v", id, err)
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
// up, reads past sessionReadQueue fail at once, as the database's unavailability, instead of
// queueing without end.
func TestSessionReadsWhileTheDatabaseHangs(t *testing.T) {
	st := openTestStore(t, Options{DatabaseURL: testPostgresURL(t)})
	db := st.db
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	hash := addSession(t, db, addUser(t, db, "patient@example.com")).Token
	read := func(ctx context.Context) (bool, error) {
		var sess Session
		var user User
		return st.ReadSession(ctx, hash, &sess, &user)
	}
	sqlDB, err := db.DB()
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
	if !st.SetSessionReadTimeout(300 * time.Millisecond) {
		t.Fatal("the PostgreSQL session reader is not batched")
	}
	release := lock()
	returns("a read whose query times out", func() {
		found, err := read(context.Background())
		if found || err == nil {
			t.Errorf("got %v, %v; want the query's error", found, err)
		}
	})
	release()
	st.SetSessionReadTimeout(time.Minute)

	release = lock()
	returns("a read whose context ends", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		found, err := read(ctx)
		if found || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, %v; want the context's error", found, err)
		}
	})
	// Fill the line behind the hung queries: the reads past it are refused at once, while the
	// others wait.
	waiting, stopWaiting := context.WithCancel(context.Background())
	n := sessionReadQueue + sessionReadsInFlight*sessionReadBatch + sessionReadBatch
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := read(waiting)
			errs <- err
		}()
	}
	select {
	case err := <-errs:
		if !errors.Is(err, ErrSessionReadsBusy) || !Unavailable(err) {
			t.Fatalf("with the line full, a read got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no read was refused with the line full")
	}
	stopWaiting()
	wg.Wait()
	release()
	returns("reads after the lock", func() {
		if found, err := read(context.Background()); err != nil || !found {
			t.Errorf("after the lock: %v, %v", found, err)
		}
	})
}

// Every size of batch, 1 to sessionReadBatch hashes, gets the session of each of its hashes that
// has one, once, and nothing for the others: a batch is padded to the next query of
// sessionBatchQueries with its last hash, which must neither answer twice nor stand for a
// missing one.
func TestSessionBatchQueriesAnswerEveryBatchSize(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		if !st.postgres {
			return // SQLite reads one hash a query (stmtReader)
		}
		batchSizes(t, st, db)
	})
}

func batchSizes(t *testing.T, st *Store, db *gorm.DB) {
	// On a few rows every plan looks alike; with thousands the nested loop over users is the
	// plan, and a query whose custom plans look cheaper than its generic one is planned each time
	// (plannedOnce). They come first, so that no plan the test makes saw the tables smaller: a
	// connection weighs its generic plan against the average of all its custom plans so far.
	for _, q := range []string{
		`INSERT INTO users (id, email, name, email_verified, created_at, updated_at)
 SELECT md5('u' || i)::uuid, 'many-' || i || '@example.com', '', true, now(), now() FROM generate_series(1, 5000) AS i`,
		`INSERT INTO sessions (id, token, user_id, expires_at, absolute_expires_at, ip_address, user_agent, created_at, updated_at)
 SELECT md5('s' || i)::uuid, md5('t' || i), md5('u' || i)::uuid, now() + interval '1 day', now() + interval '1 day', '', '', now(), now()
 FROM generate_series(1, 5000) AS i`,
		`ANALYZE users`, `ANALYZE sessions`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	// Before any other session read: a connection's choice weighs its generic plan against the
	// average of every custom plan it made of the query, and a batch of 64 hashes costs more
	// than the generic plan of `= ANY($1)` assumes (10).
	var many []string
	for i := 1; i <= 3; i++ {
		many = append(many, fmt.Sprintf("%x", md5.Sum([]byte(fmt.Sprintf("t%d", i)))))
	}
	plannedOnce(t, st, many)
	emails := map[string]string{}
	var hashes []string
	for i := range sessionReadBatch {
		hash := fmt.Sprintf("%043d", i) // no session has it
		if i%3 != 1 {
			email := fmt.Sprintf("batch-%d@example.com", i)
			hash = addSession(t, db, addUser(t, db, email)).Token
			emails[hash] = email
		}
		hashes = append(hashes, hash)
	}
	for n := 1; n <= sessionReadBatch; n++ {
		got := map[string]int{}
		err := st.sessions.batch.query(context.Background(), hashes[:n], func(hash string, _ *Session, user *User) {
			got[hash]++
			if user.Email != emails[hash] {
				t.Errorf("%d hashes: hash %s answered with %q, want %q", n, hash, user.Email, emails[hash])
			}
		})
		if err != nil {
			t.Fatalf("%d hashes: %v", n, err)
		}
		for _, hash := range hashes[:n] {
			want := 0
			if emails[hash] != "" {
				want = 1
			}
			if got[hash] != want {
				t.Fatalf("%d hashes: hash %s answered %d times, want %d", n, hash, got[hash], want)
			}
		}
	}
}

// plannedOnce holds what the size classes are for: PostgreSQL keeps the generic plan of a session
// query after its first runs on a connection, instead of planning it again on every read (as it
// did with one array parameter, `= ANY($1)`, whose custom plans always looked cheaper).
func plannedOnce(t *testing.T, st *Store, hashes []string) {
	ctx := context.Background()
	conn, err := st.sessions.batch.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(driverConn any) error {
		pc := driverConn.(*stdlib.Conn)
		if mode := pc.Conn().Config().DefaultQueryExecMode; mode != pgx.QueryExecModeCacheStatement {
			// Unnamed statements (cache_describe, as behind PgBouncer 1.18) are planned on every
			// run whatever their shape; nothing is kept to check.
			t.Logf("statements are not prepared in query mode %v", mode)
			return nil
		}
		for _, batch := range [][]string{hashes[:1], hashes} {
			for range 10 {
				if err := st.sessions.batch.scan(ctx, pc, batch, func(string, *Session, *User) {}); err != nil {
					return err
				}
			}
			query, _ := sessionBatchArgs(batch)
			var generic, custom int64
			if err := pc.Conn().QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", query).Scan(&generic, &custom); err != nil {
				return fmt.Errorf("%d hashes: reading the prepared statement: %w", len(batch), err)
			}
			if generic < 3 {
				t.Errorf("%d hashes: %d generic and %d custom plans; want the generic plan kept after the first reads", len(batch), generic, custom)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every batch size from 1 to sessionReadBatch gets a query with as many parameters as its size
// class, at least the batch and under twice it, padded with the batch's last hash.
func TestSessionBatchArgs(t *testing.T) {
	var hashes []string
	for i := range sessionReadBatch {
		hashes = append(hashes, fmt.Sprintf("hash-%d", i))
	}
	for n := 1; n <= sessionReadBatch; n++ {
		query, args := sessionBatchArgs(hashes[:n])
		if len(args) < n || n > 1 && len(args) >= 2*n || strings.Count(query, "$") != len(args) {
			t.Fatalf("%d hashes: %d arguments for %q", n, len(args), query)
		}
		for i, a := range args {
			if want := hashes[min(i, n-1)]; a != want {
				t.Fatalf("%d hashes: argument %d is %v, want %s", n, i, a, want)
			}
		}
	}
}
