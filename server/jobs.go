package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"codeauth/auth"
)

// PruneInterval is how often the server runs auth.JobPruneThrottle: rows are gone minutes after
// they expire, and each run has little to delete.
const PruneInterval = 10 * time.Minute

// NightlyHour is when the nightly jobs run, in the server's local time zone (TZ).
const NightlyHour = 3

// Locker takes a lock shared by every instance on the database (models.Store.TryLock).
type Locker interface {
	TryLock(ctx context.Context, name string) (release func() error, ok bool, err error)
}

// Scheduler runs the service's jobs (auth.Job) on their schedules, each at most once at a time
// across every instance: the domain says what a job does, the scheduler when and where it runs.
type Scheduler struct {
	locks Locker
	log   *slog.Logger
	// running keeps a job from running twice at once in this instance: the database's lock is per
	// connection, and on SQLite there is none.
	running sync.Map
	// started, when set by tests, is called once a job holds its lock.
	started func(name string)
}

// NewScheduler returns a scheduler that takes its locks from locks and logs to log.
func NewScheduler(locks Locker, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{locks: locks, log: log}
}

// lockName is the name of job's lock in the database.
func lockName(job auth.Job) string { return "codeauth job " + job.Name }

// RunExclusive runs job unless it is already running, here or in another instance. On PostgreSQL
// an advisory lock is held for the duration, so of any number of instances exactly one runs it
// and the others skip; on SQLite, which serves one instance, a process lock does. It reports
// whether the job ran here.
func (s *Scheduler) RunExclusive(ctx context.Context, job auth.Job) (ran bool, err error) {
	mu, _ := s.running.LoadOrStore(job.Name, &sync.Mutex{})
	if !mu.(*sync.Mutex).TryLock() {
		return false, nil
	}
	defer mu.(*sync.Mutex).Unlock()
	release, ok, err := s.locks.TryLock(ctx, lockName(job))
	if err != nil || !ok {
		return false, err
	}
	defer func() {
		if err := release(); err != nil {
			s.log.Error("releasing a job lock failed", "job", job.Name, "error", err)
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("server: job %s panicked: %v", job.Name, r)
		}
	}()
	ran = true // from here on, even when the job panics
	if s.started != nil {
		s.started(job.Name)
	}
	return ran, job.Run(ctx)
}

// NextNightly returns the first NightlyHour:00 strictly after t, in t's location.
func NextNightly(t time.Time) time.Time {
	next := time.Date(t.Year(), t.Month(), t.Day(), NightlyHour, 0, 0, 0, t.Location())
	if !next.After(t) {
		next = time.Date(t.Year(), t.Month(), t.Day()+1, NightlyHour, 0, 0, 0, t.Location())
	}
	return next
}

// RunNightly runs jobs every night at NightlyHour local time until ctx ends. Each run goes
// through RunExclusive, so across a fleet each job runs once a night.
func (s *Scheduler) RunNightly(ctx context.Context, jobs []auth.Job) {
	for {
		now := time.Now()
		if !sleepUntil(ctx, NextNightly(now).Sub(now)) {
			return
		}
		for _, job := range jobs {
			s.runScheduled(ctx, job, slog.LevelInfo)
		}
	}
}

// RunEvery runs job every interval until ctx ends, at the times that are whole multiples of it
// (…:00, …:10, …:20 for 10 minutes). Each run goes through RunExclusive. The instances of a fleet
// tick together, so one of them takes the lock and the others, finding it taken, skip; one that
// comes after the run finds little left to do.
func (s *Scheduler) RunEvery(ctx context.Context, interval time.Duration, job auth.Job) {
	for {
		now := time.Now()
		if !sleepUntil(ctx, now.Truncate(interval).Add(interval).Sub(now)) {
			return
		}
		// Skipping is the normal case for all instances but one: not worth a line.
		s.runScheduled(ctx, job, slog.LevelDebug)
	}
}

// sleepUntil waits d, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// runScheduled runs job through RunExclusive, logging a failure, and at skipped the run
// another instance had. A run the server's shutdown stopped (its error is the cancellation) is
// no failure: the next run, on this instance or another, goes on where it left off. Any other
// error, or a panic, is one, shutdown or not.
func (s *Scheduler) runScheduled(ctx context.Context, job auth.Job, skipped slog.Level) {
	ran, err := s.RunExclusive(ctx, job)
	switch {
	case err != nil && errors.Is(err, ctx.Err()): // ctx.Err() is nil until the shutdown
		s.log.InfoContext(context.WithoutCancel(ctx), "scheduled job stopped by the shutdown", "job", job.Name, "error", err)
	case err != nil:
		s.log.ErrorContext(ctx, "scheduled job failed", "job", job.Name, "error", err)
	case !ran:
		s.log.Log(ctx, skipped, "scheduled job skipped: another instance runs it", "job", job.Name)
	}
}
