package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster is a PostgreSQL server of one test's own, for drills that stop, restart or kill the
// server: the shared server of TEST_DATABASE_URL must never be touched that way. It is made with
// the binaries of the installed PostgreSQL (initdb, pg_ctl), as the postgres user when the test
// runs as root (PostgreSQL refuses to run as root), listens on a free loopback port only, and is
// removed when the test ends.
type Cluster struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	as   string // the user the server runs as, when the test runs as root
}

// NewCluster creates and starts a private cluster. Without PostgreSQL's binaries the test is
// skipped, or fails under CI=true.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL's initdb and pg_ctl are not installed: CI runs the database drills")
		}
		t.Skip("PostgreSQL's initdb and pg_ctl are not installed")
	}
	root, err := os.MkdirTemp("", "codeauth-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	c := &Cluster{t: t, bin: bin, dir: filepath.Join(root, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(c.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = "postgres"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c.run("initdb", "-D", c.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\nfsync = off\n"+
		"max_connections = 100\nshared_buffers = 32MB\nlogging_collector = off\n", c.port)
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(conf)
	f.Close()
	c.Start()
	t.Cleanup(func() { c.pgctl("stop", "-m", "immediate") })
	return c
}

// postgresBin is the folder of the newest installed PostgreSQL's programs, or "".
func postgresBin() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p)
		}
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// URL is the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// command is one of PostgreSQL's programs with args, run as the postgres user when needed.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.as != "" {
		return exec.Command("runuser", append([]string{"-u", c.as, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// run runs one of PostgreSQL's programs and fails the test if it fails.
func (c *Cluster) run(name string, args ...string) {
	c.t.Helper()
	if out, err := c.command(name, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// pgctlArgs are pg_ctl's arguments for action on this cluster: wait for it, log to its folder.
func (c *Cluster) pgctlArgs(action ...string) []string {
	return append([]string{"-D", c.dir, "-w", "-t", "60", "-l", filepath.Join(c.dir, "server.log")}, action...)
}

func (c *Cluster) pgctl(action ...string) {
	c.t.Helper()
	c.run("pg_ctl", c.pgctlArgs(action...)...)
}

// Start starts the server and waits until it accepts connections. After Kill, the killed
// server's backends may take a moment to notice and leave its shared memory, so a refused start
// is tried again for a while.
func (c *Cluster) Start() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.command("pg_ctl", c.pgctlArgs("start")...).CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
			c.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Restart stops the server the way an operator's restart does (fast: open sessions are ended with
// FATAL 57P01) and starts it again.
func (c *Cluster) Restart() { c.t.Helper(); c.pgctl("restart", "-m", "fast") }

// Kill kills the postmaster with SIGKILL, as an out-of-memory killer or a crashed host would; the
// server stays down until Start, which recovers it from its WAL.
func (c *Cluster) Kill() {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		c.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	// The backends notice their postmaster is gone and exit; wait for the port to be free.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.port))
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("the killed server still accepts connections")
}
