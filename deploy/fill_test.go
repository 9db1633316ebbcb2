package deploy

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeauth/internal/testdb"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// scripts/fill (issue 19 #2) makes what it says, on a fresh database: here a small fill, so the
// script cannot rot between the measurements it exists for.
func TestFillScript(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("psql is required (CI=true)")
		}
		t.Skip("psql is not installed")
	}
	base := testdb.Base(t)
	admin := testdb.Admin(t)
	// Through a pooler the database is reached directly for this: the script uses psql.
	if os.Getenv("TEST_DATABASE_POOLER") != "" {
		t.Skip("the fill script talks to PostgreSQL itself, not through the pooler")
	}
	name := "codeauth_fill_test_" + strconv.Itoa(os.Getpid())
	admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	q.Del("default_query_exec_mode")
	u.RawQuery = q.Encode()
	root, _ := filepath.Abs("..")
	cmd := exec.Command(filepath.Join(root, "scripts", "fill"), u.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "USERS=300", "OUTBOX=500")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/fill: %v\n%s", err, out)
	}
	db, err := gorm.Open(postgres.Open(u.String()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	for table, want := range map[string]int64{"users": 300, "user_data": 300, "sessions": 900, "verifications": 300, "outbox": 500} {
		var n int64
		db.Raw("SELECT count(*) FROM " + table).Scan(&n)
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	var expired int64
	db.Raw("SELECT count(*) FROM sessions WHERE expires_at < now()").Scan(&expired)
	if expired != 300 {
		t.Errorf("%d expired sessions, want a third of 900", expired)
	}
}

// The same fill of the embedded SQLite database (a DATA_DIR), through the sqlite3 tool: the rows
// must be what the service would have written, to the format of each time, and the service must
// then run on them: serve, sign an account of the fill in and list its sessions, prune the
// expired rows.
func TestFillScript_SQLite(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("sqlite3 is required (CI=true)")
		}
		t.Skip("sqlite3 is not installed")
	}
	const users, outbox = 200, 500
	dir := t.TempDir()
	root, _ := filepath.Abs("..")
	cmd := exec.Command(filepath.Join(root, "scripts", "fill"), dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "USERS="+strconv.Itoa(users), "OUTBOX="+strconv.Itoa(outbox))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/fill: %v\n%s", err, out)
	}
	// A second fill of the same folder, named by its auth.db, is refused before it adds a row.
	cmd = exec.Command(filepath.Join(root, "scripts", "fill"), filepath.Join(dir, "auth.db"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "USERS=10")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "has accounts already") {
		t.Fatalf("a second fill: %v\n%s", err, out)
	}

	counts := func() map[string]int64 {
		db, err := gorm.Open(sqlite.Open(filepath.Join(dir, "auth.db")), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		sqlDB, _ := db.DB()
		defer sqlDB.Close()
		n := map[string]int64{}
		for _, table := range []string{"users", "user_data", "sessions", "verifications", "outbox"} {
			var c int64
			if err := db.Table(table).Count(&c).Error; err != nil {
				t.Fatal(err)
			}
			n[table] = c
		}
		var expired, sent int64
		db.Table("sessions").Where("expires_at < ?", time.Now().UTC()).Count(&expired)
		n["expired sessions"] = expired
		db.Table("outbox").Where("status = ?", "sent").Count(&sent)
		n["old e-mails"] = sent
		return n
	}
	got := counts()
	want := map[string]int64{"users": users, "user_data": users, "sessions": 3 * users, "verifications": users, "outbox": outbox, "expired sessions": users, "old e-mails": outbox}
	if !maps.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	checkSQLiteFormats(t, filepath.Join(dir, "auth.db"))
	checkSupersedePlan(t, filepath.Join(dir, "auth.db"))

	// The service on the filled folder: an account of the fill signs in with a code, and lists its
	// sessions: the new one and, of the three the fill gave it (rows 200, 400 and 600), the two
	// that have not expired.
	bin := filepath.Join(t.TempDir(), "codeauth")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port := strconv.Itoa(freeTCPPort(t))
	env := append(os.Environ(), "DATABASE_URL=", "DATA_DIR="+dir, "PORT="+port, "AUTH_URL=http://localhost:"+port,
		"AUTH_TRUSTED_PROXIES=none", "EMAIL_PROVIDER_API_KEY=", "SMTP_URL=")
	serve := exec.Command(bin, "serve")
	serve.Env = env
	var logs lockedBuffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = serve.Process.Signal(syscall.SIGTERM)
			_ = serve.Wait()
		}
	}
	defer stop()
	base := "http://127.0.0.1:" + port
	waitFor(t, "the service to be ready", &logs, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	post := func(path, body string) *http.Response {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s: %d %s\n%s", path, resp.StatusCode, b, logs.String())
		}
		return resp
	}
	post("/api/auth/email-otp/send-verification-otp", `{"email":"user1@fill.example","type":"sign-in"}`).Body.Close()
	codeLine := regexp.MustCompile(`mail kind=sign-in-code to=user1@fill\.example code=(\d+)`)
	var code string
	waitFor(t, "the code's e-mail", &logs, func() bool {
		m := codeLine.FindStringSubmatch(logs.String())
		if m != nil {
			code = m[1]
		}
		return m != nil
	})
	signIn := post("/api/auth/sign-in/email-otp", `{"email":"user1@fill.example","otp":"`+code+`"}`)
	var session struct {
		User struct{ Name, Email string }
	}
	if err := json.NewDecoder(signIn.Body).Decode(&session); err != nil {
		t.Fatal(err)
	}
	signIn.Body.Close()
	if session.User.Name != "User 1" || session.User.Email != "user1@fill.example" {
		t.Fatalf("signed in as %+v", session.User)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/auth/list-sessions", nil)
	req.Header.Set("Authorization", "Bearer "+signIn.Header.Get("set-auth-token"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sessions []struct{ IPAddress string }
	err = json.NewDecoder(resp.Body).Decode(&sessions)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list-sessions: %d %v", resp.StatusCode, err)
	}
	if len(sessions) != 3 {
		t.Fatalf("list-sessions: %+v, want the new session and two of the fill's", sessions)
	}
	stop()

	// The prune takes the expired sessions and codes, and the old e-mails queued more than a week
	// ago (row i was queued i % 90 + 1 days ago); the sign-in added a session, used its code and
	// may have left its new-device notice in the outbox.
	prune := exec.Command(bin, "auth:prune-throttle")
	prune.Env = env
	if out, err := prune.CombinedOutput(); err != nil {
		t.Fatalf("auth:prune-throttle: %v\n%s", err, out)
	}
	var recent int64
	for i := 1; i <= outbox; i++ {
		if i%90+1 < 7 {
			recent++
		}
	}
	got = counts()
	want = map[string]int64{"users": users, "user_data": users, "sessions": 2*users + 1, "verifications": 0, "expired sessions": 0, "old e-mails": recent}
	delete(got, "outbox")
	if !maps.Equal(got, want) {
		t.Fatalf("after the prune: rows %v, want %v\n%s", got, want, logs.String())
	}
}

// checkSQLiteFormats reads the filled rows as the text SQLite stores, not as the driver parses it,
// and checks them against what the service writes: each time as the driver writes a time.Time,
// ids as uuid.New writes them, hashes of 43 base64url characters, booleans as 0 and 1.
func checkSQLiteFormats(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	uuidV4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	hash := regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	columns := map[string][]string{
		"users":         {"id", "created_at", "updated_at", "email_verified", "banned"},
		"user_data":     {"id", "user_id", "created_at", "updated_at", "marketing_opt_in", "is_trial_eligible"},
		"sessions":      {"id", "user_id", "token", "expires_at", "absolute_expires_at", "created_at", "updated_at"},
		"verifications": {"id", "code_hash", "expires_at", "created_at", "exhausted"},
		"outbox":        {"id", "next_attempt_at", "created_at"},
	}
	for table, cols := range columns {
		for _, col := range cols {
			rows, err := db.Query("SELECT CAST(" + col + " AS TEXT), typeof(" + col + ") FROM " + table)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var v, typ string
				if err := rows.Scan(&v, &typ); err != nil {
					t.Fatal(err)
				}
				var ok bool
				switch {
				case col == "id" || col == "user_id":
					ok = typ == "text" && uuidV4.MatchString(v)
				case col == "token" || col == "code_hash":
					ok = typ == "text" && hash.MatchString(v)
				case strings.HasSuffix(col, "_at"):
					tm, err := time.Parse(sqliteTime, v)
					ok = typ == "text" && err == nil && tm.Format(sqliteTime) == v
				default:
					ok = typ == "integer" && (v == "0" || v == "1")
				}
				if !ok {
					rows.Close()
					t.Fatalf("%s.%s: %q (%s) is not what the service writes", table, col, v, typ)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
	}
}

// checkSupersedePlan checks that, with the statistics of the fill's ANALYZE, a new code's e-mail
// still finds the messages it supersedes through the key's index (models' supersedeSQL): with the
// same key in every row, SQLite's planner chose to scan the whole outbox instead.
func checkSupersedePlan(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// models.supersedeSQL, the statement a code's e-mail runs
	rows, err := db.Query(`EXPLAIN QUERY PLAN DELETE FROM outbox WHERE supersede = ? AND supersede <> '' AND status = 'pending'
 AND (locked_until IS NULL OR locked_until <= ?)`, "sign-in-code:user1@fill.example", time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "USING INDEX idx_outbox_supersede_key") {
		t.Fatalf("the supersede DELETE's plan: %q", plan)
	}
}

// sqliteTime is how the SQLite driver writes a time.Time, and the service's times are UTC.
const sqliteTime = "2006-01-02 15:04:05.999999999+00:00"

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls done for up to 30 seconds.
func waitFor(t *testing.T, what string, logs *lockedBuffer, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !done(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s:\n%s", what, logs.String())
		}
	}
}

// freeTCPPort is a port nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
