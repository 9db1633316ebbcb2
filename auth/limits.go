package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"codeauth/models"
)

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

// limitStore is the storage of the counters: models.Store implements it.
type limitStore interface {
	Count(ctx context.Context, c models.Count) (models.Counted, error)
	Counter(ctx context.Context, key string) (models.AuthThrottle, error)
}

// sendCount is the count of one send to email, against its send budget; with lockable, it also
// asks whether failed verifications have locked the address.
func (s *Service) sendCount(email string, lockable bool) models.Count {
	now := s.now()
	return models.Count{Key: s.keys.throttleKey(throttleSend, email), ResetAt: now.Add(SendWindow), Now: now,
		LockKey: s.lockKey(email, lockable), MaxFailures: s.maxFailures}
}

// retryAfter is the wait until resetAt, at least a second.
func (s *Service) retryAfter(resetAt time.Time) *RateLimitError {
	d := resetAt.Sub(s.now())
	if d < time.Second {
		d = time.Second
	}
	return &RateLimitError{RetryAfter: d}
}

// throttleSend spends one of the address's SendLimit sends, or fails with a RateLimitError.
// With lockable, an address locked by failed verifications is refused too (checkLocked), in the
// same round trip; the refused send is still counted, which cannot matter: the lock outlasts the
// send window.
func (s *Service) throttleSend(ctx context.Context, email string, lockable bool) error {
	count := s.sendCount(email, lockable)
	c, err := s.store.Count(ctx, count)
	if err != nil {
		return err
	}
	if c.Locked || c.Count > SendLimit {
		return s.sendRefused(ctx, email, count, c)
	}
	return nil
}

// sendRefused is the RateLimitError of a send refused after count, which counted c: the address
// is locked (until its failures' window ends), or its sends are used up (until theirs does). The
// lock is looked at again at the count's own time, so the look agrees with the count's.
func (s *Service) sendRefused(ctx context.Context, email string, count models.Count, c models.Counted) error {
	if c.Locked {
		if err := s.checkLockedAt(ctx, email, count.Now); err != nil {
			return err
		}
	}
	s.stats.throttledSends.Add(1)
	if c.Count > SendLimit {
		return s.retryAfter(c.ResetAt)
	}
	// The failures were cleared (a sign-in succeeded) between the count and the look: the send
	// was refused all the same, and may be asked again at once.
	return s.retryAfter(s.now())
}

// lockKey is the key of the address's failure counter, which locks it, or "" (which never locks)
// when the lock does not apply.
func (s *Service) lockKey(email string, lockable bool) string {
	if !lockable {
		return ""
	}
	return s.keys.throttleKey(throttleFailure, email)
}

// checkLocked fails with a RateLimitError while the address has used up its failed
// verifications; sends and verifies for it are refused until the window passes.
func (s *Service) checkLocked(ctx context.Context, email string) error {
	return s.checkLockedAt(ctx, email, s.now())
}

// checkLockedAt is checkLocked at the time now.
func (s *Service) checkLockedAt(ctx context.Context, email string, now time.Time) error {
	row, err := s.store.Counter(ctx, s.keys.throttleKey(throttleFailure, email))
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: reading failures: %w", err)
	}
	if row.Count >= s.maxFailures && now.Before(row.ResetAt) {
		s.stats.throttledLocked.Add(1)
		return s.retryAfter(row.ResetAt)
	}
	return nil
}

// pastFailureCap fails with a RateLimitError when the reservation of a comparison (made with the
// attempt) made the address's failure count pass the cap: the comparison must not be made.
func (s *Service) pastFailureCap(count int, resetAt time.Time) error {
	if count > s.maxFailures {
		s.stats.throttledLocked.Add(1)
		return s.retryAfter(resetAt)
	}
	return nil
}
