// Command codeauth is a passwordless e-mail-code authentication service.
//
//	codeauth                      run the HTTP service (same as "codeauth serve")
//	codeauth migrate              create or update the database schema, then exit
//	codeauth auth:prune-throttle  remove expired rows (throttle counters, codes, sessions, old
//	                              records of e-mail given up) once, then exit
//	                              (the server does it every 10 minutes)
//	codeauth auth:purge-accounts  remove deleted accounts past their grace period once, then exit
//	codeauth jwt:rotate           add the next JWT signing key now (it signs once verifiers can
//	                              have fetched it); with --now, replace every key at once, for a
//	                              key that may have leaked
//	codeauth users …              list, show, ban, unban, revoke, remove accounts, set their roles
//	                              (see users.go; `codeauth users` prints its usage)
//	codeauth config               print the configuration's variables as README.md's table
//	codeauth healthcheck          exit 0 when the service on this host ($PORT) is ready: the
//	                              container image's health check, which has no shell or curl
//
// Configuration comes from the environment; see README.md. Everything the service is made of is
// built by server.New; this command only chooses what to do with it.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"codeauth/auth"
	"codeauth/config"
	"codeauth/middleware"
	"codeauth/server"
)

func main() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(config.DefaultMemoryLimit)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve", "migrate", auth.JobPruneThrottle, auth.JobPurgeAccounts, auth.JobRotateJWTKey, cmdRotateJWT, cmdUsers:
	case "config":
		fmt.Print(config.Markdown())
		return 0
	case cmdHealthcheck:
		return runHealthcheck(os.Stdout)
	case "help", "-h", "--help":
		fmt.Println("usage: codeauth [serve|migrate|" + auth.JobPruneThrottle + "|" + auth.JobPurgeAccounts + "|" +
			auth.JobRotateJWTKey + "|" + cmdRotateJWT + " [" + rotateNowFlag + "]|" + cmdUsers + " …|config|" + cmdHealthcheck + "]")
		return 0
	default:
		fmt.Fprintf(os.Stderr, "codeauth: unknown command %q (want serve, migrate, %s, %s, %s, %s, %s, config or %s)\n", cmd,
			auth.JobPruneThrottle, auth.JobPurgeAccounts, auth.JobRotateJWTKey, cmdRotateJWT, cmdUsers, cmdHealthcheck)
		return 2
	}

	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codeauth:", err)
		return 2
	}
	log, logs := newLogger(cfg, os.Stderr)
	defer logs.Close() // last: after the server's own deferred Close has logged
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := server.Options{Logger: log}
	if cmd == "migrate" {
		if err := server.Migrate(ctx, cfg, opts); err != nil {
			log.Error("database unavailable", "error", err)
			return 1
		}
		log.Info("schema is up to date")
		return 0
	}
	opts.OneShot = cmd != "serve"
	srv, err := server.New(ctx, cfg, opts)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	defer srv.Close()
	if cmd == cmdUsers {
		return runUsers(ctx, srv, args[1:], os.Stdout, os.Stderr)
	}
	if cmd == cmdRotateJWT {
		return rotateJWTKey(ctx, srv, log, len(args) > 1 && args[1] == rotateNowFlag)
	}
	if cmd != "serve" {
		return runJobOnce(ctx, srv, log, cmd)
	}
	if err := serve(ctx, srv, log); err != nil {
		log.Error("service stopped", "error", err)
		return 1
	}
	return 0
}

// serve runs the service on PORT until a signal asks it to stop, then stops it: not ready but
// serving for SHUTDOWN_DELAY (cut short by a second signal), then server.Close.
func serve(ctx context.Context, srv *server.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(srv.Config.Port))
	if err != nil {
		return err
	}
	srv.Start()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if delay := srv.Config.ShutdownDelay; delay > 0 {
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		srv.Drain()
		log.Info("shutting down: /readyz answers 503, serving on for SHUTDOWN_DELAY", "delay", delay)
		select {
		case <-time.After(delay):
		case <-again:
		case err := <-served:
			signal.Stop(again)
			return err
		}
		signal.Stop(again)
	}
	log.Info("shutting down: finishing in-flight requests")
	return srv.Close()
}

// cmdRotateJWT is the command that rotates the JWT signing key now, whatever its age: for an
// operator who suspects the key, or wants to see a rotation work.
const cmdRotateJWT = "jwt:rotate"

// rotateNowFlag makes jwt:rotate replace every key at once (auth.RotateJWTKeyNow).
const rotateNowFlag = "--now"

// rotateJWTKey runs the rotation job forced, under the scheduled job's lock, so it never races
// the schedule. The new key signs a few minutes later, once verifiers can have fetched it; with
// now, at once, and every other key is removed.
func rotateJWTKey(ctx context.Context, srv *server.Server, log *slog.Logger, now bool) int {
	job := srv.Auth.RotateJWTKeyJob(true)
	if now {
		job = srv.Auth.RotateJWTKeyNowJob()
	}
	ran, err := srv.Scheduler.RunExclusive(ctx, job)
	switch {
	case err != nil:
		log.Error("rotating the JWT signing key failed", "error", err)
		return 1
	case !ran:
		log.Error("another instance is rotating the JWT signing key right now; run the command again")
		return 1
	}
	return 0
}

// runJobOnce runs one scheduled job now, unless another instance is running it.
func runJobOnce(ctx context.Context, srv *server.Server, log *slog.Logger, name string) int {
	for _, job := range srv.Jobs() {
		if job.Name != name {
			continue
		}
		ran, err := srv.Scheduler.RunExclusive(ctx, job)
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

// newLogger makes the service's logger, the default one too, writing to dst (stderr) through a
// logBuffer, which the caller closes when the command ends.
func newLogger(cfg config.Config, dst io.Writer) (*slog.Logger, *logBuffer) {
	buf := newLogBuffer(dst, logFlushDelay)
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewTextHandler(buf, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(buf, opts)
	}
	log := slog.New(middleware.LogHandler(flushingHandler{h, buf}))
	slog.SetDefault(log)
	return log, buf
}
