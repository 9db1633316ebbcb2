package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Count is one event counted on a throttle counter shared by every instance: Key's count goes up
// by one, or starts again at 1 in a new window ending at ResetAt when the row's window has passed
// at Now. LockKey, when set, names a failure counter whose lock the result reports: the counter
// has reached MaxFailures in a window that has not ended at Now. A LockKey that matches no row
// never locks.
type Count struct {
	Key         string
	ResetAt     time.Time
	Now         time.Time
	LockKey     string
	MaxFailures int
}

// Counted is a counter after a Count: its count in the current window, when that window ends,
// and whether the lock the Count asked about holds.
type Counted struct {
	Count   int
	ResetAt time.Time
	Locked  bool
}

// hitQuery counts one event in a fixed window with a single atomic upsert: a row whose window
// has passed starts again at 1. Two instances counting at once can never lose an increment. The
// same statement reports whether another counter, the address's failed verifications, has locked
// it (a key that matches no row never does), which saves the lock check a round trip.
const hitQuery = `INSERT INTO auth_throttle (key, count, reset_at, updated_at) VALUES (?, 1, ?, ?)
` + countConflictSQL + `
RETURNING count, reset_at, ` + lockedSQL + ` AS locked`

// countConflictSQL is the part of a counter's upsert that counts into an existing row, starting
// again at 1 when its window (ending at the row's reset_at) has passed at the time given twice.
const countConflictSQL = `ON CONFLICT (key) DO UPDATE SET
 count = CASE WHEN auth_throttle.reset_at <= ? THEN 1 ELSE auth_throttle.count + 1 END,
 reset_at = CASE WHEN auth_throttle.reset_at <= ? THEN excluded.reset_at ELSE auth_throttle.reset_at END,
 updated_at = excluded.updated_at`

// lockedSQL is true when the failure counter named by the first of its three arguments has
// reached the cap (the second) in a window that has not ended (the third).
const lockedSQL = `EXISTS (SELECT 1 FROM auth_throttle f WHERE f.key = ? AND f.count >= ? AND f.reset_at > ?)`

// Count counts one event (see Count), committed on its own.
func (s *Store) Count(ctx context.Context, c Count) (Counted, error) {
	return count(s.db.WithContext(ctx), c)
}

// count runs c in db: on its own, or in a pipelined transaction, where it goes to the database
// with what waits.
func count(db *gorm.DB, c Count) (Counted, error) {
	var rows []Counted
	err := scanNow(db, &rows, hitQuery, c.Key, c.ResetAt, c.Now, c.Now, c.Now, c.LockKey, c.MaxFailures, c.Now)
	return counted(c, rows, err)
}

// countLater queues c in a pipelined transaction (scanLater) and returns the function that reads
// its result once the transaction has next talked to the database.
func countLater(tx *gorm.DB, c Count) (func() (Counted, error), error) {
	var rows []Counted
	err := scanLater(tx, &rows, hitQuery, c.Key, c.ResetAt, c.Now, c.Now, c.Now, c.LockKey, c.MaxFailures, c.Now)
	if err != nil {
		return nil, fmt.Errorf("models: counting %.4s: %w", c.Key, err)
	}
	return func() (Counted, error) { return counted(c, rows, nil) }, nil
}

// counted reads the one row a count returns.
func counted(c Count, rows []Counted, err error) (Counted, error) {
	if err == nil && len(rows) != 1 {
		err = fmt.Errorf("%d rows", len(rows))
	}
	if err != nil {
		return Counted{}, fmt.Errorf("models: counting %.4s: %w", c.Key, err)
	}
	rows[0].ResetAt = rows[0].ResetAt.UTC()
	return rows[0], nil
}

// Counter reads the counter key; ErrNotFound when there is none.
func (s *Store) Counter(ctx context.Context, key string) (AuthThrottle, error) {
	var row AuthThrottle
	err := s.db.WithContext(ctx).Where("key = ?", key).Take(&row).Error
	if err != nil {
		return AuthThrottle{}, notFound(err, "reading a counter")
	}
	row.ResetAt, row.UpdatedAt = row.ResetAt.UTC(), row.UpdatedAt.UTC()
	return row, nil
}

// clearCounter deletes the counter key inside tx (a successful sign-in clears the address's
// failures), with the statements that follow it in a pipelined transaction.
func clearCounter(tx *gorm.DB, key string) error {
	if err := execLater(tx, "DELETE FROM auth_throttle WHERE key = ?", key); err != nil {
		return fmt.Errorf("models: clearing a counter: %w", err)
	}
	return nil
}
