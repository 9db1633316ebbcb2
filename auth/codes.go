package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codeauth/mail"
	"codeauth/models"

	"gorm.io/gorm"
)

// SendSignInCode issues a sign-in code for the address and e-mails it. It answers the same way
// whether or not an account exists: the account is only created when the code is verified.
// A new code replaces the previous one for the same address, with a fresh attempt budget.
// An address gets SendLimit codes per SendWindow, counted in the database across instances, and
// none while it is locked by failed verifications; both refusals are RateLimitErrors.
func (s *Service) SendSignInCode(ctx context.Context, rawEmail string) error {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return err
	}
	// The send is counted in the transaction that stores the code and its e-mail, so one commit
	// makes both durable. A refused send is committed alone: it still counts.
	var refused error
	err = models.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		if err := s.throttleSend(tx, email, true); err != nil {
			if errors.Is(err, ErrRateLimited) {
				refused = err
				return nil
			}
			return err
		}
		// The outbox delivers the e-mail after the commit, so the answer never waits on (or
		// reveals anything through) the provider.
		code, v, err := s.issueCode(tx, PurposeSignIn, email, email)
		if err != nil {
			return err
		}
		m, err := s.compose.SignInCode(email, code)
		return s.queue(tx, m, err, mail.EnqueueOptions{ExpiresAt: &v.ExpiresAt, Supersede: "sign-in-code:" + email})
	})
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	s.outbox.Kick()
	return nil
}

// issueCode stores a new code for purpose and subject inside tx, replacing any live one in a
// single upsert (the row gets a new id, so work in flight against the old code cannot touch the
// new one), and returns the code and the stored row.
func (s *Service) issueCode(tx *gorm.DB, purpose, subject, email string) (string, models.Verification, error) {
	code, err := generateCode()
	if err != nil {
		return "", models.Verification{}, err
	}
	now := s.now()
	v := models.Verification{
		ID:        newID(),
		Purpose:   purpose,
		Subject:   subject,
		Email:     email,
		CodeHash:  s.keys.codeHash(purpose, subject, email, code),
		Attempts:  0,
		ExpiresAt: now.Add(OTPLifetime),
		CreatedAt: now,
	}
	err = models.LaterInsert(tx, &v, ` ON CONFLICT (purpose, subject) DO UPDATE SET id = excluded.id, email = excluded.email,
 code_hash = excluded.code_hash, attempts = excluded.attempts, exhausted = excluded.exhausted,
 expires_at = excluded.expires_at, created_at = excluded.created_at`)
	if err != nil {
		return "", models.Verification{}, fmt.Errorf("auth: storing a code: %w", err)
	}
	s.stats.codesIssued.Add(1)
	return code, v, nil
}

// checkCode spends one attempt of the live code for purpose and subject and compares it with
// code. On a match it returns the row, which the caller must consume (consumeCode) in the
// transaction that acts on it; a failed transaction leaves the code usable.
//
// The attempt is spent by one conditional UPDATE committed on its own before the comparison, so
// parallel guesses, on one instance or many, can never make more than OTPMaxAttempts comparisons
// in total, and a failure later in the request cannot roll the count back. The same statement
// returns the row and, when lockable, spends nothing while failed verifications lock the address
// (checkLocked); it also reserves the comparison against the address's cap of failures
// (reserveFailure, in the same statement on PostgreSQL and right after it on SQLite); past the
// cap it fails with a RateLimitError instead of comparing.
func (s *Service) checkCode(ctx context.Context, purpose, subject, email, code string, lockable bool) (*models.Verification, error) {
	if !validCodeShape(code) {
		if lockable {
			if err := s.checkLocked(s.db.WithContext(ctx), email); err != nil {
				return nil, err
			}
		}
		return nil, ErrInvalidOTP
	}
	now := s.now()
	a, err := s.spendAttempt(ctx, purpose, subject, email, lockable, now)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, s.spentCode(ctx, purpose, subject, email, lockable, now)
	}
	if lockable {
		if err := s.pastFailureCap(a.Failures, a.FailuresResetAt); err != nil {
			return nil, err
		}
	}
	s.stats.codeComparisons.Add(1)
	if !sameHash(a.CodeHash, s.keys.codeHash(purpose, subject, email, code)) {
		return nil, ErrInvalidOTP
	}
	return &a.Verification, nil
}

// spentAttempt is a code an attempt was spent on and, for a lockable code, the address's count
// of failures with the comparison to come reserved, and when that count's window ends.
type spentAttempt struct {
	models.Verification
	Failures        int
	FailuresResetAt time.Time
}

// spendAttempt spends one attempt of the live code for purpose and subject, with the address's
// failure reservation when lockable, and returns it; nil when no attempt could be spent. On
// PostgreSQL both are one statement (spendAndReserveQuery); SQLite, which cannot modify in a
// WITH, runs in the process and makes the reservation as a second statement.
func (s *Service) spendAttempt(ctx context.Context, purpose, subject, email string, lockable bool, now time.Time) (*spentAttempt, error) {
	db := s.db.WithContext(ctx)
	lockKey := s.lockKey(email, lockable)
	args := []any{purpose, subject, email, OTPMaxAttempts, now, lockKey, s.maxFailures, now}
	together := lockable && s.db.Dialector.Name() == "postgres"
	query := spendAttemptQuery
	if together {
		query = spendAndReserveQuery
		args = append(args, lockKey, now.Add(FailureWindow), now, now, now)
	}
	var rows []spentAttempt
	if err := models.NowScan(db, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("auth: counting an attempt: %w", err)
	}
	if len(rows) != 1 {
		return nil, nil
	}
	a := &rows[0]
	if lockable && !together {
		var err error
		if a.Failures, a.FailuresResetAt, err = s.reserveFailure(ctx, email); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// spendAttemptQuery spends one attempt of the live code for a purpose and subject, sent to the
// address the request names, unless the address is locked (lockedSQL), and returns the row. A
// code sent to another address (a change code's subject is the account, not the address) is
// left alone: a guess at it could never match, and must neither spend its attempts nor count
// against the address named (which anyone could then lock out without sending it anything).
const spendAttemptQuery = `UPDATE verifications SET attempts = attempts + 1
 WHERE purpose = ? AND subject = ? AND email = ? AND attempts < ? AND expires_at > ? AND NOT ` + lockedSQL + `
 RETURNING *`

// spendAndReserveQuery is spendAttemptQuery followed, when it spent an attempt, by the failure
// reservation of reserveFailure (a counter upsert like hitQuery's, on the key lockedSQL checked),
// in one statement and one round trip.
const spendAndReserveQuery = `WITH spent AS (` + spendAttemptQuery + `),
reserved AS (INSERT INTO auth_throttle (key, count, reset_at, updated_at) SELECT ?, 1, ?, ? FROM spent
` + countConflictSQL + `
 RETURNING count, reset_at)
SELECT spent.*, reserved.count AS failures, reserved.reset_at AS failures_reset_at FROM spent LEFT JOIN reserved ON true`

// spentCode explains why no attempt could be spent on the code for purpose and subject: the
// address is locked (when lockable), or the code is gone (used or replaced, or sent to another
// address), expired, or out of attempts. Out of attempts is reported as ErrTooManyAttempts once, to the request that marks the
// row exhausted, and as ErrInvalidOTP after that (better-auth's sequence). An exhausted row is not
// deleted: one of the comparisons reserved before the budget ran out may still be consuming it.
func (s *Service) spentCode(ctx context.Context, purpose, subject, email string, lockable bool, now time.Time) error {
	db := s.db.WithContext(ctx)
	if lockable {
		if err := s.checkLocked(db, email); err != nil {
			return err
		}
	}
	var v models.Verification
	err := db.Where("purpose = ? AND subject = ? AND email = ?", purpose, subject, email).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrInvalidOTP
	}
	if err != nil {
		return fmt.Errorf("auth: reading a code: %w", err)
	}
	if !now.Before(v.ExpiresAt) {
		db.Where("id = ?", v.ID).Delete(&models.Verification{})
		return ErrOTPExpired
	}
	if v.Attempts >= OTPMaxAttempts {
		res := db.Model(&models.Verification{}).Where("id = ? AND exhausted = ?", v.ID, false).Update("exhausted", true)
		if res.Error != nil {
			return fmt.Errorf("auth: marking a code exhausted: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			// A parallel request reported the exhaustion first.
			return ErrInvalidOTP
		}
		return ErrTooManyAttempts
	}
	return ErrInvalidOTP
}

// consumeCode deletes the matched code inside tx. Exactly one of any number of parallel requests
// holding the same right code gets true; the others lost the race and must fail.
func consumeCode(tx *gorm.DB, v *models.Verification) (bool, error) {
	n, err := models.Now(tx, "DELETE FROM verifications WHERE id = ? AND code_hash = ?", v.ID, v.CodeHash)
	if err != nil {
		return false, fmt.Errorf("auth: consuming a code: %w", err)
	}
	return n == 1, nil
}
