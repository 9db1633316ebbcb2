// Package testkit runs the whole service for tests, built by server.New from a configuration that
// config.Load reads, as the binary's is: the real Fiber app on a real loopback listener, over the
// embedded SQLite database or a fresh PostgreSQL schema, with a clock the test moves and a memory
// mailer the test reads codes from.
//
// Its files follow its concerns: the environment (env.go: the service, its databases, the private
// PostgreSQL cluster of cluster.go and the fault proxy of faults.go), the HTTP client (client.go),
// the mailbox (mailbox.go), the fixtures (fixtures.go: clocks, sign-in, counting rows) and the
// fake e-mail provider (provider.go). The attack vectors several packages' tests share are in the
// leaf package testkit/vectors, which the packages below server can import from their own tests.
//
// PostgreSQL comes from TEST_DATABASE_URL (scripts/test creates a fresh database and sets it).
// Without it the PostgreSQL variants are skipped, unless CI=true, where they fail.
package testkit

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/config"
	"codeauth/internal/testdb"
	"codeauth/mail"
	"codeauth/middleware"
	"codeauth/models"
	"codeauth/server"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Dialects the suite runs on.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Secret is the AUTH_SECRET of every test service.
const Secret = "test-secret-0123456789-abcdefghijklmnop"

// SiteName is the SITE_NAME of every test service.
const SiteName = "Codeauth Test"

// Env is one running service.
type Env struct {
	Dialect string
	// Server is the service as server.New built it; DB, Auth and App are its parts.
	Server *server.Server
	DB     *gorm.DB
	Auth   *auth.Service
	App    *fiber.App
	Clock  *Clock
	// Mailer receives the e-mail the outbox delivers; reading it delivers what is due first.
	Mailer *Mailbox
	// URL is the base URL of the listening server, e.g. http://127.0.0.1:41234.
	URL string
	// Logs holds everything the service logged.
	Logs     *SyncBuffer
	t        testing.TB
	client   *http.Client
	requests atomic.Uint64
	// dbURL is the PostgreSQL URL the service connects to, after every Option; "" on SQLite.
	dbURL string
}

// setup is what the Options of one Env change: the environment config.Load reads, the changes to
// the configuration the environment cannot express, and the parts server.Options replaces.
type setup struct {
	env    map[string]string
	adjust []func(*config.Config)
	server server.Options
}

// Option changes the configuration of a service New or Sibling starts.
type Option func(*setup)

// WithSessionMaxAge sets AUTH_SESSION_MAX_AGE.
func WithSessionMaxAge(d time.Duration) Option { return WithEnv("AUTH_SESSION_MAX_AGE", d.String()) }

// WithSecure serves as if AUTH_URL were https (Secure, __Secure- cookies) while the test's
// listener stays plain http.
func WithSecure() Option {
	return func(s *setup) { s.adjust = append(s.adjust, func(c *config.Config) { c.Secure = true }) }
}

// WithTrustedOrigins sets AUTH_TRUSTED_ORIGINS.
func WithTrustedOrigins(origins ...string) Option {
	return WithEnv("AUTH_TRUSTED_ORIGINS", strings.Join(origins, ","))
}

// WithTrustedProxies sets AUTH_TRUSTED_PROXIES.
func WithTrustedProxies(cidrs ...string) Option {
	return WithEnv("AUTH_TRUSTED_PROXIES", strings.Join(cidrs, ","))
}

// WithMaxFailedVerifications sets AUTH_MAX_FAILED_VERIFICATIONS.
func WithMaxFailedVerifications(n int) Option {
	return WithEnv("AUTH_MAX_FAILED_VERIFICATIONS", strconv.Itoa(n))
}

// WithoutEmailChangeLinks sets AUTH_EMAIL_CHANGE_LINK=false.
func WithoutEmailChangeLinks() Option { return WithEnv("AUTH_EMAIL_CHANGE_LINK", "false") }

// WithDeletionGrace sets AUTH_DELETION_GRACE.
func WithDeletionGrace(d time.Duration) Option { return WithEnv("AUTH_DELETION_GRACE", d.String()) }

// WithEnv sets the environment variable name to value for config.Load.
func WithEnv(name, value string) Option { return func(s *setup) { s.env[name] = value } }

// WithRateStore replaces the per-IP store that RATE_LIMIT_STORE selects.
func WithRateStore(store middleware.RateStore) Option {
	return func(s *setup) { s.server.RateStore = store }
}

// WithDatabaseURL has the service connect to PostgreSQL at rewrite's answer for the test's own
// DATABASE_URL: through a DBProxy, or as a role of the test's own (PostgresRole). It changes
// nothing on SQLite.
func WithDatabaseURL(rewrite func(string) string) Option {
	return func(s *setup) {
		if u := s.env["DATABASE_URL"]; u != "" {
			s.env["DATABASE_URL"] = rewrite(u)
		}
	}
}

// WithProvider delivers e-mail through m (a provider client) instead of the memory mailbox.
func WithProvider(m mail.Mailer) Option { return func(s *setup) { s.server.Mailer = m } }

// WithTracer sends the service's spans to tp (an in-memory recorder) instead of an OTLP exporter.
func WithTracer(tp trace.TracerProvider) Option {
	return func(s *setup) { s.server.TracerProvider = tp }
}

// ForEachDB runs fn as a subtest on SQLite and on PostgreSQL.
func ForEachDB(t *testing.T, fn func(t *testing.T, e *Env), opts ...Option) {
	t.Helper()
	for _, d := range []string{SQLite, Postgres} {
		t.Run(d, func(t *testing.T) {
			fn(t, New(t, d, opts...))
		})
	}
}

// New starts a service on dialect with a fresh, migrated database.
func New(t testing.TB, dialect string, opts ...Option) *Env {
	t.Helper()
	e := &Env{Dialect: dialect, Clock: NewClock(Start), Mailer: &Mailbox{Memory: NewMemory()}, Logs: &SyncBuffer{}, t: t}
	switch dialect {
	case SQLite:
	case Postgres:
		e.dbURL = PostgresURL(t)
	default:
		t.Fatalf("unknown dialect %q", dialect)
	}
	e.start(opts, nil)
	return e
}

// Sibling starts a second instance of the service on the same database, clock and mailer, as a
// fleet behind a load balancer would run; opts configure it afresh. On PostgreSQL it has a
// connection pool of its own, like another process (advisory locks belong to connections).
// SQLite serves one process, so the sibling shares the connection.
func (e *Env) Sibling(opts ...Option) *Env {
	e.t.Helper()
	s := &Env{Dialect: e.Dialect, Clock: e.Clock, Mailer: e.Mailer, Logs: e.Logs, t: e.t, dbURL: e.dbURL}
	var shared *models.Store
	if e.dbURL == "" {
		shared = e.Server.Store
	}
	s.start(opts, shared)
	return s
}

// start configures and builds a service with server.New and serves it on a fresh loopback
// listener. shared, when set, is the database it uses rather than opening its own.
func (e *Env) start(opts []Option, shared *models.Store) {
	t := e.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.URL = "http://" + ln.Addr().String()
	// Each record of a request carries its request_id, as the command's log does (main.go).
	log := slog.New(middleware.LogHandler(slog.NewTextHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s := setup{
		env: map[string]string{
			"PORT":        strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
			"AUTH_URL":    e.URL,
			"AUTH_SECRET": Secret,
			"SITE_NAME":   SiteName,
			"DATA_DIR":    t.TempDir(),
		},
		server: server.Options{Logger: log, Now: e.Clock.Now, Mailer: e.Mailer.Memory, Store: shared, NoSchedule: true},
	}
	if e.dbURL != "" {
		s.env["DATABASE_URL"] = e.dbURL
	}
	for _, o := range opts {
		o(&s)
	}
	e.dbURL = s.env["DATABASE_URL"]
	cfg, err := config.Load(func(name string) (string, bool) {
		v, ok := s.env[name]
		return v, ok
	})
	if err != nil {
		ln.Close()
		t.Fatalf("configuration: %v", err)
	}
	for _, f := range s.adjust {
		f(&cfg)
	}
	srv, err := server.New(context.Background(), cfg, s.server)
	if err != nil {
		ln.Close()
		t.Fatalf("starting the service on %s: %v", e.Dialect, err)
	}
	e.Server, e.DB, e.Auth, e.App = srv, srv.Store.DB(), srv.Auth, srv.App
	e.Mailer.addOutbox(srv.Auth.Outbox())
	srv.Start()
	go srv.Serve(ln)
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	e.client = &http.Client{
		Transport:     transport,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			t.Errorf("stopping the service: %v", err)
		}
	})
}

// Admin is a connection to the TEST_DATABASE_URL database as its own user, for what a test does
// to the server around the service: schemas, roles, ending backends (testdb.Admin).
func Admin(t testing.TB) *gorm.DB { return testdb.Admin(t) }

// PostgresURL creates a schema of its own for one test in the TEST_DATABASE_URL database and
// returns a URL whose connections use it; the schema is dropped when the test ends
// (testdb.PostgresURL).
func PostgresURL(t testing.TB) string { return testdb.PostgresURL(t) }

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
