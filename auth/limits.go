package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"codeauth/models"

	"gorm.io/gorm"
)

// ErrRateLimited is matched (errors.Is) by every RateLimitError.
var ErrRateLimited = errors.New("auth: rate limited")

// RateLimitError means a limit was reached. RetryAfter says when the caller may try again.
type RateLimitError struct {
	RetryAfter time.Duration
}

// Error names the failure.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("auth: rate limited, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true for every RateLimitError.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// Limits kept in the database, shared by every instance (CONTRACT.md "Limits").
const (
	// SendLimit is how many codes one address may be sent per SendWindow.
	SendLimit = 5
	// SendWindow is the window of SendLimit.
	SendWindow = 15 * time.Minute
	// DefaultMaxFailedVerifications is the default of AUTH_MAX_FAILED_VERIFICATIONS: consecutive
	// failed verifications for one address, across codes, before it is locked for the rest of
	// FailureWindow.
	DefaultMaxFailedVerifications = 25
	// FailureWindow is the window in which consecutive failures are counted, from the first one.
	FailureWindow = 24 * time.Hour
)

// Kinds of auth_throttle rows.
const (
	throttleSend    = "send"
	throttleFailure = "fail"
)

// throttleKey names the counter of kind for an address. The address is stored as a keyed hash:
// the table says how often an address was used without saying which one.
func (k *keys) throttleKey(kind, email string) string {
	var sum [sha256.Size]byte
	return kind + ":" + base64.RawURLEncoding.EncodeToString(k.throttle.sum(sum[:0], email))
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

// hitCount is what hitQuery returns.
type hitCount struct {
	Count   int
	ResetAt time.Time
	Locked  bool
}

// hit counts one event for key in db (a pipelined transaction sends it with what waits) and
// returns the count in the current window and when it ends, and whether the failure counter
// lockKey ("" for none) has locked the address.
func (s *Service) hit(db *gorm.DB, key string, window time.Duration, lockKey string) (hitCount, error) {
	now := s.now()
	var rows []hitCount
	err := models.NowScan(db, &rows, hitQuery, key, now.Add(window), now, now, now, lockKey, s.maxFailures, now)
	if err == nil && len(rows) != 1 {
		err = fmt.Errorf("%d rows", len(rows))
	}
	if err != nil {
		return hitCount{}, fmt.Errorf("auth: counting %s: %w", key[:4], err)
	}
	rows[0].ResetAt = rows[0].ResetAt.UTC()
	return rows[0], nil
}

// retryAfter is the wait until resetAt, at least a second.
func (s *Service) retryAfter(resetAt time.Time) *RateLimitError {
	d := resetAt.Sub(s.now())
	if d < time.Second {
		d = time.Second
	}
	return &RateLimitError{RetryAfter: d}
}

// throttleSend spends one of the address's SendLimit sends in db, or fails with a
// RateLimitError. With lockable, an address locked by failed verifications is refused too
// (checkLocked), in the same round trip; the refused send is still counted, which cannot matter:
// the lock outlasts the send window.
func (s *Service) throttleSend(db *gorm.DB, email string, lockable bool) error {
	c, err := s.hit(db, s.keys.throttleKey(throttleSend, email), SendWindow, s.lockKey(email, lockable))
	if err != nil {
		return err
	}
	if c.Locked {
		if err := s.checkLocked(db, email); err != nil {
			return err
		}
	}
	if c.Count > SendLimit {
		s.stats.throttled.Add(1)
		return s.retryAfter(c.ResetAt)
	}
	return nil
}

// lockKey is the key of the address's failure counter for lockedSQL, or "" (which never locks)
// when the lock does not apply.
func (s *Service) lockKey(email string, lockable bool) string {
	if !lockable {
		return ""
	}
	return s.keys.throttleKey(throttleFailure, email)
}

// checkLocked fails with a RateLimitError while the address has used up its failed
// verifications; sends and verifies for it are refused until the window passes.
func (s *Service) checkLocked(db *gorm.DB, email string) error {
	var row models.AuthThrottle
	err := db.Where("key = ?", s.keys.throttleKey(throttleFailure, email)).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: reading failures: %w", err)
	}
	if row.Count >= s.maxFailures && s.now().Before(row.ResetAt) {
		s.stats.throttled.Add(1)
		return s.retryAfter(row.ResetAt)
	}
	return nil
}

// reserveFailure counts a comparison against the address before it is made, so parallel guesses
// cannot overshoot the cap; a successful sign-in clears the count (clearFailures). It returns the
// count, and when its window ends.
func (s *Service) reserveFailure(ctx context.Context, email string) (int, time.Time, error) {
	c, err := s.hit(s.db.WithContext(ctx), s.keys.throttleKey(throttleFailure, email), FailureWindow, "")
	return c.Count, c.ResetAt, err
}

// pastFailureCap fails with a RateLimitError when a reservation (reserveFailure) made the
// address's failure count pass the cap: the comparison it reserved must not be made.
func (s *Service) pastFailureCap(count int, resetAt time.Time) error {
	if count > s.maxFailures {
		s.stats.throttled.Add(1)
		return s.retryAfter(resetAt)
	}
	return nil
}

// clearFailures resets the address's consecutive failures, inside the sign-in transaction.
func (s *Service) clearFailures(tx *gorm.DB, email string) error {
	if err := models.Later(tx, "DELETE FROM auth_throttle WHERE key = ?", s.keys.throttleKey(throttleFailure, email)); err != nil {
		return fmt.Errorf("auth: clearing failures: %w", err)
	}
	return nil
}
