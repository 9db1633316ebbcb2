// Package apptest runs the whole service for tests: the real Fiber app on a real loopback
// listener, over the embedded SQLite database or a fresh PostgreSQL schema, with a clock the test
// moves and a memory mailer the test reads codes from.
//
// PostgreSQL comes from TEST_DATABASE_URL (scripts/test creates a fresh database and sets it).
// Without it the PostgreSQL variants are skipped, unless CI=true, where they fail.
package apptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/handlers"
	"codeauth/mail"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/gofiber/fiber/v2"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialects the suite runs on.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Clock is a settable clock shared by the service and GORM.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t.UTC()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Env is one running service.
type Env struct {
	Dialect string
	DB      *gorm.DB
	Clock   *Clock
	// Mailer receives the e-mail the outbox delivers; reading it delivers what is due first.
	Mailer *Mailbox
	Auth   *auth.Service
	App    *fiber.App
	// URL is the base URL of the listening server, e.g. http://127.0.0.1:41234.
	URL string
	// Logs holds everything the service logged.
	Logs     *SyncBuffer
	t        testing.TB
	client   *http.Client
	requests atomic.Uint64
	dbURL    string
}

// Settings adjust the service an Env runs.
type Settings struct {
	SessionMaxAge          time.Duration
	CookiePrefix           string
	Secure                 bool
	TrustedOrigins         []string
	TrustedProxies         []netip.Prefix
	MaxFailedVerifications int
	RateStore              middleware.RateStore
	NoEmailChangeLinks     bool
	DeletionGrace          time.Duration
	// Provider, when set, receives the e-mail instead of the memory mailbox.
	Provider mail.Mailer
	// DatabaseURL, when set, rewrites the PostgreSQL URL before it is opened.
	DatabaseURL func(string) string
}

// Option changes Settings.
type Option func(*Settings)

// WithSessionMaxAge sets the absolute session cap (AUTH_SESSION_MAX_AGE).
func WithSessionMaxAge(d time.Duration) Option { return func(s *Settings) { s.SessionMaxAge = d } }

// WithSecure serves as if AUTH_URL were https: Secure, __Secure- cookies.
func WithSecure() Option { return func(s *Settings) { s.Secure = true } }

// WithTrustedOrigins sets AUTH_TRUSTED_ORIGINS.
func WithTrustedOrigins(origins ...string) Option {
	return func(s *Settings) { s.TrustedOrigins = origins }
}

// WithTrustedProxies sets AUTH_TRUSTED_PROXIES.
func WithTrustedProxies(cidrs ...string) Option {
	return func(s *Settings) {
		for _, c := range cidrs {
			s.TrustedProxies = append(s.TrustedProxies, netip.MustParsePrefix(c))
		}
	}
}

// WithMaxFailedVerifications sets AUTH_MAX_FAILED_VERIFICATIONS.
func WithMaxFailedVerifications(n int) Option {
	return func(s *Settings) { s.MaxFailedVerifications = n }
}

// WithRateStore replaces the in-memory per-IP store.
func WithRateStore(store middleware.RateStore) Option {
	return func(s *Settings) { s.RateStore = store }
}

// WithoutEmailChangeLinks turns the link-based e-mail change off (AUTH_EMAIL_CHANGE_LINK=false).
func WithoutEmailChangeLinks() Option { return func(s *Settings) { s.NoEmailChangeLinks = true } }

// WithDeletionGrace sets AUTH_DELETION_GRACE.
func WithDeletionGrace(d time.Duration) Option { return func(s *Settings) { s.DeletionGrace = d } }

// WithDatabaseURL has New open PostgreSQL at rewrite's answer for the test's own URL: through a
// DBProxy, or as a role of the test's own (PostgresRole).
func WithDatabaseURL(rewrite func(string) string) Option {
	return func(s *Settings) {
		if prev := s.DatabaseURL; prev != nil {
			s.DatabaseURL = func(u string) string { return rewrite(prev(u)) }
			return
		}
		s.DatabaseURL = rewrite
	}
}

// WithProvider delivers e-mail through m (a provider client) instead of the memory mailbox.
func WithProvider(m mail.Mailer) Option { return func(s *Settings) { s.Provider = m } }

// Start is the fixed time every test clock starts at.
var Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

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
	clock := NewClock(Start)
	logs := &SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	dbOpts := models.Options{Now: clock.Now, Logger: log}
	switch dialect {
	case SQLite:
		dbOpts.SQLitePath = filepath.Join(t.TempDir(), "auth.db")
	case Postgres:
		dbOpts.DatabaseURL = PostgresURL(t)
		var settings Settings
		for _, o := range opts {
			o(&settings)
		}
		if settings.DatabaseURL != nil {
			dbOpts.DatabaseURL = settings.DatabaseURL(dbOpts.DatabaseURL)
		}
	default:
		t.Fatalf("unknown dialect %q", dialect)
	}
	ctx := context.Background()
	db, err := models.Open(ctx, dbOpts)
	if err != nil {
		t.Fatalf("opening %s: %v", dialect, err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := models.Migrate(ctx, db); err != nil {
		t.Fatalf("migrating %s: %v", dialect, err)
	}
	e := &Env{Dialect: dialect, DB: db, Clock: clock, Mailer: &Mailbox{Memory: mail.NewMemory()}, Logs: logs, t: t, dbURL: dbOpts.DatabaseURL}
	e.start(opts)
	return e
}

// Sibling starts a second instance of the service on the same database, clock and mailer, as a
// fleet behind a load balancer would run. On PostgreSQL it has a connection pool of its own, like
// another process (advisory locks belong to connections). SQLite serves one process, so the
// sibling shares the connection.
func (e *Env) Sibling(opts ...Option) *Env {
	e.t.Helper()
	s := &Env{Dialect: e.Dialect, DB: e.DB, Clock: e.Clock, Mailer: e.Mailer, Logs: e.Logs, t: e.t, dbURL: e.dbURL}
	if e.dbURL != "" {
		db, err := models.Open(context.Background(), models.Options{DatabaseURL: e.dbURL, Now: e.Clock.Now,
			Logger: slog.New(slog.NewTextHandler(e.Logs, nil))})
		if err != nil {
			e.t.Fatalf("opening a second pool: %v", err)
		}
		sqlDB, _ := db.DB()
		e.t.Cleanup(func() { sqlDB.Close() })
		s.DB = db
	}
	s.start(opts)
	return s
}

// testSecret is the AUTH_SECRET of every test service.
var testSecret = []byte("test-secret-0123456789-abcdefghijklmnop")

// start runs an auth service and the app for e on a fresh loopback listener.
func (e *Env) start(opts []Option) {
	t := e.t
	settings := Settings{SessionMaxAge: 365 * 24 * time.Hour, CookiePrefix: "auth"}
	for _, o := range opts {
		o(&settings)
	}
	log := slog.New(slog.NewTextHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.URL = "http://" + ln.Addr().String()
	var mailer mail.Mailer = e.Mailer.Memory
	if settings.Provider != nil {
		mailer = settings.Provider
	}
	svc, err := auth.New(auth.Options{
		DB: e.DB, Mailer: mailer, Secret: testSecret,
		SessionMaxAge: settings.SessionMaxAge, MaxFailedVerifications: settings.MaxFailedVerifications,
		SiteName: "Codeauth Test", SiteURL: e.URL, EmailChangeLinks: !settings.NoEmailChangeLinks,
		DeletionGrace: settings.DeletionGrace, Now: e.Clock.Now, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Mailer.addOutbox(svc.Outbox())
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		svc.Outbox().Run(workerCtx)
	}()
	t.Cleanup(func() {
		stopWorker()
		<-workerDone
	})
	app := handlers.NewApp(handlers.Deps{
		Auth: svc, Secret: testSecret, BaseURL: e.URL, TrustedOrigins: settings.TrustedOrigins, TrustedProxies: settings.TrustedProxies,
		RateStore: settings.RateStore, Now: e.Clock.Now,
		CookiePrefix: settings.CookiePrefix, Secure: settings.Secure, SiteName: "Codeauth Test", Ready: func(ctx context.Context) error { return models.Ready(ctx, e.DB) }, Logger: log,
	})
	go app.Listener(ln)
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	e.client = &http.Client{
		Transport:     transport,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		if err := app.ShutdownWithTimeout(5 * time.Second); err != nil {
			t.Errorf("shutting the app down: %v", err)
		}
	})
	e.Auth, e.App = svc, app
}

var (
	adminOnce sync.Once
	adminDB   *gorm.DB
	adminErr  error
)

// postgresBase is TEST_DATABASE_URL. Without it the test is skipped, or fails under CI=true.
func postgresBase(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is not set: CI runs every test on PostgreSQL too (use scripts/test)")
		}
		t.Skip("TEST_DATABASE_URL is not set; run scripts/test to include PostgreSQL")
	}
	return base
}

// Admin is a connection to the TEST_DATABASE_URL database as its own user, for what a test does
// to the server around the service: schemas, roles, ending backends.
func Admin(t testing.TB) *gorm.DB {
	t.Helper()
	base := postgresBase(t)
	adminOnce.Do(func() {
		adminDB, adminErr = gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	})
	if adminErr != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", adminErr)
	}
	return adminDB
}

// PostgresURL creates a schema of its own for one test in the TEST_DATABASE_URL database and
// returns a URL whose connections use it. The schema is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := postgresBase(t)
	admin := Admin(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

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

// Request describes one HTTP request to the service.
type Request struct {
	Method string
	Path   string
	// JSON is marshalled as the body when Body is empty.
	JSON any
	// Body is sent as is.
	Body        string
	ContentType string
	Header      http.Header
	Cookies     []*http.Cookie
	// SameClient sends no X-Forwarded-For, so the request comes from the connection's address.
	SameClient bool
}

// Response is an HTTP answer with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Cookies are the Set-Cookie headers of the answer.
	Cookies []*http.Cookie
}

// Do sends r and reads the answer.
func (e *Env) Do(r Request) *Response {
	e.t.Helper()
	body := r.Body
	ct := r.ContentType
	if body == "" && r.JSON != nil {
		b, err := json.Marshal(r.JSON)
		if err != nil {
			e.t.Fatal(err)
		}
		body = string(b)
		if ct == "" {
			ct = "application/json"
		}
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequest(method, e.URL+r.Path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if _, set := r.Header["X-Forwarded-For"]; !set && !r.SameClient {
		// Each request comes from its own address, as from many users, so tests that are not
		// about the per-IP limits do not trip them. Tests of those limits set the header.
		n := e.requests.Add(1)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", n/250%250, n%250+1))
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for _, c := range r.Cookies {
		req.AddCookie(c)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, r.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Cookies: resp.Cookies()}
	if rec := recorder.Load(); rec != nil && strings.HasPrefix(r.Path, "/api/") {
		path, _, _ := strings.Cut(r.Path, "?")
		(*rec)(Recorded{Method: method, Path: path, Status: out.Status, ContentType: resp.Header.Get("Content-Type"), Body: b})
	}
	return out
}

// Recorded is one API answer a test received.
type Recorded struct {
	Method, Path, ContentType string
	Status                    int
	Body                      []byte
}

var recorder atomic.Pointer[func(Recorded)]

// RecordResponses has every /api answer of the test binary passed to f (the OpenAPI check).
func RecordResponses(f func(Recorded)) { recorder.Store(&f) }

// Post sends a JSON body to path.
func (e *Env) Post(path string, body any, header ...string) *Response {
	e.t.Helper()
	return e.Do(Request{Method: http.MethodPost, Path: path, JSON: body, Header: headers(header)})
}

// Get requests path with the given header pairs.
func (e *Env) Get(path string, header ...string) *Response {
	e.t.Helper()
	return e.Do(Request{Method: http.MethodGet, Path: path, Header: headers(header)})
}

func headers(pairs []string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

// Cookie returns the Set-Cookie of the answer named name, or nil.
func (r *Response) Cookie(name string) *http.Cookie {
	for _, c := range r.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RawSetCookie returns the raw Set-Cookie header for name, or "".
func (r *Response) RawSetCookie(name string) string {
	for _, v := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, name+"=") {
			return v
		}
	}
	return ""
}

// SendCode asks for a sign-in code for email and returns it from the mailer.
func (e *Env) SendCode(email string) string {
	e.t.Helper()
	r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": email, "type": "sign-in"})
	if r.Status != http.StatusOK {
		e.t.Fatalf("send code for %q: status %d, body %s", email, r.Status, r.Body)
	}
	canonical, err := auth.NormalizeEmail(email)
	if err != nil {
		e.t.Fatalf("normalizing %q: %v", email, err)
	}
	code := e.Mailer.LastCode(canonical)
	if code == "" {
		e.t.Fatalf("no code was sent to %s", canonical)
	}
	return code
}

// Session is a signed-in client.
type Session struct {
	// Token is the raw token of the sign-in body.
	Token string
	// Bearer is the set-auth-token value.
	Bearer string
	// TokenCookie and DataCookie are the session cookies a browser would keep.
	TokenCookie, DataCookie *http.Cookie
	UserID                  string
	Response                *Response
}

// Cookies returns the cookies a browser would send.
func (s Session) Cookies() []*http.Cookie {
	var out []*http.Cookie
	for _, c := range []*http.Cookie{s.TokenCookie, s.DataCookie} {
		if c != nil {
			out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	return out
}

// SignIn requests a code for email and verifies it, failing the test unless it succeeds.
func (e *Env) SignIn(email string) Session {
	e.t.Helper()
	code := e.SendCode(email)
	r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code})
	if r.Status != http.StatusOK {
		e.t.Fatalf("sign in %q: status %d, body %s", email, r.Status, r.Body)
	}
	var body struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		e.t.Fatalf("sign-in body: %v", err)
	}
	return Session{
		Token: body.Token, Bearer: r.Header.Get("set-auth-token"), UserID: body.User.ID,
		TokenCookie: r.Cookie("auth.session_token"), DataCookie: r.Cookie("auth.session_data"), Response: r,
	}
}

// Count returns the number of rows of model matching the optional condition.
func (e *Env) Count(model any, where ...any) int64 {
	e.t.Helper()
	q := e.DB.Model(model)
	if len(where) > 0 {
		q = q.Where(where[0], where[1:]...)
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatalf("counting: %v", err)
	}
	return n
}

// Decode unmarshals the answer's JSON body into v, failing the test when it is not JSON.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// ExpectError fails the test unless the answer is status with the JSON error body of code.
func (r *Response) ExpectError(t testing.TB, status int, code string) {
	t.Helper()
	var body struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	if r.Status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.Status, status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %s", r.Body)
	}
	if body.Code != code || body.Message == "" {
		t.Fatalf("error body = %s, want code %s with a message", r.Body, code)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type = %q, want application/json", ct)
	}
}

// Mailbox is the memory mailer of a test, for one or more instances. Reading it first delivers
// every e-mail that is due from their outboxes, so a test can read a code right after the
// request that queued it.
type Mailbox struct {
	*mail.Memory
	mu       sync.Mutex
	outboxes []*mail.Outbox
}

func (m *Mailbox) addOutbox(o *mail.Outbox) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outboxes = append(m.outboxes, o)
}

// Flush delivers every due e-mail of every instance now, waiting for messages a background
// worker is already delivering.
func (m *Mailbox) Flush() {
	m.mu.Lock()
	outboxes := append([]*mail.Outbox(nil), m.outboxes...)
	m.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for _, o := range outboxes {
		for {
			o.DeliverDue(context.Background())
			if n, err := o.Due(context.Background()); err != nil || n == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// Messages returns every message delivered so far.
func (m *Mailbox) Messages() []mail.Message {
	m.Flush()
	return m.Memory.Messages()
}

// Find returns the messages of kind delivered to the address to, oldest first.
func (m *Mailbox) Find(kind mail.Kind, to string) []mail.Message {
	m.Flush()
	return m.Memory.Find(kind, to)
}

// Last returns the newest message of kind delivered to the address to.
func (m *Mailbox) Last(kind mail.Kind, to string) mail.Message {
	m.Flush()
	return m.Memory.Last(kind, to)
}

// LastCode returns the newest sign-in code delivered to the address to.
func (m *Mailbox) LastCode(to string) string {
	m.Flush()
	return m.Memory.LastCode(to)
}
