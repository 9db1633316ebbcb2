package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
)

// JobPruneThrottle is the scheduled task that removes expired throttle rows, codes and sessions,
// and old records of e-mail given up.
const JobPruneThrottle = "auth:prune-throttle"

// PruneInterval is how often the server runs JobPruneThrottle: rows are gone minutes after they
// expire, and each run has little to delete.
const PruneInterval = 10 * time.Minute

// NightlyHour is when the nightly jobs run, in the server's local time zone (TZ).
const NightlyHour = 3

// pruneBatch is the most rows one statement of the prune deletes. A backlog (a first run on a
// large database, an instance that was down) is deleted in statements this size, each committed
// on its own, so none holds many row locks, or SQLite's write lock, for long.
const pruneBatch = 1000

// pruneStore is the storage of expired rows: models.Store implements it.
type pruneStore interface {
	PruneCounters(ctx context.Context, now time.Time, limit int) (int64, error)
	PruneCodes(ctx context.Context, now time.Time, limit int) (int64, error)
	PruneSessions(ctx context.Context, now time.Time, limit int) (int64, error)
}

// PruneResult counts the rows a prune removed, and the statements it took.
type PruneResult struct {
	Throttles     int64
	Verifications int64
	Sessions      int64
	// Outbox counts records of e-mails given up more than OutboxRetention ago.
	Outbox int64
	// Statements counts the DELETE statements run, each removing at most a batch.
	Statements int
}

// OutboxRetention is how long the record of an e-mail given up (its kind, recipient and the
// provider's last error, without the content) is kept for operators. Delivered e-mails leave no
// record.
const OutboxRetention = 7 * 24 * time.Hour

// PruneExpired deletes throttle counters whose window has passed, codes past their expiry,
// sessions past their expiry, and records of e-mail given up more than OutboxRetention ago, each
// in statements of at most a batch of rows. Live rows are never touched.
//
// Live rows are never deleted, even when one changes while the prune runs (the store's prune
// statements say how).
func (s *Service) PruneExpired(ctx context.Context) (PruneResult, error) {
	now := s.now()
	var r PruneResult
	tables := []struct {
		name    string
		deleted *int64
		delete  func(ctx context.Context, cutoff time.Time, limit int) (int64, error)
		cutoff  time.Time
	}{
		{"throttle counters", &r.Throttles, s.store.PruneCounters, now},
		{"codes", &r.Verifications, s.store.PruneCodes, now},
		{"sessions", &r.Sessions, s.store.PruneSessions, now},
		{"the outbox", &r.Outbox, s.outbox.PruneGivenUp, now.Add(-OutboxRetention)},
	}
	for _, t := range tables {
		for {
			n, err := t.delete(ctx, t.cutoff, s.pruneBatch)
			r.Statements++
			*t.deleted += n
			if err != nil {
				return r, fmt.Errorf("auth: pruning %s: %w", t.name, err)
			}
			if n < int64(s.pruneBatch) {
				break
			}
		}
	}
	return r, nil
}

// Job is a named task run at most once at a time across all instances.
type Job struct {
	Name string
	Run  func(context.Context) error
}

// PruneJob is the task JobPruneThrottle, which the server runs every PruneInterval.
func (s *Service) PruneJob() Job {
	return Job{Name: JobPruneThrottle, Run: func(ctx context.Context) error {
		r, err := s.PruneExpired(ctx)
		if err == nil {
			s.log.InfoContext(ctx, "pruned expired rows", "job", JobPruneThrottle, "throttles", r.Throttles,
				"codes", r.Verifications, "sessions", r.Sessions, "e-mails", r.Outbox, "statements", r.Statements)
		}
		return err
	}}
}

// NightlyJobs are the tasks the server runs every night, on one schedule and under the same
// kind of lock.
func (s *Service) NightlyJobs() []Job {
	return []Job{
		{Name: JobPurgeAccounts, Run: func(ctx context.Context) error {
			n, err := s.PurgeDeletedAccounts(ctx)
			if err == nil {
				s.log.InfoContext(ctx, "purged deleted accounts", "job", JobPurgeAccounts, "accounts", n)
			}
			return err
		}},
	}
}

// RunExclusive runs job unless it is already running. On PostgreSQL a session advisory lock
// (pg_try_advisory_lock) is held for the duration, so of any number of instances exactly one
// runs it and the others skip; on SQLite, which serves one instance, a process lock does. It
// reports whether the job ran here.
func (s *Service) RunExclusive(ctx context.Context, job Job) (bool, error) {
	mu, _ := s.jobLocks.LoadOrStore(job.Name, &sync.Mutex{})
	if !mu.(*sync.Mutex).TryLock() {
		return false, nil
	}
	defer mu.(*sync.Mutex).Unlock()
	run := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("auth: job %s panicked: %v", job.Name, r)
			}
		}()
		if s.jobStarted != nil {
			s.jobStarted(job.Name)
		}
		return job.Run(ctx)
	}
	if s.db.Dialector.Name() != "postgres" {
		return true, run()
	}
	ran := false
	err := s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		// The key is the schema and the job: deployments sharing a database in different schemas
		// do not block each other.
		var locked bool
		if err := conn.Raw("SELECT pg_try_advisory_lock(hashtext(current_schema()), hashtext(?))", "codeauth job "+job.Name).
			Row().Scan(&locked); err != nil {
			return fmt.Errorf("auth: taking the lock of %s: %w", job.Name, err)
		}
		if !locked {
			return nil
		}
		defer func() {
			// A background context: the lock must go even when ctx has ended.
			if err := conn.WithContext(context.Background()).
				Exec("SELECT pg_advisory_unlock(hashtext(current_schema()), hashtext(?))", "codeauth job "+job.Name).Error; err != nil {
				s.log.Error("releasing a job lock failed", "job", job.Name, "error", err)
			}
		}()
		ran = true
		return run()
	})
	return ran, err
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
func (s *Service) RunNightly(ctx context.Context, jobs []Job) {
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
func (s *Service) RunEvery(ctx context.Context, interval time.Duration, job Job) {
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
// another instance had.
func (s *Service) runScheduled(ctx context.Context, job Job, skipped slog.Level) {
	ran, err := s.RunExclusive(ctx, job)
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "scheduled job failed", "job", job.Name, "error", err)
	case !ran:
		s.log.Log(ctx, skipped, "scheduled job skipped: another instance runs it", "job", job.Name)
	}
}
