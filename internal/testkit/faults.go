package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testdb"
)

// DBProxy is a TCP proxy between a service and PostgreSQL that a test can break, to drill what
// the service does when its database goes away: it can refuse new connections and cut the live
// ones (a server stopped or killed, a network partition), or cut a connection right after the
// server committed a transaction, before the client hears so (an acknowledgement lost).
type DBProxy struct {
	t      testing.TB
	target string
	addr   string

	mu          sync.Mutex
	ln          net.Listener
	conns       map[net.Conn]net.Conn // client side → server side
	cutOnCommit bool
	downOnCut   bool
	cuts        int
	// hung, while open, holds every byte either way (Hang): a server stopped with SIGSTOP, or a
	// network that drops packets. A closed channel lets them through.
	hung chan struct{}
}

// NewDBProxy starts a proxy to the PostgreSQL server of TEST_DATABASE_URL.
func NewDBProxy(t testing.TB) *DBProxy {
	t.Helper()
	base := testdb.Base(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := &DBProxy{t: t, target: target, conns: map[net.Conn]net.Conn{}, hung: make(chan struct{})}
	close(p.hung)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

// Rewrite returns databaseURL with the proxy as its host: an Option for New (WithDatabaseURL).
func (p *DBProxy) Rewrite(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		p.t.Fatalf("database URL: %v", err)
	}
	u.Host = p.addr
	return u.String()
}

func (p *DBProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // went down meanwhile
				p.mu.Unlock()
				client.Close()
				server.Close()
				return
			}
			p.conns[client] = server
			p.mu.Unlock()
			go p.pipe(client, server, false)
			go p.pipe(server, client, true)
		}
	}()
}

// commandCompleteCommit is the server's CommandComplete message for a COMMIT: 'C', its length
// (4 + 7) and the tag.
var commandCompleteCommit = []byte{'C', 0, 0, 0, 11, 'C', 'O', 'M', 'M', 'I', 'T', 0}

// pipe copies from src to dst until either side closes. From the server (fromServer), when a cut
// after a commit is armed, the answer to the COMMIT and everything after it are dropped and the
// connection is cut: the server has committed, the client never hears it.
func (p *DBProxy) pipe(src, dst net.Conn, fromServer bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if fromServer {
				if i := bytes.Index(chunk, commandCompleteCommit); i >= 0 {
					if cut, down := p.takeCut(); cut {
						dst.Write(chunk[:i])
						if down {
							// Every other way to the server closes before the client can notice the
							// cut (this connection ends last), so it cannot ask again.
							p.down(dst)
						}
						src.Close()
						dst.Close()
						return
					}
				}
			}
			p.mu.Lock()
			hung := p.hung
			p.mu.Unlock()
			<-hung
			if _, werr := dst.Write(chunk); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}

// takeCut reports, once per arming, that the connection must be cut, and whether the proxy must
// go down with it.
func (p *DBProxy) takeCut() (cut, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cutOnCommit {
		return false, false
	}
	p.cutOnCommit = false
	p.cuts++
	down, p.downOnCut = p.downOnCut, false
	return true, down
}

// CutAfterCommit arms the proxy: the next connection on which the server answers a COMMIT is cut
// just before that answer reaches the client. With down, the proxy also goes down at that moment,
// so the client cannot ask again until Up.
func (p *DBProxy) CutAfterCommit(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOnCommit, p.downOnCut = true, down
}

// Cuts counts the connections cut after a commit so far.
func (p *DBProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Down refuses new connections and cuts every live one, as a stopped or killed server does.
func (p *DBProxy) Down() {
	p.Resume() // what a hang held goes nowhere now
	p.down(nil)
}

// Hang holds everything either way, on the connections open and on new ones, which connect but
// hear nothing: a database stopped without closing anything, or a network that drops packets.
func (p *DBProxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.hung:
		p.hung = make(chan struct{})
	default: // hung already
	}
}

// Resume lets through what Hang held, and everything after it.
func (p *DBProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.hung:
	default:
		close(p.hung)
	}
}

// down is Down, which cuts the client connection last, if it is one of the proxy's, after all
// the others.
func (p *DBProxy) down(last net.Conn) {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := p.conns
	p.conns = map[net.Conn]net.Conn{}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for client, server := range conns {
		if client != last {
			client.Close()
			server.Close()
		}
	}
	if server, ok := conns[last]; ok {
		last.Close()
		server.Close()
	}
}

// Up accepts connections again, on the same address.
func (p *DBProxy) Up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("the proxy cannot listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// PostgresRole creates a PostgreSQL role of its own for one test, which a test can make
// read-only (ALTER ROLE … SET default_transaction_read_only) without touching the shared server
// or other tests, and returns an Option that makes New connect as it. The role owns the test's
// schema; both go when the test ends.
func PostgresRole(t testing.TB) (role string, opt Option) {
	t.Helper()
	admin := Admin(t)
	b := make([]byte, 6)
	rand.Read(b)
	role = "r_" + hex.EncodeToString(b)
	if err := admin.Exec("CREATE ROLE " + role + " LOGIN").Error; err != nil {
		t.Fatalf("creating a role: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ?", role)
		admin.Exec("DROP OWNED BY " + role + " CASCADE")
		admin.Exec("DROP ROLE IF EXISTS " + role)
	})
	return role, WithDatabaseURL(func(databaseURL string) string {
		u, err := url.Parse(databaseURL)
		if err != nil {
			t.Fatalf("database URL: %v", err)
		}
		schema := u.Query().Get("search_path")
		if schema == "" {
			// Behind a pooler the schema is its own role's, named as the role (internal/testdb),
			// and the search_path comes with the role, not the URL.
			schema = u.User.Username()
			if err := admin.Exec("ALTER ROLE " + role + " SET search_path = " + schema).Error; err != nil {
				t.Fatalf("giving the role the schema's search_path: %v", err)
			}
		}
		if err := admin.Exec("ALTER SCHEMA " + schema + " OWNER TO " + role).Error; err != nil {
			t.Fatalf("giving the schema to the role: %v", err)
		}
		u.User = url.User(role)
		return u.String()
	})
}

// TerminateBackendsOfOldSettings ends every connection of role that may still run with the
// role's settings as they were before a change that committed just before the call (ALTER ROLE …
// SET): each started before the change. A backend reads its role's settings before it shows in
// pg_stat_activity under its role, so one that started just before the change may show only
// moments later: the backends are looked for again until none that started before the change
// has shown for 200 ms.
func TerminateBackendsOfOldSettings(t testing.TB, role string) {
	t.Helper()
	var changed time.Time
	if err := Admin(t).Raw("SELECT clock_timestamp()").Scan(&changed).Error; err != nil {
		t.Fatalf("reading the server's clock: %v", err)
	}
	quiet := time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Since(quiet) < 200*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("backends of %s that started before the change keep showing", role)
		}
		if terminate(t, "usename = ? AND backend_start <= ?", role, changed) > 0 {
			quiet = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TerminateBackends ends, from the server's side, every connection of role (pg_terminate_backend:
// the backend sends FATAL 57P01, as in a restart), and reports how many it ended.
func TerminateBackends(t testing.TB, role string) int {
	t.Helper()
	return terminate(t, "usename = ?", role)
}

// terminate ends the backends pg_stat_activity lists where the condition holds, waits until each
// has exited, and reports how many it ended. Without the wait (pg_terminate_backend only signals)
// a busy machine lets a request run on a connection whose backend is still on its way out, and
// the test races the server instead of testing the service.
func terminate(t testing.TB, where string, args ...any) int {
	t.Helper()
	admin := Admin(t)
	var pids []int
	if err := admin.Raw("SELECT pid FROM pg_stat_activity WHERE "+where, args...).Scan(&pids).Error; err != nil {
		t.Fatalf("listing backends: %v", err)
	}
	if len(pids) == 0 {
		return 0
	}
	for _, pid := range pids {
		// False when the backend was gone already, or is still there after the 10 s: the count
		// below tells which.
		if err := admin.Exec("SELECT pg_terminate_backend(?, 10000)", pid).Error; err != nil {
			t.Fatalf("terminating backend %d: %v", pid, err)
		}
	}
	var left int64
	if err := admin.Raw("SELECT count(*) FROM pg_stat_activity WHERE pid IN ?", pids).Scan(&left).Error; err != nil {
		t.Fatalf("listing backends: %v", err)
	}
	if left > 0 {
		t.Fatalf("%d terminated backends did not exit within 10 s", left)
	}
	return len(pids)
}
