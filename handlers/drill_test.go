package handlers_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// Catalogue R1 (ASVS 16.5.2, 16.5.3): sign-ins keep coming while PostgreSQL is restarted, and
// then while its postmaster is killed and recovers from its WAL, on a server of the test's own.
// Every answer is a 200 or a 503 with Retry-After, never a 500 or any other error; once the
// server is back every session that was handed out with a 200 works, and each signed-in address
// has one account.
func TestDrill_DatabaseRestartAndKillUnderLoad(t *testing.T) {
	cluster := testkit.NewCluster(t)
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(func(string) string { return cluster.URL() }))

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		tokens   = map[string]string{} // bearer → address
		bad      []string
		n        atomic.Int64
		stop     atomic.Bool
	)
	record := func(what string, r *testkit.Response) bool {
		mu.Lock()
		defer mu.Unlock()
		statuses[r.Status]++
		switch r.Status {
		case 200:
			return true
		case http.StatusServiceUnavailable:
			if r.Header.Get("Retry-After") == "" {
				bad = append(bad, what+": a 503 without Retry-After")
			}
		default:
			bad = append(bad, fmt.Sprintf("%s: %d %s", what, r.Status, r.Body))
		}
		return false
	}
	flow := func() {
		email := fmt.Sprintf("drill%d@example.com", n.Add(1))
		if !record("send", e.Post(sendPath, map[string]any{"email": email, "type": "sign-in"})) {
			return
		}
		code := e.Mailer.LastCode(email)
		if code == "" {
			return // its e-mail waits for the database; a person would ask again
		}
		r := signIn(e, email, code)
		if !record("verify", r) {
			return
		}
		bearer := r.Header.Get("set-auth-token")
		mu.Lock()
		tokens[bearer] = email
		mu.Unlock()
		record("get-session", getSession(e, nil, "Authorization", "Bearer "+bearer))
	}
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				flow()
			}
		}()
	}
	pause := func() { time.Sleep(700 * time.Millisecond) }
	pause()
	cluster.Restart()
	pause()
	cluster.Kill()
	pause() // requests meet a server that is gone
	cluster.Start()
	pause()
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("answers by status: %v; %d sessions handed out", statuses, len(tokens))
	for i, b := range bad {
		if i == 20 {
			t.Fatalf("… and %d more", len(bad)-20)
		}
		t.Error(b)
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Fatal("no request met the outages: the drill did not drill")
	}
	if len(tokens) == 0 {
		t.Fatal("no sign-in succeeded")
	}
	for deadline := time.Now().Add(30 * time.Second); e.Get("/readyz").Status != 200; {
		if time.Now().After(deadline) {
			t.Fatal("not ready after the server came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for bearer, email := range tokens {
		r := getSession(e, nil, "Authorization", "Bearer "+bearer)
		var b sessionBody
		r.Decode(t, &b)
		if r.Status != 200 || b.User.Email != email {
			t.Fatalf("a session handed out during the drill is lost: %d %s", r.Status, r.Body)
		}
		if got := e.Count(&models.User{}, "email = ?", email); got != 1 {
			t.Fatalf("%d accounts for %s", got, email)
		}
	}
}
