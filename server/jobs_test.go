package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"
	"codeauth/server"
)

func TestNextNightly(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	cases := map[time.Time]time.Time{
		time.Date(2026, 5, 1, 2, 59, 59, 0, loc): time.Date(2026, 5, 1, 3, 0, 0, 0, loc),
		time.Date(2026, 5, 1, 3, 0, 0, 0, loc):   time.Date(2026, 5, 2, 3, 0, 0, 0, loc),
		time.Date(2026, 5, 1, 23, 0, 0, 0, loc):  time.Date(2026, 5, 2, 3, 0, 0, 0, loc),
		time.Date(2026, 12, 31, 4, 0, 0, 0, loc): time.Date(2027, 1, 1, 3, 0, 0, 0, loc),
	}
	for in, want := range cases {
		if got := server.NextNightly(in); !got.Equal(want) {
			t.Errorf("NextNightly(%v) = %v, want %v", in, got, want)
		}
	}
}

// Two instances on one PostgreSQL database never run a scheduled job at once: while one holds
// it, the other skips.
func TestRunExclusive_OneInstanceAtATime(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		other := e
		if e.Dialect == testkit.Postgres {
			other = e.Sibling() // a second service on the same database
		}
		started, release := make(chan struct{}), make(chan struct{})
		e.Server.Scheduler.SetJobStarted(func(string) {
			close(started)
			<-release
		})
		job := e.Auth.PruneJob()
		var wg sync.WaitGroup
		var firstRan bool
		var firstErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			firstRan, firstErr = e.Server.Scheduler.RunExclusive(context.Background(), job)
		}()
		<-started
		ran, err := other.Server.Scheduler.RunExclusive(context.Background(), other.Auth.PruneJob())
		if err != nil || ran {
			t.Fatalf("second run while the first holds the lock: ran=%v err=%v", ran, err)
		}
		close(release)
		wg.Wait()
		if !firstRan || firstErr != nil {
			t.Fatalf("first run: ran=%v err=%v", firstRan, firstErr)
		}
		// Once released, the job can run again, and no advisory lock is left behind.
		e.Server.Scheduler.SetJobStarted(nil)
		if ran, err := other.Server.Scheduler.RunExclusive(context.Background(), other.Auth.PruneJob()); !ran || err != nil {
			t.Fatalf("run after release: ran=%v err=%v", ran, err)
		}
		if e.Dialect == testkit.Postgres {
			var held int64
			e.DB.Raw("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext(?)::oid AND granted",
				"codeauth job "+auth.JobPruneThrottle).Scan(&held)
			if held != 0 {
				t.Fatalf("%d advisory locks still held after the job", held)
			}
		}
	})
}

// A job that panics is an error of that job, not a crash of the server, and releases its lock.
func TestRunExclusive_PanicIsAnError(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		boom := auth.Job{Name: "boom", Run: func(context.Context) error { panic("boom") }}
		if ran, err := e.Server.Scheduler.RunExclusive(context.Background(), boom); !ran || err == nil {
			t.Fatalf("panicking job: ran=%v err=%v", ran, err)
		}
		if ran, err := e.Server.Scheduler.RunExclusive(context.Background(), auth.Job{Name: "boom", Run: func(context.Context) error { return nil }}); !ran || err != nil {
			t.Fatalf("the lock was not released: ran=%v err=%v", ran, err)
		}
	})
}

// The server prunes every server.PruneInterval (RunEvery, here with a short interval): an expired code
// never used and an expired throttle counter are gone minutes later, not at night; the live ones
// stay, and the live code still signs in.
func TestPruneRunsPeriodically(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.SendCode("old@example.com")
		e.Clock.Advance(auth.SendWindow + time.Minute) // past the code's expiry and the send window
		live := e.SendCode("live@example.com")
		if c, n := e.Count(&models.Verification{}), e.Count(&models.AuthThrottle{}); c != 2 || n != 2 {
			t.Fatalf("%d codes and %d throttle counters before the prune, want 2 and 2", c, n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.Server.Scheduler.RunEvery(ctx, time.Millisecond, e.Auth.PruneJob())
		}()
		for stop := time.Now().Add(10 * time.Second); e.Count(&models.Verification{}) != 1 || e.Count(&models.AuthThrottle{}) != 1; {
			if time.Now().After(stop) {
				t.Fatal("waited in vain for the periodic prune")
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		if e.Count(&models.Verification{}, "subject = ?", "live@example.com") != 1 {
			t.Fatal("the live code was pruned")
		}
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "live@example.com", "otp": live}); r.Status != 200 {
			t.Fatalf("signing in with the live code: %d %s", r.Status, r.Body)
		}
	})
}

// A run the shutdown interrupts is logged as stopped, not as a failure an operator must look
// into: the prune of a large backlog is often still running when an instance is replaced.
func TestScheduledJob_StoppedByTheShutdownIsNoFailure(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	started := make(chan struct{})
	var once sync.Once
	job := auth.Job{Name: "test:until-shutdown", Run: func(ctx context.Context) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return fmt.Errorf("deleting a batch: %w", ctx.Err())
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Server.Scheduler.RunEvery(ctx, time.Millisecond, job)
	}()
	<-started
	cancel()
	<-done
	logs := e.Logs.String()
	if strings.Contains(logs, "scheduled job failed") || !strings.Contains(logs, "scheduled job stopped by the shutdown") {
		t.Fatalf("the interrupted run was not logged as stopped by the shutdown:\n%s", logs)
	}
}

// A job that fails for a reason of its own (an error of the database, or a panic) while the
// shutdown happens to begin is a failure all the same, and is logged as one.
func TestScheduledJob_AFailureDuringTheShutdownIsStillAFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func() error
	}{
		{"error", func() error {
			return errors.New("pruning codes: ERROR: duplicate key value violates unique constraint (SQLSTATE 23505)")
		}},
		{"panic", func() error { panic("nil map") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := testkit.New(t, testkit.SQLite)
			ctx, cancel := context.WithCancel(context.Background())
			var once sync.Once
			job := auth.Job{Name: "test:fails-as-shutdown-begins", Run: func(context.Context) error {
				once.Do(cancel) // the shutdown begins while the job is on its way to failing on its own
				return c.fail()
			}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.Server.Scheduler.RunEvery(ctx, time.Millisecond, job)
			}()
			<-done
			if logs := e.Logs.String(); !strings.Contains(logs, "scheduled job failed") || strings.Contains(logs, "stopped by the shutdown") {
				t.Fatalf("a failure during the shutdown was not logged as one:\n%s", logs)
			}
		})
	}
}
