package auth

import (
	"context"
	"fmt"
	"time"
)

// JobPruneThrottle is the scheduled task that removes expired throttle rows, codes and sessions,
// and old records of e-mail given up.
const JobPruneThrottle = "auth:prune-throttle"

// pruneBatch is the most rows one statement of the prune deletes. A backlog (a first run on a
// large database, an instance that was down) is deleted in statements this size, each committed
// on its own, so none holds many row locks, or SQLite's write lock, for long.
const pruneBatch = 1000

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
// Each statement picks a batch of expired rows and deletes those that are still expired: on
// PostgreSQL a row picked may change before the statement locks it (a throttle counter whose
// window passed starts a new one in the same row), and the condition is checked again on the row
// it then finds, so a live row is never deleted. A session's expiry is never later than its
// absolute cap (creating and refreshing a session both clamp it), so expires_at alone, which is
// indexed, finds every session that has ended, without reading the whole table at each run.
func (s *Service) PruneExpired(ctx context.Context) (PruneResult, error) {
	now := s.now()
	db := s.db.WithContext(ctx)
	// exec deletes a batch with query, whose arguments are now, the batch's size and now again.
	exec := func(query string) func(limit int) (int64, error) {
		return func(limit int) (int64, error) {
			res := db.Exec(query, now, limit, now)
			return res.RowsAffected, res.Error
		}
	}
	var r PruneResult
	tables := []struct {
		name    string
		deleted *int64
		delete  func(limit int) (int64, error)
	}{
		{"throttle counters", &r.Throttles, exec(`DELETE FROM auth_throttle
 WHERE key IN (SELECT key FROM auth_throttle WHERE reset_at <= ? LIMIT ?) AND reset_at <= ?`)},
		{"codes", &r.Verifications, exec(`DELETE FROM verifications
 WHERE id IN (SELECT id FROM verifications WHERE expires_at <= ? LIMIT ?) AND expires_at <= ?`)},
		{"sessions", &r.Sessions, exec(`DELETE FROM sessions
 WHERE id IN (SELECT id FROM sessions WHERE expires_at <= ? LIMIT ?) AND expires_at <= ?`)},
		{"the outbox", &r.Outbox, func(limit int) (int64, error) {
			return s.outbox.PruneGivenUp(ctx, now.Add(-OutboxRetention), limit)
		}},
	}
	for _, t := range tables {
		for {
			n, err := t.delete(s.pruneBatch)
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
				"codes", r.Verifications, "sessions", r.Sessions, "e-mails", r.Outbox, "statements", r.Statements)
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
