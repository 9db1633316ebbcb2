package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"

	"github.com/jackc/pgx/v5"
)

// expectUnavailable fails the test unless r is the 503 of a database that cannot serve: the
// fixed JSON body, Retry-After, and nothing of the cause.
func expectUnavailable(t *testing.T, r *testkit.Response) {
	t.Helper()
	r.ExpectError(t, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
	if string(r.Body) != `{"message":"Service temporarily unavailable","code":"SERVICE_UNAVAILABLE"}` {
		t.Fatalf("503 body %s", r.Body)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("a 503 without Retry-After")
	}
}

// unavailableRound sends one of each kind of request that needs the database, while it is down,
// and checks each is a 503 (JSON under /api, the friendly page elsewhere), never a 500.
func unavailableRound(t *testing.T, e *testkit.Env, s testkit.Session) {
	t.Helper()
	expectUnavailable(t, e.Post(sendPath, map[string]any{"email": "bob@example.com", "type": "sign-in"}))
	expectUnavailable(t, signIn(e, "bob@example.com", "123456"))
	expectUnavailable(t, getSession(e, nil, bearer(s)...))
	// A cookie without its cache needs the database; with the cache it is answered without it.
	expectUnavailable(t, getSession(e, []*http.Cookie{{Name: s.TokenCookie.Name, Value: s.TokenCookie.Value}}))
	expectSession(t, getSession(e, s.Cookies()), s.UserID)
	expectUnavailable(t, e.Post(updateUserPath, map[string]any{"name": "Alice"}, bearer(s)...))
	if r := e.Get("/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the database down: %d %s", r.Status, r.Body)
	}
	// A page says so in words, with the same status; htmx gets the words in the alert region.
	page := e.Do(testkit.Request{Method: "POST", Path: "/auth/code", Body: "email=bob%40example.com&mode=sign-in",
		ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}, "Referer": {e.URL + "/auth/sign-in"}}})
	if page.Status != http.StatusServiceUnavailable || !strings.Contains(string(page.Body), "try again in a moment") ||
		page.Header.Get("Retry-After") == "" {
		t.Fatalf("page with the database down: %d, Retry-After %q\n%s", page.Status, page.Header.Get("Retry-After"), page.Body)
	}
	// Headed shortly, with a way back to the form it was sent from.
	if body := string(page.Body); !strings.Contains(body, ">Briefly unavailable</h1>") || !strings.Contains(body, `<a href="/auth/sign-in" class="btn sm:w-auto sm:px-6" data-testid="try-again">`) {
		t.Fatalf("the unavailable page has no short heading or no way to try again:\n%s", body)
	}
	htmx := e.Do(testkit.Request{Method: "POST", Path: "/auth/code", Body: "email=bob%40example.com&mode=sign-in",
		ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}, "Hx-Request": {"true"}}})
	if htmx.Status != http.StatusServiceUnavailable || !strings.Contains(string(htmx.Body), "try again in a moment") {
		t.Fatalf("htmx with the database down: %d\n%s", htmx.Status, htmx.Body)
	}
}

// Catalogue R1, #107 (ASVS 16.5.1, 16.5.3): with PostgreSQL unreachable (connections cut, new ones
// refused, as when the server stops or its postmaster is killed), every request that needs it is
// a 503 with Retry-After, the pages a friendly page with the same status, readiness fails; when the
// server is back, everything works again.
func TestDatabaseDown_ServiceUnavailable(t *testing.T) {
	proxy := testkit.NewDBProxy(t)
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(proxy.Rewrite))
	s := e.SignIn("alice@example.com")

	proxy.Down()
	unavailableRound(t, e, s)
	if strings.Contains(e.Logs.String(), "level=ERROR msg=\"request failed\"") {
		t.Fatal("an unavailable database was logged as an unexpected failure")
	}

	proxy.Up()
	if r := e.Get("/readyz"); r.Status != 200 {
		t.Fatalf("readyz after the database came back: %d", r.Status)
	}
	e.Clock.Advance(time.Minute) // past the lease of an e-mail whose delivery was cut off
	expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
	e.SignIn("bob@example.com")
}

// Catalogue R1: a database that hangs without refusing anything (its server stopped with
// SIGSTOP, a network dropping packets) holds no request for ever: each that needs it is a 503
// within middleware.RequestTimeout, on a connection already open or a new one, and every route
// works again once the database answers.
func TestDatabaseHung_ServiceUnavailableInBoundedTime(t *testing.T) {
	proxy := testkit.NewDBProxy(t)
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(proxy.Rewrite))
	s := e.SignIn("alice@example.com")

	proxy.Hang()
	form := func(path, body string) testkit.Request {
		return testkit.Request{Method: "POST", Path: path, Body: body, ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}}}
	}
	requests := map[string]testkit.Request{
		"send":         {Method: "POST", Path: sendPath, JSON: map[string]any{"email": "bob@example.com", "type": "sign-in"}},
		"verify":       {Method: "POST", Path: signInPath, JSON: map[string]any{"email": "bob@example.com", "otp": "123456"}},
		"bearer read":  {Path: "/api/auth/get-session", Header: http.Header{"Authorization": {"Bearer " + s.Bearer}}},
		"sign-out":     {Method: "POST", Path: "/api/auth/sign-out", JSON: map[string]any{}, Header: http.Header{"Authorization": {"Bearer " + s.Bearer}}},
		"account page": {Path: "/account", Cookies: []*http.Cookie{{Name: s.TokenCookie.Name, Value: s.TokenCookie.Value}}},
		"page form":    form("/auth/code", "email=bob%40example.com&mode=sign-in"),
	}
	// More at once than the pool has connections, so that some wait for one that never frees.
	for i := range 40 {
		requests[fmt.Sprintf("send %d", i)] = testkit.Request{Method: "POST", Path: sendPath, JSON: map[string]any{"email": fmt.Sprintf("c%d@example.com", i), "type": "sign-in"}}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]*testkit.Response{}
	for name, req := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Do(req) // the client gives up after 30 s, twice RequestTimeout
			mu.Lock()
			answers[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	for name, r := range answers {
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s with the database hung: %d %.200s", name, r.Status, r.Body)
		}
	}

	proxy.Resume()
	if r := e.Get("/readyz"); r.Status != 200 {
		t.Fatalf("readyz after the database answered again: %d", r.Status)
	}
	e.Clock.Advance(time.Minute)
	expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
	e.SignIn("bob@example.com")
}

// The embedded database unavailable: its pool closed, as while the process stops. Every request
// that needs it is a 503, not a 500.
func TestDatabaseClosed_ServiceUnavailable(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		sqlDB, _ := e.DB.DB()
		sqlDB.Close()
		unavailableRound(t, e, s)
	})
}

// Catalogue R1: a restart ends every connection from the server's side (FATAL 57P01), and the
// service learns it only by using each. No request fails for it once the server is back: a read
// or a write that meets a dead connection goes again on another, and the dead ones are dropped.
func TestDatabaseRestart_TerminatedConnections(t *testing.T) {
	role, asRole := testkit.PostgresRole(t)
	e := testkit.New(t, testkit.Postgres, asRole)
	s := e.SignIn("alice@example.com")
	for round := 0; round < 3; round++ {
		if n := testkit.TerminateBackends(t, role); n == 0 {
			t.Fatal("no connection of the service to end")
		}
		// A write first, then reads: each may be the first to meet a dead connection.
		if r := e.Post(sendPath, map[string]any{"email": fmt.Sprintf("carol%d@example.com", round), "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("round %d: a write after a restart: %d %s", round, r.Status, r.Body)
		}
		for i := 0; i < 6; i++ {
			expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
		}
		// An e-mail whose delivery was cut off with its worker's connection waits for the worker's
		// lease on it to run out, as after a crash.
		e.Clock.Advance(time.Minute)
		e.SignIn("bob@example.com")
	}
}

// Catalogue R1 (items 4, 5 of issue 13): a read-only database. Readiness proves the instance can
// write, so it fails while PostgreSQL refuses writes although it still answers pings; writes are
// 503s; and once the server is writable again, the connections opened while it was read-only
// (which keep the read-only default they started with) are dropped at their first refused write
// instead of failing every write until they age out.
func TestDatabaseReadOnly_PostgreSQL(t *testing.T) {
	role, asRole := testkit.PostgresRole(t)
	e := testkit.New(t, testkit.Postgres, asRole)
	s := e.SignIn("alice@example.com")
	admin := testkit.Admin(t)

	// A failover to a read-only server: the connections end, and new ones are read-only.
	if err := admin.Exec("ALTER ROLE " + role + " SET default_transaction_read_only = on").Error; err != nil {
		t.Fatal(err)
	}
	testkit.TerminateBackendsOfOldSettings(t, role)
	for i := 0; i < 4; i++ {
		if r := e.Get("/readyz"); r.Status != http.StatusServiceUnavailable {
			t.Fatalf("readyz on a read-only database: %d %s", r.Status, r.Body)
		}
		r := e.Post(sendPath, map[string]any{"email": "bob@example.com", "type": "sign-in"})
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("a write on a read-only database: %d %s", r.Status, r.Body)
		}
		// Reads still work.
		expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
	}

	// Writable again: connections opened meanwhile are still read-only until dropped.
	if err := admin.Exec("ALTER ROLE " + role + " RESET default_transaction_read_only").Error; err != nil {
		t.Fatal(err)
	}
	var open int
	if err := admin.Raw("SELECT count(*) FROM pg_stat_activity WHERE usename = ?", role).Scan(&open).Error; err != nil {
		t.Fatal(err)
	}
	refused, writes := 0, open+10
	for i := 0; i < writes; i++ {
		if r := e.Post(sendPath, map[string]any{"email": fmt.Sprintf("carol%d@example.com", i), "type": "sign-in"}); r.Status == http.StatusServiceUnavailable {
			refused++
		} else if r.Status != 200 {
			t.Fatalf("a send after the read-only period: %d %s", r.Status, r.Body)
		}
	}
	// Each refused write drops its connection, so no more writes fail than there were
	// connections when the server became writable again.
	if refused > open {
		t.Fatalf("%d of %d writes refused with %d connections open: read-only connections are handed out again", refused, writes, open)
	}
	if r := e.Get("/readyz"); r.Status != 200 {
		t.Fatalf("readyz after the read-only period: %d %s", r.Status, r.Body)
	}
	e.Clock.Advance(time.Minute) // past the lease of an e-mail whose delivery was cut off
	e.SignIn("dave@example.com")
}

// The embedded database read-only (its connection set query_only, as a read-only file would be):
// readiness fails and writes are 503s; reads go on.
func TestDatabaseReadOnly_SQLite(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	s := e.SignIn("alice@example.com")
	if err := e.DB.Exec("PRAGMA query_only = 1").Error; err != nil {
		t.Fatal(err)
	}
	if r := e.Get("/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz on a read-only database: %d %s", r.Status, r.Body)
	}
	expectUnavailable(t, e.Post(sendPath, map[string]any{"email": "bob@example.com", "type": "sign-in"}))
	expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
	if err := e.DB.Exec("PRAGMA query_only = 0").Error; err != nil {
		t.Fatal(err)
	}
	if r := e.Get("/readyz"); r.Status != 200 {
		t.Fatalf("readyz when writable again: %d", r.Status)
	}
	e.SignIn("bob@example.com")
}

// Catalogue R1, #19 (item 7 of issue 13): the connection breaks after PostgreSQL committed a
// sign-in and before the service heard so. The service looks for the session it stored: found,
// the sign-in succeeds as usual. When it cannot look (the database went away with the
// connection), the answer is a 503 that says to request a new code, since the code may be spent:
// retrying it would fail as a wrong code. (The embedded SQLite database runs in the process, so an
// acknowledgement cannot be lost there.)
func TestVerify_CommitAcknowledgementLost(t *testing.T) {
	proxy := testkit.NewDBProxy(t)
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(proxy.Rewrite))

	code := e.SendCode("alice@example.com")
	proxy.CutAfterCommit(false)
	r := signIn(e, "alice@example.com", code)
	if proxy.Cuts() != 1 {
		t.Fatalf("the commit's answer was not cut (%d cuts)", proxy.Cuts())
	}
	if r.Status != 200 {
		t.Fatalf("a committed sign-in whose answer was lost: %d %s", r.Status, r.Body)
	}
	expectSession(t, getSession(e, nil, "Authorization", "Bearer "+r.Header.Get("set-auth-token")), userIDOf(t, r))

	code = e.SendCode("bob@example.com")
	proxy.CutAfterCommit(true)
	r = signIn(e, "bob@example.com", code)
	if proxy.Cuts() != 2 {
		t.Fatalf("the commit's answer was not cut (%d cuts)", proxy.Cuts())
	}
	r.ExpectError(t, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
	if !strings.Contains(string(r.Body), "request a new code") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("503 of an unconfirmed sign-in: %s, Retry-After %q", r.Body, r.Header.Get("Retry-After"))
	}
	upAgain(proxy)
	e.Clock.Advance(time.Minute) // past the lease of an e-mail whose delivery was cut off
	// The page says the same in its own words, with the status and Retry-After.
	pageCode := e.SendCode("carol@example.com")
	proxy.CutAfterCommit(true)
	page := e.Do(testkit.Request{Method: "POST", Path: "/auth/verify", Body: "mode=sign-in&email=carol%40example.com&otp=" + pageCode,
		ContentType: "application/x-www-form-urlencoded", Header: http.Header{"Origin": {e.URL}, "Hx-Request": {"true"}}})
	if page.Status != http.StatusServiceUnavailable || page.Header.Get("Retry-After") == "" || !strings.Contains(string(page.Body), "Send the code again") {
		t.Fatalf("the page of an unconfirmed sign-in: %d, Retry-After %q\n%s", page.Status, page.Header.Get("Retry-After"), page.Body)
	}
	upAgain(proxy)
	e.Clock.Advance(time.Minute)
	// It had committed: the code is spent, and a new one signs in to the one account made.
	signIn(e, "bob@example.com", code).ExpectError(t, http.StatusBadRequest, "INVALID_OTP")
	if n := e.Count(&models.User{}, "email = ?", "bob@example.com"); n != 1 {
		t.Fatalf("%d accounts for bob", n)
	}
	s := e.SignIn("bob@example.com")
	var u models.User
	e.DB.Where("email = ?", "bob@example.com").Take(&u)
	if s.UserID != u.ID {
		t.Fatal("the new code signed in to another account")
	}

	// The first look fails, as it does on another connection the same failure broke; the
	// database is back for the next: the sign-in that committed is confirmed, not turned away.
	e.Clock.Advance(time.Minute)
	code = e.SendCode("dave@example.com")
	failedFirstLooks := func() int { return strings.Count(e.Logs.String(), `its session was not found yet" look=1`) }
	before := failedFirstLooks()
	proxy.CutAfterCommit(true)
	answered := make(chan *testkit.Response, 1)
	go func() { answered <- signIn(e, "dave@example.com", code) }()
	for deadline := time.Now().Add(10 * time.Second); failedFirstLooks() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("the first look did not fail:\n%s", e.Logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	proxy.Up()
	r = <-answered
	if r.Status != 200 {
		t.Fatalf("a committed sign-in confirmed by a later look: %d %s", r.Status, r.Body)
	}
	expectSession(t, getSession(e, nil, "Authorization", "Bearer "+r.Header.Get("set-auth-token")), userIDOf(t, r))
}

// upAgain brings the database proxy back and waits until the pool can no longer hand out a
// connection the cut killed. pgx checks a pooled connection with a ping only when it has been idle
// for more than a second, so for a second after a cut a request (or the outbox's workers, which
// poll every second) may still get a dead one, and answer 503 with Retry-After, as after any
// failover; the test is about what comes after.
func upAgain(proxy *testkit.DBProxy) {
	proxy.Up()
	time.Sleep(1100 * time.Millisecond)
}

// userIDOf reads the user id of a sign-in answer.
func userIDOf(t *testing.T, r *testkit.Response) string {
	t.Helper()
	var b struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	r.Decode(t, &b)
	return b.User.ID
}

// After the server ends every connection (a restart, a failover), the pool still holds them.
// A session read is a SELECT: the first use of each dead connection must not become a 503 for
// the person whose session it is, so the read runs again on a live connection.
func TestSessionReadsSurviveDeadPooledConnections(t *testing.T) {
	role, asRole := testkit.PostgresRole(t)
	e := testkit.New(t, testkit.Postgres, asRole)
	sessions := make([]testkit.Session, 4)
	for i := range sessions {
		sessions[i] = e.SignIn(fmt.Sprintf("reader%d@example.com", i))
	}
	for round := 0; round < 3; round++ {
		if n := testkit.TerminateBackends(t, role); n == 0 {
			t.Fatal("no connection of the service to end")
		}
		for _, s := range sessions {
			expectSession(t, getSession(e, nil, bearer(s)...), s.UserID)
		}
	}
}

// Catalogue R1: a lock the service cannot have within the operator's lock_timeout (a migration
// holding a table) and a deadlock with an operator's session roll the transaction back and may
// be tried again in a moment: 503 with Retry-After, never a 500.
func TestDatabaseLockTimeout_ServiceUnavailable(t *testing.T) {
	var url string
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(func(u string) string {
		url = u
		if os.Getenv("TEST_DATABASE_POOLER") != "transaction" {
			// The operator's lock_timeout, as a startup option of the service's connections.
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			return u + sep + "options=-c%20lock_timeout%3D300ms"
		}
		// PgBouncer passes no startup option on: there the test has a role of its own
		// (testdb.PostgresURL), and the timeout is that role's default, set before the service
		// connects. A server connection the pooler made before it may serve the request
		// without it; the request then waits for its deadline, a 503 as well.
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "ALTER ROLE CURRENT_USER SET lock_timeout = '300ms'"); err != nil {
			t.Fatal(err)
		}
		return u
	}))
	s := e.SignIn("alice@example.com")
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Released before the service's store closes (t.Cleanup runs last first).
	t.Cleanup(func() { tx.Rollback(ctx); holder.Close(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE sessions, users IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	expectUnavailable(t, e.Post("/api/auth/sign-out", map[string]any{}, bearer(s)...))
	expectUnavailable(t, e.Post(updateUserPath, map[string]any{"name": "Alice"}, bearer(s)...))
	if strings.Contains(e.Logs.String(), `level=ERROR msg="request failed"`) {
		t.Fatal("a lock timeout was logged as an unexpected failure")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.Post(updateUserPath, map[string]any{"name": "Alice"}, bearer(s)...); r.Status != 200 {
		t.Fatalf("with the lock gone: %d %s", r.Status, r.Body)
	}
}

// A session due for its daily refresh is still answered when the refresh cannot be written (a
// database read-only during a failover, here a trigger refusing it): the read succeeded, and the
// refresh waits for a later request. Before, every session over a day old was a 503 meanwhile.
func TestSessionRefreshRefused_SessionStillAnswered(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		e.Clock.Advance(25 * time.Hour)
		refuse := []string{`CREATE TRIGGER refuse_refresh BEFORE UPDATE ON sessions BEGIN SELECT RAISE(ABORT, 'read-only'); END`}
		if e.Dialect == testkit.Postgres {
			refuse = []string{
				`CREATE FUNCTION refuse_refresh() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'read-only' USING ERRCODE = '25006'; END $$`,
				`CREATE TRIGGER refuse_refresh BEFORE UPDATE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse_refresh()`,
			}
		}
		for _, stmt := range refuse {
			if err := e.DB.Exec(stmt).Error; err != nil {
				t.Fatal(err)
			}
		}
		var before models.Session
		e.DB.Take(&before, "user_id = ?", s.UserID)
		r := getSession(e, nil, bearer(s)...)
		expectSession(t, r, s.UserID)
		if r.Header.Get("set-auth-token") != "" {
			t.Fatal("a refresh that was not written was announced")
		}
		var after models.Session
		e.DB.Take(&after, "user_id = ?", s.UserID)
		if !after.ExpiresAt.Equal(before.ExpiresAt) {
			t.Fatal("the refused refresh changed the session")
		}
	})
}
