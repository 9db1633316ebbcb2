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
	throttleSend          = "send"
	throttleFailure       = "fail"
	throttleChangeSend    = "change-send"
	throttleChangeFailure = "change-fail"
	// throttleMiss counts the guesses at a code that is not there (missedCode).
	throttleMiss = "miss"
)

// codeLimits are the counters, by the address it goes to, that one kind of code is held to.
type codeLimits struct {
	// name says which codes, in the audit log.
	name string
	// send counts the codes sent (SendLimit per SendWindow).
	send string
	// failure counts failed verifications (the service's cap per FailureWindow): each
	// comparison is reserved on it, and past the cap it locks the address for these codes.
	failure string
	// alsoLocked, when set, is another failure counter whose lock refuses these codes too.
	alsoLocked string
	// notify e-mails the address when its failures lock it (notifyPaused).
	notify bool
}

// The limits of each kind of code. A change code's guesses and sends have counters of their own:
// anyone with an account can have change codes go to any address (withheld when the address is
// another account's), and counted as sign-in guesses they locked the address's owner out of
// signing in, silently, for a day at a time. An address locked by sign-in guesses gets no change
// code either: its guesses cannot go on through the change (pre-hijacking, catalogue #20, #91).
// Together an address takes at most twice the cap of guesses a window, within NIST SP 800-63B's
// 100.
var (
	signInCodes = codeLimits{name: "sign-in", send: throttleSend, failure: throttleFailure, notify: true}
	changeCodes = codeLimits{name: "e-mail change", send: throttleChangeSend, failure: throttleChangeFailure, alsoLocked: throttleFailure}
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

// sendCount is the count of one send of l's codes to email, against its send budget; it also asks
// whether l's failed verifications have locked the address.
func (s *Service) sendCount(email string, l codeLimits) models.Count {
	now := s.now()
	return models.Count{Key: s.keys.throttleKey(l.send, email), ResetAt: now.Add(SendWindow), Now: now,
		LockKey: s.keys.throttleKey(l.failure, email), MaxFailures: s.maxFailures}
}

// retryAfter is the wait until resetAt, at least a second.
func (s *Service) retryAfter(resetAt time.Time) *RateLimitError {
	d := resetAt.Sub(s.now())
	if d < time.Second {
		d = time.Second
	}
	return &RateLimitError{RetryAfter: d}
}

// throttleSend spends one of the address's SendLimit sends of l's codes, or fails with a
// RateLimitError. An address locked by l's failed verifications is refused too, in the same round
// trip; the refused send is still counted, which cannot matter: the lock outlasts the send window.
// One locked by l.alsoLocked is refused before anything is counted.
func (s *Service) throttleSend(ctx context.Context, email string, l codeLimits) error {
	if l.alsoLocked != "" {
		if err := s.checkLockedAt(ctx, l.alsoLocked, email, s.now()); err != nil {
			return err
		}
	}
	count := s.sendCount(email, l)
	c, err := s.store.Count(ctx, count)
	if err != nil {
		return err
	}
	if c.Locked || c.Count > SendLimit {
		return s.sendRefused(ctx, email, l, count, c)
	}
	return nil
}

// sendRefused is the RateLimitError of a send refused after count, which counted c: the address
// is locked (until its failures' window ends), or its sends are used up (until theirs does). The
// lock is looked at again at the count's own time, so the look agrees with the count's.
func (s *Service) sendRefused(ctx context.Context, email string, l codeLimits, count models.Count, c models.Counted) error {
	if c.Locked {
		if err := s.checkLockedAt(ctx, l.failure, email, count.Now); err != nil {
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

// checkLockedAt fails with a RateLimitError while the failure counter of kind for the address
// locks it at the time now.
func (s *Service) checkLockedAt(ctx context.Context, kind, email string, now time.Time) error {
	row, err := s.store.Counter(ctx, s.keys.throttleKey(kind, email))
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
