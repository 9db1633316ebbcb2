// Package server builds the service from its configuration, in one place used by the command
// and by the tests alike: storage, mailer, the auth service, the HTTP app, the outbox workers and
// the scheduled jobs, and the shutdown that stops them in an order that loses nothing.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served on DEBUG_PPROF_ADDR only
	"os"
	"sync"
	"sync/atomic"
	"time"

	"codeauth/auth"
	"codeauth/config"
	"codeauth/handlers"
	"codeauth/mail"
	"codeauth/metrics"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ShutdownTimeout bounds how long in-flight requests may take to finish once Close is called.
const ShutdownTimeout = 20 * time.Second

// Options are what a Server takes besides its configuration: the parts a test replaces. The zero
// value is the production service.
type Options struct {
	// Logger receives the service's log; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the service, its database and its per-IP windows; nil means time.Now.
	// Tests pass a clock they move.
	Now func() time.Time
	// Mailer delivers e-mail instead of the mailer the configuration selects: a test's memory
	// mailbox, or a provider client pointed at a fake provider.
	Mailer mail.Mailer
	// Store, when set, is an opened storage used instead of opening the configured database,
	// and left open by Close: a second instance in one process on SQLite, which serves a process
	// through one connection.
	Store *models.Store
	// RateStore replaces the store of the per-IP counters that RATE_LIMIT_STORE selects.
	RateStore middleware.RateStore
	// TracerProvider, when set, receives the spans instead of the OTLP exporter the
	// configuration selects: a test's in-memory recorder.
	TracerProvider trace.TracerProvider
	// OneShot is a command that runs once and exits (users, jwt:rotate, a job): it does not listen
	// on METRICS_ADDR, which the running service holds.
	OneShot bool
	// NoSchedule leaves the scheduled jobs out of Start. They run on the wall clock, so in a test
	// they would prune rows under it at moments it does not choose; tests run jobs themselves.
	NoSchedule bool
}

// Server is the whole service built from one configuration.
type Server struct {
	// Config is the configuration it was built from.
	Config config.Config
	// Store is the storage: the database, opened and migrated.
	Store *models.Store
	// Auth is the domain service.
	Auth *auth.Service
	// App is the HTTP application.
	App *fiber.App
	// Scheduler runs the jobs of Auth under locks shared across instances.
	Scheduler *Scheduler
	// Metrics are the Prometheus metrics, served on METRICS_ADDR; nil when it is not set.
	Metrics *metrics.Metrics

	log        *slog.Logger
	noSchedule bool
	ownStore   bool
	// mailer is the transport the outbox delivers through, named in the start-up log and closed
	// (its idle connections) by release.
	mailer mail.Mailer

	// draining is set by Drain: /readyz answers 503 while requests are still served.
	draining atomic.Bool

	mu         sync.Mutex
	started    bool
	closed     bool
	listeners  []net.Listener
	stopJobs   context.CancelFunc
	jobsDone   sync.WaitGroup
	stopWorker context.CancelFunc
	workerDone chan struct{}
	// tracer is the tracer provider (nil: no tracing); stopTracing flushes and stops the one New
	// made for the OTLP exporter.
	tracer      trace.TracerProvider
	stopTracing func(context.Context) error
	// metricsLn is METRICS_ADDR's listener, opened by New so that a bad address fails at once;
	// metricsSrv serves it from Start.
	metricsLn  net.Listener
	metricsSrv *http.Server
}

// Migrate brings the configured database's schema up to date, and closes it: the migrate
// command.
func Migrate(ctx context.Context, cfg config.Config, opts Options) error {
	store, err := open(ctx, cfg, opts, nil)
	if err != nil {
		return err
	}
	return store.Close()
}

// open opens the configured database and brings its schema up to date, tracing its round trips
// under tp when it is not nil.
func open(ctx context.Context, cfg config.Config, opts Options, tp trace.TracerProvider) (*models.Store, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return models.OpenStore(ctx, models.Options{
		DatabaseURL: cfg.DatabaseURL,
		SQLitePath:  cfg.SQLitePath(),
		Now:         func() time.Time { return now().UTC() },
		Logger:      opts.Logger,
		Tracer:      tp,
	})
}

// New builds the service that cfg describes: it opens and migrates the database (unless
// opts.Store is given), and builds the mailer, the auth service, the per-IP rate store and the HTTP
// app. Nothing runs until Start and Serve; Close releases what New opened, also when Start and
// Serve were never called.
func New(ctx context.Context, cfg config.Config, opts Options) (_ *Server, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{Config: cfg, Store: opts.Store, log: log, noSchedule: opts.NoSchedule}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if s.tracer, s.stopTracing, err = tracing(ctx, cfg, opts); err != nil {
		return nil, err
	}
	if s.Store == nil {
		if s.Store, err = open(ctx, cfg, opts, s.tracer); err != nil {
			return nil, fmt.Errorf("database unavailable: %w", err)
		}
		s.ownStore = true
	}
	mailer := opts.Mailer
	if mailer == nil {
		if mailer, err = mail.New(mail.ProviderConfig{APIKey: cfg.EmailProviderAPIKey, From: cfg.EmailFrom, BaseURL: cfg.EmailProviderURL, SMTPURL: cfg.SMTPURL}, os.Stdout); err != nil {
			return nil, fmt.Errorf("no mailer: %w", err)
		}
	}
	s.mailer = mailer
	var hooks *mail.Webhooks
	if len(cfg.WebhookURLs) > 0 {
		if hooks, err = mail.NewWebhooks(cfg.WebhookURLs, cfg.WebhookSecret, opts.Now); err != nil {
			return nil, err
		}
	}
	s.Auth, err = auth.New(auth.Options{
		Webhooks:               hooks,
		Store:                  s.Store,
		Mailer:                 mailer,
		Secret:                 cfg.Secret,
		SessionMaxAge:          cfg.SessionMaxAge,
		MaxFailedVerifications: cfg.MaxFailedVerifications,
		SiteName:               cfg.SiteName,
		SiteURL:                cfg.BaseURL,
		DefaultLocale:          cfg.DefaultLocale,
		EmailTemplates:         cfg.EmailTemplates,
		EmailChangeLinks:       cfg.EmailChangeLinks,
		DeletionGrace:          cfg.DeletionGrace,
		JWT:                    auth.JWTOptions{Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Rotation: cfg.JWTRotation},
		AdminEmails:            cfg.AdminEmails,
		NewDeviceNotice:        cfg.NewDeviceNotice,
		SignInLinks:            cfg.SignInLinks,
		SignUp:                 cfg.SignUp,
		AuditRetention:         cfg.AuditRetention,
		Now:                    opts.Now,
		Logger:                 log,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the auth service: %w", err)
	}
	rateStore := opts.RateStore
	if rateStore == nil && cfg.RateLimitStore == "postgres" {
		store := s.Store
		rateStore = middleware.NewSharedRateStore(func(ctx context.Context, key string, resetAt, now time.Time) (int, time.Time, error) {
			c, err := store.Count(ctx, models.Count{Key: key, ResetAt: resetAt, Now: now})
			return c.Count, c.ResetAt, err
		})
	}
	var observer middleware.Observer
	if cfg.MetricsAddr != "" && !opts.OneShot {
		if s.metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("METRICS_ADDR: %w", err)
		}
		s.Metrics = metrics.New(metrics.Sources{Auth: s.Auth, Store: s.Store, Logger: log, Now: opts.Now})
		observer = s.Metrics
	}
	s.App = handlers.NewApp(handlers.Deps{
		Auth:           s.Auth,
		Secret:         cfg.Secret,
		BaseURL:        cfg.BaseURL,
		TrustedOrigins: cfg.TrustedOrigins,
		TrustedProxies: cfg.TrustedProxies,
		NoProxy:        cfg.NoProxy,
		RateStore:      rateStore,
		Now:            opts.Now,
		CookiePrefix:   cfg.CookiePrefix,
		Secure:         cfg.Secure,
		SiteName:       cfg.SiteName,
		PrivacyURL:     cfg.PrivacyURL,
		TermsURL:       cfg.TermsURL,
		DefaultLocale:  cfg.DefaultLocale,
		Ready:          s.ready,
		Logger:         log,
		Observer:       observer,
		Tracer:         s.tracer,
	})
	s.Scheduler = NewScheduler(s.Store, log)
	return s, nil
}

// Jobs are the service's scheduled jobs: the prune and the JWT key rotation, then the nightly
// ones.
func (s *Server) Jobs() []auth.Job {
	return append([]auth.Job{s.Auth.PruneJob(), s.Auth.RotateJWTKeyJob(false)}, s.Auth.NightlyJobs()...)
}

// Start runs the background work: the outbox workers, the scheduled jobs (unless
// Options.NoSchedule) and, when DEBUG_PPROF_ADDR is set, the profiler. It returns at once; Close
// stops them.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	// The worker has a context of its own: Close stops it after the in-flight requests, so it
	// still delivers what they queue, and lets it finish the message it is sending.
	workerCtx, stopWorker := context.WithCancel(context.Background())
	s.stopWorker, s.workerDone = stopWorker, make(chan struct{})
	go func() {
		defer close(s.workerDone)
		s.Auth.Outbox().Run(workerCtx)
	}()
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	s.stopJobs = stopJobs
	if !s.noSchedule {
		s.jobsDone.Add(3)
		go func() {
			defer s.jobsDone.Done()
			s.Scheduler.RunEvery(jobsCtx, PruneInterval, s.Auth.PruneJob())
		}()
		go func() {
			defer s.jobsDone.Done()
			// A look at a table of two or three rows: a rotation is due at most one interval late.
			s.Scheduler.RunEvery(jobsCtx, PruneInterval, s.Auth.RotateJWTKeyJob(false))
		}()
		go func() {
			defer s.jobsDone.Done()
			s.Scheduler.RunNightly(jobsCtx, s.Auth.NightlyJobs())
		}()
	}
	if s.metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.Metrics.Handler())
		s.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			s.log.Info("metrics listening", "addr", s.metricsLn.Addr().String())
			if err := s.metricsSrv.Serve(s.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("metrics stopped", "error", err)
			}
		}()
	}
	if addr := s.Config.PprofAddr; addr != "" {
		// Profiling, on a loopback address of its own, only when asked for.
		go func() {
			s.log.Info("profiler listening", "addr", addr)
			if err := http.ListenAndServe(addr, nil); err != nil {
				s.log.Error("profiler stopped", "error", err)
			}
		}()
	}
}

// Serve answers HTTP requests on ln until Close, or until the listener fails.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return errors.New("server: serving after Close")
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	if !s.Config.ProxySet() && !loopbackOnly(ln.Addr()) {
		s.log.Warn("AUTH_TRUSTED_PROXIES is not set and the service can be reached from other hosts: a single " +
			"X-Forwarded-For or X-Real-IP is taken as the client's address, which is right behind one proxy that " +
			"sets it but lets a client that connects directly choose its own rate-limit bucket; set " +
			"AUTH_TRUSTED_PROXIES=" + config.NoProxy + " when clients connect directly, or list your proxies")
	}
	database := "sqlite " + s.Config.SQLitePath()
	if s.Config.UsesPostgres() {
		database = "postgres"
	}
	served := make(chan error, 1)
	go func() { served <- s.App.Listener(ln) }()
	s.log.Info("listening", "url", s.Config.BaseURL, "port", s.Config.Port, "database", database, "mail", mail.Describe(s.mailer))
	return <-served
}

// errDraining is why an instance told to stop is not ready (Drain).
var errDraining = errors.New("shutting down")

// ready is what /readyz checks: the database takes writes, and the instance is not draining.
func (s *Server) ready(ctx context.Context) error {
	if s.draining.Load() {
		return errDraining
	}
	return s.Store.Ready(ctx)
}

// Drain makes /readyz answer 503 from now on while everything else is served as before: the
// first step of a shutdown (SHUTDOWN_DELAY), so that load balancers stop sending requests before
// Close stops taking them.
func (s *Server) Drain() { s.draining.Store(true) }

// Close stops the service in the order that loses nothing: the scheduled jobs are told to stop,
// the listener stops taking requests and the in-flight ones finish (within ShutdownTimeout), the
// outbox workers stop (a delivery still in flight is cut off and goes out again later, from any
// instance, once its lease runs out; those done are recorded first), the jobs return, and then the
// shared rate store and the database close. A shutdown that runs out of time is not an error: the requests
// still running are cut, as they would be by any stop.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	listeners := s.listeners
	s.mu.Unlock()
	if s.stopJobs != nil {
		s.stopJobs()
	}
	var err error
	if len(listeners) > 0 {
		if e := s.App.ShutdownWithTimeout(ShutdownTimeout); e != nil && !errors.Is(e, context.DeadlineExceeded) {
			err = fmt.Errorf("server: shutting the listener down: %w", e)
		}
		// A Serve that had not yet handed its listener to the app when the app shut down would
		// otherwise serve on; closing the listener ends it. Closing it twice is harmless.
		for _, ln := range listeners {
			ln.Close()
		}
	}
	if s.stopWorker != nil {
		s.stopWorker()
		<-s.workerDone
	}
	s.jobsDone.Wait()
	s.release()
	return err
}

// MetricsAddr is the address the metrics listen on, or "" without METRICS_ADDR.
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// release closes the metrics listener, the shared rate store, and the database when the server
// opened it, and flushes the spans not yet exported.
func (s *Server) release() {
	if s.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		if err := s.stopTracing(ctx); err != nil {
			s.log.Warn("flushing the traces failed", "error", err)
		}
		cancel()
	}
	if s.metricsSrv != nil {
		s.metricsSrv.Close()
	} else if s.metricsLn != nil {
		s.metricsLn.Close()
	}
	if c, ok := s.mailer.(io.Closer); ok {
		c.Close()
	}
	if s.ownStore && s.Store != nil {
		s.Store.Close()
	}
}

// tracingFlushTimeout bounds how long Close waits for the last spans to reach the collector.
const tracingFlushTimeout = 5 * time.Second

// tracing returns the tracer provider: the test's, or with an OTLP endpoint configured (and the
// SDK not disabled) one that batches spans to it over OTLP/HTTP, with the function that flushes
// and stops it; without either, nil, and nothing is traced. The exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables itself, and the provider OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER.
func tracing(ctx context.Context, cfg config.Config, opts Options) (trace.TracerProvider, func(context.Context) error, error) {
	if opts.TracerProvider != nil {
		return opts.TracerProvider, nil, nil
	}
	if !cfg.TracingOn() {
		return nil, nil, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", serviceName())))
	if err != nil {
		return nil, nil, fmt.Errorf("the trace resource: %w", err)
	}
	if envRes, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, envRes); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// serviceName is OTEL_SERVICE_NAME, or "codeauth".
func serviceName() string {
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		return name
	}
	return "codeauth"
}

// loopbackOnly reports whether a listener accepts connections from this host only.
func loopbackOnly(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
