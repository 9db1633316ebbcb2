package auth

import (
	"context"
	"fmt"
	"time"
)

// JobPruneThrottle is the scheduled task that removes expired throttle rows, codes and sessions,
// and old records of e-mail given up.
const JobPruneThrottle = "auth:prune-throttle"

// pruneStore is the storage of expired rows: models.Store implements it.
type pruneStore interface {
	// PruneBatch is the most rows one statement of the prune deletes on this database. A
	// backlog (a first run on a large database, an instance that was down) is deleted in
	// statements this size, each committed on its own, so none holds many row locks, or
	// SQLite's write lock, for long.
	PruneBatch() int
	// PruneShare is the most of its time a prune spends in its statements on this database
	// (1: all of it); it rests for the rest between statements, so that a backlog's statements
	// leave the database to sign-ins most of the time where they would slow them.
	PruneShare() float64
	PruneCounters(ctx context.Context, now time.Time, limit int) (int64, error)
	PruneCodes(ctx context.Context, now time.Time, limit int) (int64, error)
	PruneSessions(ctx context.Context, now time.Time, limit int) (int64, error)
	PruneKnownDevices(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	PruneAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// PruneResult counts the rows a prune removed, and the statements it took.
type PruneResult struct {
	Throttles     int64
	Verifications int64
	Sessions      int64
	// Outbox counts records of e-mails given up more than OutboxRetention ago.
	Outbox int64
	// KnownDevices counts devices unseen for KnownDeviceWindow.
	KnownDevices int64
	// Audit counts audit events older than AUTH_AUDIT_RETENTION.
	Audit int64
	// Statements counts the DELETE statements run, each removing at most a batch.
	Statements int
	// Rested is how long the prune rested between statements (PruneShare).
	Rested time.Duration
}

// OutboxRetention is how long the record of an e-mail given up (its kind, recipient and the
// provider's last error, without the content) is kept for operators. Delivered e-mails leave no
// record.
const OutboxRetention = 7 * 24 * time.Hour

// PruneExpired deletes throttle counters whose window has passed, codes past their expiry,
// sessions past their expiry, devices unseen for KnownDeviceWindow, and records of e-mail given
// up more than OutboxRetention ago, each
// in statements of at most a batch of rows, resting between them where the store asks for it
// (PruneShare).
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
		{"known devices", &r.KnownDevices, s.store.PruneKnownDevices, now.Add(-KnownDeviceWindow)},
		{"audit events", &r.Audit, s.store.PruneAudit, now.Add(-s.auditRetention)},
		{"the outbox", &r.Outbox, s.outbox.PruneGivenUp, now.Add(-OutboxRetention)},
	}
	for _, t := range tables {
		for {
			began := time.Now()
			n, err := t.delete(ctx, t.cutoff, s.pruneBatch)
			r.Statements++
			*t.deleted += n
			if err != nil {
				return r, fmt.Errorf("auth: pruning %s: %w", t.name, err)
			}
			if n < int64(s.pruneBatch) {
				break
			}
			// More to delete: rest first, for the share of the time the prune may not have.
			if s.pruneShare <= 0 || s.pruneShare >= 1 {
				continue
			}
			if rest := time.Duration(float64(time.Since(began)) * (1/s.pruneShare - 1)); rest > 0 {
				if err := sleep(ctx, rest); err != nil {
					return r, fmt.Errorf("auth: pruning %s: %w", t.name, err)
				}
				r.Rested += rest
			}
		}
	}
	return r, nil
}

// sleep waits d, or until ctx ends, whose error it then returns.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Job is a named task of the domain that the server runs on a schedule (server.Scheduler), at
// most once at a time across all instances. The type stays here so that auth can say which jobs
// it has without knowing who schedules them.
type Job struct {
	Name string
	Run  func(context.Context) error
}

// PruneJob is the task JobPruneThrottle, which the server runs every few minutes
// (server.PruneInterval).
func (s *Service) PruneJob() Job {
	return Job{Name: JobPruneThrottle, Run: func(ctx context.Context) error {
		r, err := s.PruneExpired(ctx)
		if err == nil {
			s.log.InfoContext(ctx, "pruned expired rows", "job", JobPruneThrottle, "throttles", r.Throttles,
				"codes", r.Verifications, "sessions", r.Sessions, "known_devices", r.KnownDevices, "audit_events", r.Audit, "e-mails", r.Outbox,
				"statements", r.Statements, "rested", r.Rested.Round(time.Millisecond))
		}
		return err
	}}
}

// NightlyJobs are the tasks the server runs every night, on one schedule and under the same
// kind of lock (server.Scheduler.RunNightly).
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
