package models

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The prune of expired rows. Each statement picks a batch of at most limit expired rows and
// deletes those that are still expired: on PostgreSQL a row picked may change before the
// statement locks it (a throttle counter whose window passed starts a new one in the same row),
// and the condition is checked again on the row it then finds, so a live row is never deleted.
// Each returns how many rows it deleted; the caller repeats it until fewer than limit go, so a
// backlog is deleted in short statements, each committed on its own, none holding many row locks,
// or SQLite's write lock, for long.

// PruneBatch is the most rows one statement of the prune deletes here. SQLite has one writer,
// which every request that writes waits for: with a thousand rows a statement, a first prune of
// a backlog (100,000 accounts' expired sessions and codes, half a million old e-mails) made
// sign-ups beside it 14 times slower at the 99th percentile, with a hundred 3 times. PostgreSQL's
// writers do not wait for each other's statements, and a larger batch runs fewer of them.
func (s *Store) PruneBatch() int {
	if s.postgres {
		return 1000
	}
	return 100
}

// PruneShare is the most of its time a prune spends in its statements here; it rests for the
// rest, between statements. SQLite's one writer is shared with every sign-in: a first prune of a
// backlog (100,000 accounts' expired rows, half a million old e-mails) that ran its statements
// back to back from another process took the 99th percentile of sign-ups 16 at once from 91 ms
// to 967 ms; resting three times as long as each statement took (a share of a quarter), 84 to
// 123 ms, the prune taking four times as long. On PostgreSQL the prune's statements leave
// sign-ups' 99th percentile within 1.4 times what it was (docs/performance.md), and it does not
// rest.
func (s *Store) PruneShare() float64 {
	if s.postgres {
		return 1
	}
	return 0.25
}

// PruneCounters deletes at most limit throttle counters whose window ended at or before now.
func (s *Store) PruneCounters(ctx context.Context, now time.Time, limit int) (int64, error) {
	return s.prune(ctx, `DELETE FROM auth_throttle
 WHERE key IN (SELECT key FROM auth_throttle WHERE reset_at <= ? LIMIT ?) AND reset_at <= ?`, now, limit)
}

// PruneCodes deletes at most limit codes and links that expired at or before now.
func (s *Store) PruneCodes(ctx context.Context, now time.Time, limit int) (int64, error) {
	return s.prune(ctx, `DELETE FROM verifications
 WHERE id IN (SELECT id FROM verifications WHERE expires_at <= ? LIMIT ?) AND expires_at <= ?`, now, limit)
}

// PruneSessions deletes at most limit sessions that expired at or before now. A session's expiry
// is never later than its absolute cap (creating and refreshing a session both clamp it), so
// expires_at alone, which is indexed, finds every session that has ended, without reading the
// whole table at each run.
func (s *Store) PruneSessions(ctx context.Context, now time.Time, limit int) (int64, error) {
	return s.prune(ctx, `DELETE FROM sessions
 WHERE id IN (SELECT id FROM sessions WHERE expires_at <= ? LIMIT ?) AND expires_at <= ?`, now, limit)
}

// PruneKnownDevices deletes at most limit known devices last seen at or before cutoff.
func (s *Store) PruneKnownDevices(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return s.prune(ctx, `DELETE FROM known_devices WHERE (user_id, device_key) IN
 (SELECT user_id, device_key FROM known_devices WHERE last_seen_at <= ? LIMIT ?) AND last_seen_at <= ?`, cutoff, limit)
}

// prune runs one of the statements above, whose arguments are now, the batch's size and now
// again. A statement the context's end interrupted fails with an error that wraps the context's
// (SQLite answers "interrupted", which does not), so the caller can tell a stop from a failure.
func (s *Store) prune(ctx context.Context, query string, now time.Time, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec(query, now, limit, now)
	err := res.Error
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return res.RowsAffected, err
}
