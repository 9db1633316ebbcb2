// Command codeauth is a passwordless e-mail-code authentication service.
//
//	codeauth                      run the HTTP service (same as "codeauth serve")
//	codeauth migrate              create or update the database schema, then exit
//	codeauth auth:prune-throttle  remove expired rows (throttle counters, codes, sessions, old
//	                              records of e-mail given up) once, then exit
//	                              (the server does it every 10 minutes)
//	codeauth auth:purge-accounts  remove deleted accounts past their grace period once, then exit
//
// Configuration comes from the environment; see README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served on DEBUG_PPROF_ADDR only
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"codeauth/auth"
	"codeauth/config"
	"codeauth/handlers"
	"codeauth/mail"
	"codeauth/middleware"
	"codeauth/models"

	pgstorage "github.com/gofiber/storage/postgres/v3"
	"gorm.io/gorm"
)

// shutdownTimeout bounds how long in-flight requests may take to finish after SIGTERM.
const shutdownTimeout = 20 * time.Second

// defaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT sets another. The
// service's live heap is a few megabytes; without a limit the collector lets garbage grow to
// twice it between cycles, and under full load the process passed 60 MB. With it the process
// peaked at 55 MB (scripts/bench) for a few per cent more CPU. It is soft: a larger live heap is
// never refused.
const defaultMemoryLimit = 40 << 20

func main() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve", "migrate", auth.JobPruneThrottle, auth.JobPurgeAccounts:
	case "help", "-h", "--help":
		fmt.Println("usage: codeauth [serve|migrate|" + auth.JobPruneThrottle + "|" + auth.JobPurgeAccounts + "]")
		return 0
	default:
		fmt.Fprintf(os.Stderr, "codeauth: unknown command %q (want serve, migrate, %s or %s)\n", cmd, auth.JobPruneThrottle, auth.JobPurgeAccounts)
		return 2
	}

	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codeauth:", err)
		return 2
	}
	log := newLogger(cfg)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		log.Error("database unavailable", "error", err)
		return 1
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if cmd == "migrate" {
		log.Info("schema is up to date")
		return 0
	}
	mailer, err := mail.New(mail.ProviderConfig{APIKey: cfg.EmailProviderAPIKey, From: cfg.EmailFrom, BaseURL: cfg.EmailProviderURL}, os.Stdout)
	if err != nil {
		log.Error("no mailer", "error", err)
		return 1
	}
	svc, err := auth.New(auth.Options{
		DB:                     db,
		Mailer:                 mailer,
		Secret:                 cfg.Secret,
		SessionMaxAge:          cfg.SessionMaxAge,
		MaxFailedVerifications: cfg.MaxFailedVerifications,
		SiteName:               cfg.SiteName,
		SiteURL:                cfg.BaseURL,
		EmailChangeLinks:       cfg.EmailChangeLinks,
		DeletionGrace:          cfg.DeletionGrace,
		Logger:                 log,
	})
	if err != nil {
		log.Error("starting the auth service", "error", err)
		return 1
	}
	if cmd == auth.JobPruneThrottle || cmd == auth.JobPurgeAccounts {
		return runJobOnce(ctx, svc, log, cmd)
	}
	if err := serve(ctx, cfg, db, svc, log); err != nil {
		log.Error("service stopped", "error", err)
		return 1
	}
	return 0
}

// runJobOnce runs one scheduled job now, unless another instance is running it.
func runJobOnce(ctx context.Context, svc *auth.Service, log *slog.Logger, name string) int {
	for _, job := range append([]auth.Job{svc.PruneJob()}, svc.NightlyJobs()...) {
		if job.Name != name {
			continue
		}
		ran, err := svc.RunExclusive(ctx, job)
		switch {
		case err != nil:
			log.Error("job failed", "job", name, "error", err)
			return 1
		case !ran:
			log.Info("job skipped: another instance is running it", "job", name)
		}
		return 0
	}
	log.Error("unknown job", "job", name)
	return 2
}

func newLogger(cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	log := slog.New(middleware.LogHandler(h))
	slog.SetDefault(log)
	return log
}

func openDatabase(ctx context.Context, cfg config.Config, log *slog.Logger) (*gorm.DB, error) {
	db, err := models.Open(ctx, models.Options{
		DatabaseURL: cfg.DatabaseURL,
		SQLitePath:  cfg.SQLitePath(),
		Now:         func() time.Time { return time.Now().UTC() },
		Logger:      log,
	})
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrating: %w", err)
	}
	return db, nil
}

func serve(ctx context.Context, cfg config.Config, db *gorm.DB, svc *auth.Service, log *slog.Logger) error {
	var rateStore middleware.RateStore
	if cfg.RateLimitStore == "postgres" {
		kv, err := sharedStorage(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer kv.Close()
		rateStore = middleware.NewSharedRateStore(kv)
	}
	app := handlers.NewApp(handlers.Deps{
		Auth:           svc,
		Secret:         cfg.Secret,
		BaseURL:        cfg.BaseURL,
		TrustedOrigins: cfg.TrustedOrigins,
		TrustedProxies: cfg.TrustedProxies,
		NoProxy:        cfg.NoProxy,
		RateStore:      rateStore,
		CookiePrefix:   cfg.CookiePrefix,
		Secure:         cfg.Secure,
		SiteName:       cfg.SiteName,
		Ready:          func(ctx context.Context) error { return models.Ready(ctx, db) },
		Logger:         log,
	})
	if cfg.PprofAddr != "" {
		// Profiling, on a loopback address of its own, only when asked for.
		go func() {
			log.Info("profiler listening", "addr", cfg.PprofAddr)
			if err := http.ListenAndServe(cfg.PprofAddr, nil); err != nil {
				log.Error("profiler stopped", "error", err)
			}
		}()
	}
	go svc.RunEvery(ctx, auth.PruneInterval, svc.PruneJob())
	go svc.RunNightly(ctx, svc.NightlyJobs())
	// The outbox worker outlives the listener a little: it stops after the in-flight requests,
	// finishing the message it is sending.
	workerCtx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		svc.Outbox().Run(workerCtx)
	}()
	defer func() {
		stopWorker()
		<-workerDone
	}()

	ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.Port))
	if err != nil {
		return err
	}
	if !cfg.ProxySet() && !loopbackOnly(ln.Addr()) {
		log.Warn("AUTH_TRUSTED_PROXIES is not set and the service can be reached from other hosts: a single " +
			"X-Forwarded-For or X-Real-IP is taken as the client's address, which is right behind one proxy that " +
			"sets it but lets a client that connects directly choose its own rate-limit bucket; set " +
			"AUTH_TRUSTED_PROXIES=" + config.NoProxy + " when clients connect directly, or list your proxies")
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	database := "sqlite " + cfg.SQLitePath()
	if cfg.UsesPostgres() {
		database = "postgres"
	}
	log.Info("listening", "url", cfg.BaseURL, "port", cfg.Port, "database", database)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	if err := app.ShutdownWithTimeout(shutdownTimeout); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// loopbackOnly reports whether a listener accepts connections from this host only.
func loopbackOnly(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// sharedStorage opens the PostgreSQL key-value table of RATE_LIMIT_STORE=postgres, on a pool with
// the service's connection policy (models.OpenPool). The storage package panics when it cannot
// connect; that becomes an error here.
func sharedStorage(ctx context.Context, databaseURL string) (kv *pgstorage.Storage, err error) {
	pool, err := models.OpenPool(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("RATE_LIMIT_STORE=postgres: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			pool.Close()
			err = fmt.Errorf("RATE_LIMIT_STORE=postgres: %v", r)
		}
	}()
	return pgstorage.NewWithContext(ctx, pgstorage.Config{DB: pool, Table: "rate_limit", GCInterval: time.Minute}), nil
}
