package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeauth/config"
	"codeauth/internal/testkit"
)

var binary string

// TestMain builds the service once; these tests run it as a newcomer would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codeauth-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "codeauth")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is one running service binary.
type process struct {
	cmd *exec.Cmd
	url string
	// console is a file that receives stdout too, for tools that read the console mailer.
	console *os.File
	mu      sync.Mutex
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	exited  chan error
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the binary with only the given variables set (plus PATH and HOME).
func start(t *testing.T, vars ...string) *process {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(binary)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), fmt.Sprintf("PORT=%d", port)}, vars...)
	p := &process{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan error, 1)}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	console, err := os.Create(filepath.Join(cmd.Dir, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.console = console
	go p.copy(stdout, &p.stdout)
	go p.copy(stderr, &p.stderr)
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", p.out(&p.stdout), p.out(&p.stderr))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case err := <-p.exited:
			t.Fatalf("the service exited: %v\n%s", err, p.out(&p.stderr))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not start\n%s", p.out(&p.stderr))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *process) copy(r io.Reader, w *bytes.Buffer) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		p.mu.Lock()
		w.Write(s.Bytes())
		w.WriteByte('\n')
		if w == &p.stdout {
			p.console.Write(append(s.Bytes(), '\n'))
		}
		p.mu.Unlock()
	}
}

func (p *process) out(b *bytes.Buffer) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return b.String()
}

func (p *process) post(t *testing.T, path, body string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", p.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var codeLine = regexp.MustCompile(`mail kind=sign-in-code to=(\S+) code=(\d+)`)

// signInFlow requests a code, reads it from the console like a developer would, verifies it and
// reads the session by bearer.
func signInFlow(t *testing.T, p *process, email string) {
	t.Helper()
	resp := p.post(t, "/api/auth/email-otp/send-verification-otp", `{"email":"`+email+`","type":"sign-in"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	var code string
	for i := 0; i < 100 && code == ""; i++ {
		for _, m := range codeLine.FindAllStringSubmatch(p.out(&p.stdout), -1) {
			if m[1] == email {
				code = m[2]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code == "" {
		t.Fatalf("no console line with the code in:\n%s", p.out(&p.stdout))
	}
	resp = p.post(t, "/api/auth/sign-in/email-otp", `{"email":"`+email+`","otp":"`+code+`"}`)
	resp.Body.Close()
	token := resp.Header.Get("set-auth-token")
	if resp.StatusCode != 200 || token == "" {
		t.Fatalf("verify: %d, set-auth-token %q", resp.StatusCode, token)
	}
	req, _ := http.NewRequest("GET", p.url+"/api/auth/get-session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct{ User struct{ Email string } }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.User.Email != email {
		t.Fatalf("get-session: %v %+v", err, body)
	}
	// Access-log lines are written out in batches: wait for the last request's, after which the
	// log holds every line of these requests.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.out(&p.stderr), "path=/api/auth/get-session"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no access-log line of the get-session within 10 s")
		}
	}
	if strings.Contains(p.out(&p.stderr), code) || strings.Contains(p.out(&p.stderr), token) {
		t.Fatal("the log holds the code or the token")
	}
}

// The README's run command: nothing configured, embedded SQLite, codes on the console.
func TestBinary_RunsWithNothingConfigured(t *testing.T) {
	p := start(t)
	signInFlow(t, p, "newcomer@example.com")
	for _, f := range []string{"data/auth.db", "data/auth-secret"} {
		if _, err := os.Stat(filepath.Join(p.cmd.Dir, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(p.out(&p.stderr), "AUTH_SECRET is not set") {
		t.Fatal("no warning about the generated secret")
	}
	// It listens on every interface with no word on proxies: it says how it reads client
	// addresses (catalogue D35).
	if !strings.Contains(p.out(&p.stderr), "AUTH_TRUSTED_PROXIES is not set") {
		t.Fatal("no warning about the client-address rule")
	}
}

// AUTH_TRUSTED_PROXIES=none (catalogue D35, ASVS 4.1.3): clients connect directly, so forwarding
// headers are their own words: rotating X-Forwarded-For and X-Real-IP does not escape the per-IP
// send limit, and there is no warning at start.
func TestBinary_NoProxy(t *testing.T) {
	p := start(t, "AUTH_TRUSTED_PROXIES=none")
	if strings.Contains(p.out(&p.stderr), "AUTH_TRUSTED_PROXIES is not set") {
		t.Fatal("a warning about proxies although AUTH_TRUSTED_PROXIES is set")
	}
	limited := 0
	for i := 0; i < 25; i++ {
		resp := p.post(t, "/api/auth/email-otp/send-verification-otp", fmt.Sprintf(`{"email":"n%d@example.com","type":"sign-in"}`, i),
			"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1), "X-Real-Ip", fmt.Sprintf("198.51.100.%d", i+1))
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 5 {
		t.Fatalf("%d of 25 sends from one connection address refused, want 5 (20 a minute)", limited)
	}
}

func TestBinary_RunsOnPostgres(t *testing.T) {
	p := start(t, "DATABASE_URL="+testkit.PostgresURL(t), "AUTH_SECRET=0123456789abcdef0123456789abcdef")
	signInFlow(t, p, "pg@example.com")
	if _, err := os.Stat(filepath.Join(p.cmd.Dir, "data/auth.db")); !os.IsNotExist(err) {
		t.Fatal("an SQLite file was created although DATABASE_URL was set")
	}
}

// With RATE_LIMIT_STORE=postgres the per-IP counters are in the database's counter table, and the
// service runs on it.
func TestBinary_SharedRateStoreOnPostgres(t *testing.T) {
	p := start(t, "DATABASE_URL="+testkit.PostgresURL(t), "AUTH_SECRET=0123456789abcdef0123456789abcdef", "RATE_LIMIT_STORE=postgres")
	signInFlow(t, p, "shared@example.com")
}

func TestBinary_RefusesBadConfiguration(t *testing.T) {
	cmd := exec.Command(binary)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AUTH_URL=https://auth.example.com", "PORT=nope"}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v", err)
	}
	for _, want := range []string{"PORT:", "AUTH_SECRET:"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("output %q does not name %s", out, want)
		}
	}
}

// A broken e-mail template in EMAIL_TEMPLATES_DIR stops the service before it starts, naming
// the file and the line, with every problem at once.
func TestBinary_RefusesBrokenEmailTemplates(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"sign-in-code.de.html": "<p>Ihr Code:</p>\n<p>{{code}}</p>\n",
		"welcome.txt":          "Welcome to {{site_name\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(binary)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PORT=" + fmt.Sprint(freePort(t)), "EMAIL_TEMPLATES_DIR=" + dir}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	for _, want := range []string{
		"EMAIL_TEMPLATES_DIR: " + filepath.Join(dir, "sign-in-code.de.html") + ":2: {{code}} is not a value of sign-in-code e-mails",
		"EMAIL_TEMPLATES_DIR: " + filepath.Join(dir, "sign-in-code.de.html") + ": has no {{otp}}",
		"EMAIL_TEMPLATES_DIR: " + filepath.Join(dir, "welcome.txt") + ":1:",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
}

// SIGTERM stops accepting connections but finishes a request already being read.
func TestBinary_GracefulShutdownFinishesInFlightRequests(t *testing.T) {
	p := start(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"email":"late@example.com","type":"sign-in"}`
	fmt.Fprintf(conn, "POST /api/auth/email-otp/send-verification-otp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body[:10])
	time.Sleep(100 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(p.url, "http://"), time.Second); err == nil {
		t.Fatal("still accepting connections after SIGTERM")
	}
	io.WriteString(conn, body[10:])
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the in-flight request was cut: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("in-flight request: %d", resp.StatusCode)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

// With SHUTDOWN_DELAY, SIGTERM first only takes the instance out of rotation: /readyz answers
// 503 while requests are still served (a rolling update's new connections are not refused), and
// the process exits once the delay is over.
func TestBinary_ShutdownDelayDrainsBeforeClosing(t *testing.T) {
	p := start(t, "SHUTDOWN_DELAY=3s")
	status := func(path string) int {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatalf("GET %s during the delay: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/readyz"); got != 200 {
		t.Fatalf("/readyz before the signal: %d", got)
	}
	signalled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); status("/readyz") != 503; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("/readyz still ready after SIGTERM")
		}
	}
	if got := status("/healthz"); got != 200 {
		t.Fatalf("/healthz while draining: %d", got)
	}
	resp := p.post(t, "/api/auth/email-otp/send-verification-otp", `{"email":"late@example.com","type":"sign-in"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a sign-in while draining: %d", resp.StatusCode)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after the delay: %v", err)
		}
		if waited := time.Since(signalled); waited < 3*time.Second {
			t.Fatalf("exited %s after SIGTERM, before the 3s delay", waited)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after the delay")
	}
}

// The JSON API as better-auth's own client library sees it: the library, pinned in package.json,
// drives the service binary. Each script of conformance/ (better-auth-client.mjs for the core
// and the email-OTP plugin, one per further plugin or surface) runs against a service of its own.
func TestBetterAuthClientConformance(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat("node_modules/better-auth/package.json")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and node_modules/better-auth are required (scripts/test runs npm ci): %v", err)
		}
		t.Skipf("better-auth client not installed (run npm ci): %v", err)
	}
	scripts, err := filepath.Glob("conformance/*.mjs")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no conformance scripts: %v", err)
	}
	for _, script := range scripts {
		t.Run(filepath.Base(script), func(t *testing.T) {
			// admin.mjs signs in as this address, which the configuration makes an admin.
			p := start(t, "AUTH_ADMIN_EMAILS=conformance-admin@example.com")
			cmd := exec.Command(node, script, p.url, p.console.Name())
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("conformance: %v", err)
			}
		})
	}
}

// `codeauth auth:prune-throttle` and `codeauth auth:purge-accounts` run a scheduled job once.
func TestBinary_JobSubcommands(t *testing.T) {
	for _, db := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(db, func(t *testing.T) {
			cmd := exec.Command(binary, "auth:purge-accounts")
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AUTH_SECRET=0123456789abcdef0123456789abcdef"}
			if db == testkit.Postgres {
				cmd.Env = append(cmd.Env, "DATABASE_URL="+testkit.PostgresURL(t))
			}
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "purged deleted accounts") {
				t.Fatalf("auth:purge-accounts: %v\n%s", err, out)
			}
			cmd = exec.Command(binary, "auth:prune-throttle")
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AUTH_SECRET=0123456789abcdef0123456789abcdef"}
			if db == testkit.Postgres {
				cmd.Env = append(cmd.Env, "DATABASE_URL="+testkit.PostgresURL(t))
			}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "pruned expired rows") || !strings.Contains(string(out), "job=auth:prune-throttle") {
				t.Fatalf("auth:prune-throttle: %v\n%s", err, out)
			}
		})
	}
}

// `codeauth jwt:rotate` rotates the JWT signing key whatever the current one's age: on an empty
// table it makes the first key, then it adds the next; run again before that one signs, it finds
// the rotation under way and adds nothing.
func TestBinary_RotateJWT(t *testing.T) {
	for _, db := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(db, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "AUTH_SECRET=0123456789abcdef0123456789abcdef"}
			if db == testkit.Postgres {
				env = append(env, "DATABASE_URL="+testkit.PostgresURL(t))
			}
			for i, want := range []string{"rotated the JWT signing key", "rotated the JWT signing key", "under way already"} {
				cmd := exec.Command(binary, "jwt:rotate")
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), want) {
					t.Fatalf("jwt:rotate, run %d: %v, want %q in\n%s", i+1, err, want, out)
				}
			}
			// --now replaces both keys (the one signing, the one under way) with one that signs at once.
			cmd := exec.Command(binary, "jwt:rotate", "--now")
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "replaced every JWT signing key") || !strings.Contains(string(out), "removed=2") {
				t.Fatalf("jwt:rotate --now: %v\n%s", err, out)
			}
		})
	}
}

// `codeauth config` prints the option table, which README.md's configuration table must equal
// (config's own test checks the README).
func TestBinary_ConfigPrintsTheOptionTable(t *testing.T) {
	out, err := exec.Command(binary, "config").Output()
	if err != nil {
		t.Fatalf("codeauth config: %v", err)
	}
	if string(out) != config.Markdown() {
		t.Fatalf("codeauth config printed:\n%s\nwant:\n%s", out, config.Markdown())
	}
}

// `codeauth users …` does the admin API's tasks from a shell, on the same rules, each change in
// the audit log with no actor.
func TestBinary_Users(t *testing.T) {
	for _, db := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(db, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "AUTH_SECRET=0123456789abcdef0123456789abcdef", "LOG_LEVEL=warn", "DATA_DIR=" + dir}
			if db == testkit.Postgres {
				env = append(env, "DATABASE_URL="+testkit.PostgresURL(t))
			}
			run := func(args ...string) (string, int) {
				t.Helper()
				cmd := exec.Command(binary, append([]string{"users"}, args...)...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				code := 0
				if exit, ok := err.(*exec.ExitError); ok {
					code = exit.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return string(out), code
			}
			// An account, made by signing in to the service the command shares its database with.
			p := start(t, env[1:]...)
			email := "cli-" + db + "@example.com"
			p.post(t, "/api/auth/email-otp/send-verification-otp", `{"email":"`+email+`","type":"sign-in"}`).Body.Close()
			var otp string
			for i := 0; i < 200 && otp == ""; i++ {
				if m := regexp.MustCompile(`to=` + regexp.QuoteMeta(email) + ` code=(\S+)`).FindStringSubmatch(p.out(&p.stdout)); m != nil {
					otp = m[1]
				}
				time.Sleep(10 * time.Millisecond)
			}
			if resp := p.post(t, "/api/auth/sign-in/email-otp", `{"email":"`+email+`","otp":"`+otp+`"}`); resp.StatusCode != 200 {
				t.Fatalf("sign-in: %d", resp.StatusCode)
			}
			if out, code := run("list", "-search", "cli-"); code != 0 || !strings.Contains(out, email) || !strings.Contains(out, "1 of 1") {
				t.Fatalf("list: %d %s", code, out)
			}
			if out, code := run("show", email); code != 0 || !strings.Contains(out, "session ") {
				t.Fatalf("show: %d %s", code, out)
			}
			if out, code := run("ban", email, "-reason", "spam", "-for", "1h"); code != 0 || !strings.Contains(out, "until ") {
				t.Fatalf("ban: %d %s", code, out)
			}
			if resp := p.post(t, "/api/auth/email-otp/send-verification-otp", `{"email":"`+email+`","type":"sign-in"}`); resp.StatusCode != 200 {
				t.Fatalf("a banned account's send: %d", resp.StatusCode)
			}
			if out, code := run("set-role", email, "admin"); code != 0 || !strings.Contains(out, " admin ") {
				t.Fatalf("set-role: %d %s", code, out)
			}
			if out, code := run("set-role", email, "owner"); code != 1 || !strings.Contains(out, "unknown role") {
				t.Fatalf("set-role owner: %d %s", code, out)
			}
			if out, code := run("unban", email); code != 0 || !strings.Contains(out, " no ") {
				t.Fatalf("unban: %d %s", code, out)
			}
			if out, code := run("show", email); code != 0 || !strings.Contains(out, email) || strings.Contains(out, "session ") {
				t.Fatalf("show after the ban ended its sessions: %d %s", code, out)
			}
			if out, code := run("remove", email); code != 0 || !strings.Contains(out, "remove: done") {
				t.Fatalf("remove: %d %s", code, out)
			}
			if out, code := run("show", "nobody@example.com"); code != 1 || !strings.Contains(out, "no such account") {
				t.Fatalf("show of nobody: %d %s", code, out)
			}
			if out, code := run("list"); code != 0 || !strings.Contains(out, "0 of 0") {
				t.Fatalf("list after the removal: %d %s", code, out)
			}
			if out, code := run("frobnicate", "x"); code != 2 || !strings.Contains(out, "usage") {
				t.Fatalf("an unknown task: %d %s", code, out)
			}
		})
	}
}

// A self-hoster with only an SMTP relay: the binary finds it in SMTP_URL, says so at start, trusts
// its private CA through SSL_CERT_FILE, logs in over STARTTLS and delivers the code, which signs in.
func TestBinary_SignInThroughSMTP(t *testing.T) {
	cert, _ := testkit.RelayCert(t)
	relay := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "relay-secret")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Leaf.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(relay.Addr)
	p := start(t, "SMTP_URL=smtp://acme:relay-secret@localhost:"+port, "EMAIL_FROM=Acme <auth@acme.test>", "SSL_CERT_FILE="+caFile)
	if log := p.out(&p.stderr); !strings.Contains(log, "smtp localhost:"+port+" (STARTTLS, authenticated)") || strings.Contains(log, "relay-secret") {
		t.Fatalf("the start-up log does not name the relay, or names its password:\n%s", log)
	}
	resp := p.post(t, "/api/auth/email-otp/send-verification-otp", `{"email":"self@hoster.test","type":"sign-in"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	var got []testkit.Received
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = relay.Messages()
	}
	if len(got) != 1 || got[0].To != "self@hoster.test" {
		t.Fatalf("the relay took %+v\n%s", got, p.out(&p.stderr))
	}
	code := regexp.MustCompile(`\b\d{6}\b`).FindString(got[0].Msg.Header.Get("Subject"))
	if code == "" || !strings.Contains(got[0].Body, code) {
		t.Fatalf("no code in the subject %q or the body", got[0].Msg.Header.Get("Subject"))
	}
	if strings.Contains(p.out(&p.stdout), code) {
		t.Fatal("with a relay, the code is still written to the console")
	}
	resp = p.post(t, "/api/auth/sign-in/email-otp", `{"email":"self@hoster.test","otp":"`+code+`"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("set-auth-token") == "" {
		t.Fatalf("verify: %d", resp.StatusCode)
	}
}
