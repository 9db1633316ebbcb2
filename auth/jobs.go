package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"codeauth/models"

	"gorm.io/gorm"
)

// JobPruneThrottle is the scheduled task that removes expired throttle rows, codes and sessions,
// and old records of e-mail given up.
const JobPruneThrottle = "auth:prune-throttle"

// NightlyHour is when the nightly jobs run, in the server's local time zone (TZ).
const NightlyHour = 3

// PruneResult counts the rows a prune removed.
type PruneResult struct {
	Throttles     int64
	Verifications int64
	Sessions      int64
	// Outbox counts records of e-mails given up more than OutboxRetention ago.
	Outbox int64
}

// OutboxRetention is how long the record of an e-mail given up (its kind, recipient and the
// provider's last error, without the content) is kept for operators. Delivered e-mails leave no
// record.
const OutboxRetention = 7 * 24 * time.Hour

// PruneExpired deletes throttle counters whose window has passed, codes past their expiry,
// sessions past their idle or absolute expiry, and records of e-mail given up more than
// OutboxRetention ago. Live rows are never touched.
func (s *Service) PruneExpired(ctx context.Context) (PruneResult, error) {
	now := s.now()
	var r PruneResult
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("reset_at <= ?", now).Delete(&models.AuthThrottle{})
		if res.Error != nil {
			return res.Error
		}
		r.Throttles = res.RowsAffected
		if res = tx.Where("expires_at <= ?", now).Delete(&models.Verification{}); res.Error != nil {
			return res.Error
		}
		r.Verifications = res.RowsAffected
		if res = tx.Where("expires_at <= ? OR absolute_expires_at <= ?", now, now).Delete(&models.Session{}); res.Error != nil {
			return res.Error
		}
		r.Sessions = res.RowsAffected
		return nil
	})
	if err != nil {
		return PruneResult{}, fmt.Errorf("auth: pruning: %w", err)
	}
	if r.Outbox, err = s.outbox.PruneGivenUp(ctx, now.Add(-OutboxRetention)); err != nil {
		return r, fmt.Errorf("auth: pruning the outbox: %w", err)
	}
	return r, nil
}

// Job is a named task run at most once at a time across all instances.
type Job struct {
	Name string
	Run  func(context.Context) error
}

// NightlyJobs are the tasks the server runs every night, on one schedule and under the same
// kind of lock.
func (s *Service) NightlyJobs() []Job {
	return []Job{
		{Name: JobPruneThrottle, Run: func(ctx context.Context) error {
			r, err := s.PruneExpired(ctx)
			if err == nil {
				s.log.InfoContext(ctx, "pruned expired rows", "job", JobPruneThrottle,
					"throttles", r.Throttles, "codes", r.Verifications, "sessions", r.Sessions, "e-mails", r.Outbox)
			}
			return err
		}},
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
		timer := time.NewTimer(NextNightly(now).Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		for _, job := range jobs {
			ran, err := s.RunExclusive(ctx, job)
			switch {
			case err != nil:
				s.log.ErrorContext(ctx, "nightly job failed", "job", job.Name, "error", err)
			case !ran:
				s.log.InfoContext(ctx, "nightly job skipped: another instance runs it", "job", job.Name)
			}
		}
	}
}
