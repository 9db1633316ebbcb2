package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// SendCode is a code send: the send counted against the address (Count), and, when the count
// stays within Limit and the address is not locked, the code stored (replacing the live one for
// its purpose and subject) with its e-mail queued.
type SendCode struct {
	Count Count
	Limit int
	Code  Verification
	// Mail makes the code's e-mail. It is given the language of the account that has Code's
	// address ("" when there is none, or it has no language), read in the send's transaction.
	Mail func(locale string) (OutboxMessage, error)
	// Reuse, when set, is asked for the e-mail that sends the live code for Code's purpose,
	// subject and address again (in the account's language, as Mail), when there is one with a
	// sealed code, attempts left (of MaxAttempts) and time left: that code and its attempt budget
	// are then kept, and Code and Mail are not stored. Reuse answers ErrNotReusable to have them
	// stored after all (a code sealed under another AUTH_SECRET).
	Reuse       func(live Verification, locale string) (OutboxMessage, error)
	MaxAttempts int
}

// Issued is what a SendCode did: the address's count, and whether the code was stored (Stored)
// or the live one sent again (Reused). Neither when the count refused the send.
type Issued struct {
	Counted
	Stored, Reused bool
}

// ErrNotReusable is SendCode.Reuse declining the live code.
var ErrNotReusable = errors.New("models: the live code cannot be sent again")

// accountLocaleQuery reads the language of the account that has an address, deleted or not: a
// code to an address with an account is that account's e-mail. It answers one row whether or not
// there is an account ("" when none), so reading it takes the same work either way and its time
// does not tell whether the address has an account.
const accountLocaleQuery = `SELECT COALESCE((SELECT locale FROM users WHERE email = ?), '') AS locale`

// accountLocale is accountLocaleQuery's row.
type accountLocale struct{ Locale string }

// liveCodeQuery reads the live code a resend can send again (SendCode.Reuse).
const liveCodeQuery = `SELECT * FROM verifications WHERE purpose = ? AND subject = ? AND email = ?
 AND attempts < ? AND NOT exhausted AND expires_at > ? AND sealed_code IS NOT NULL`

// IssueCode runs a SendCode in one transaction, so one commit makes the count, the code (or the
// live code's resend) and its e-mail durable together; a refused send is committed alone, and
// still counts.
//
// The count comes first: its upsert locks the address's counter row until the commit, so the
// sends of one address take turns, and the live code is read (in the count's round trip on
// PostgreSQL) only once the send before has committed. Of two sends at once, the second then
// sends the code the first made again, and never a code the first is replacing, whose e-mail
// would supersede the live one's. The account's language is read in the same round trip, and the
// e-mail made in it; the lookup is made whether or not the address has an account, so the work
// done does not tell.
func (s *Store) IssueCode(ctx context.Context, in SendCode) (Issued, error) {
	var out Issued
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		result, err := countLater(tx, in.Count)
		if err != nil {
			return err
		}
		var account []accountLocale
		if err := scanLater(tx, &account, accountLocaleQuery, in.Code.Email); err != nil {
			return fmt.Errorf("models: reading the account's language: %w", err)
		}
		var live []Verification
		if in.Reuse != nil {
			err = scanNow(tx, &live, liveCodeQuery, in.Code.Purpose, in.Code.Subject, in.Code.Email, in.MaxAttempts, in.Code.CreatedAt)
		} else {
			err = sendNow(tx, "counting a send")
		}
		if err != nil {
			return fmt.Errorf("models: reading the live code: %w", err)
		}
		c, err := result()
		if err != nil {
			return err
		}
		out.Counted = c
		if c.Locked || c.Count > in.Limit {
			return nil
		}
		locale := ""
		if len(account) == 1 { // always, but for a driver that answers no row
			locale = account[0].Locale
		}
		if len(live) == 1 {
			live[0].ExpiresAt, live[0].CreatedAt = live[0].ExpiresAt.UTC(), live[0].CreatedAt.UTC()
			m, err := in.Reuse(live[0], locale)
			switch {
			case err == nil:
				out.Reused = true
				return enqueueOutbox(tx, &m)
			case !errors.Is(err, ErrNotReusable):
				return err
			}
		}
		m, err := in.Mail(locale)
		if err != nil {
			return err
		}
		if err := upsertCode(tx, &in.Code); err != nil {
			return err
		}
		out.Stored = true
		return enqueueOutbox(tx, &m)
	})
	if err != nil {
		return Issued{Counted: out.Counted}, err
	}
	return out, nil
}

// ReplaceCode stores v, replacing the live code or link for its purpose and subject, and queues
// its e-mail, in one transaction.
func (s *Store) ReplaceCode(ctx context.Context, v Verification, mail OutboxMessage) error {
	return s.transaction(ctx, func(tx *gorm.DB) error {
		if err := upsertCode(tx, &v); err != nil {
			return err
		}
		return enqueueOutbox(tx, &mail)
	})
}

// upsertCode stores v inside tx, replacing any code for its purpose and subject in a single
// upsert; the row gets v's new id, so work in flight against the old code cannot touch the new
// one.
func upsertCode(tx *gorm.DB, v *Verification) error {
	err := insertLater(tx, v, ` ON CONFLICT (purpose, subject) DO UPDATE SET id = excluded.id, email = excluded.email,
 code_hash = excluded.code_hash, attempts = excluded.attempts, exhausted = excluded.exhausted,
 expires_at = excluded.expires_at, created_at = excluded.created_at, sealed_code = excluded.sealed_code`)
	if err != nil {
		return fmt.Errorf("models: storing a code: %w", err)
	}
	return nil
}

// Attempt is one attempt at the live code for Purpose and Subject, sent to Email, spent before
// the comparison. LockKey, when set, makes it lockable: nothing is spent while that failure
// counter locks the address (count >= MaxFailures in a window not ended at Now), and the
// comparison to come is reserved on that counter (a failure counted in advance; a new window ends
// at FailureResetAt).
type Attempt struct {
	Purpose, Subject, Email string
	MaxAttempts             int
	Now                     time.Time
	LockKey                 string
	MaxFailures             int
	FailureResetAt          time.Time
	// ID, when set, spends the attempt only on that code row: a sign-in link names the code it
	// carries, so a link to a code already used or replaced spends nothing of the code after it.
	ID string
}

// SpentAttempt is a code an attempt was spent on and, for a lockable attempt, the address's count
// of failures with the comparison to come reserved, and when that count's window ends.
type SpentAttempt struct {
	Verification
	Failures        int
	FailuresResetAt time.Time
}

// spendAttemptQuery spends one attempt of the live code for a purpose and subject, sent to the
// address the request names, unless the address is locked (lockedSQL), and returns the row. A
// code sent to another address (a change code's subject is the account, not the address) is
// left alone: a guess at it could never match, and must neither spend its attempts nor count
// against the address named (which anyone could then lock out without sending it anything).
const spendAttemptQuery = `UPDATE verifications SET attempts = attempts + 1
 WHERE purpose = ? AND subject = ? AND email = ? AND attempts < ? AND expires_at > ? AND (? = '' OR CAST(id AS TEXT) = ?) AND NOT ` + lockedSQL + `
 RETURNING *`

// spendAndReserveQuery is spendAttemptQuery followed, when it spent an attempt, by the failure
// reservation (a counter upsert like hitQuery's, on the key lockedSQL checked), in one statement
// and one round trip.
const spendAndReserveQuery = `WITH spent AS (` + spendAttemptQuery + `),
reserved AS (INSERT INTO auth_throttle (key, count, reset_at, updated_at) SELECT ?, 1, ?, ? FROM spent
` + countConflictSQL + `
 RETURNING count, reset_at)
SELECT spent.*, reserved.count AS failures, reserved.reset_at AS failures_reset_at FROM spent LEFT JOIN reserved ON true`

// SpendAttempt spends one attempt (see Attempt), committed on its own before the comparison, so
// parallel guesses, on one instance or many, can never make more than MaxAttempts comparisons in
// total, and a failure later in the request cannot roll the count back. It returns nil when no
// attempt could be spent: the code is gone, expired, out of attempts, sent to another address,
// or the address is locked. On PostgreSQL the attempt and the reservation are one statement
// (spendAndReserveQuery); SQLite, which cannot modify in a WITH, runs in the process and makes the
// reservation as a second statement right after.
func (s *Store) SpendAttempt(ctx context.Context, a Attempt) (*SpentAttempt, error) {
	db := s.db.WithContext(ctx)
	lockable := a.LockKey != ""
	args := []any{a.Purpose, a.Subject, a.Email, a.MaxAttempts, a.Now, a.ID, a.ID, a.LockKey, a.MaxFailures, a.Now}
	together := lockable && s.postgres
	query := spendAttemptQuery
	if together {
		query = spendAndReserveQuery
		args = append(args, a.LockKey, a.FailureResetAt, a.Now, a.Now, a.Now)
	}
	var rows []SpentAttempt
	if err := scanNow(db, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("models: counting an attempt: %w", err)
	}
	if len(rows) != 1 {
		return nil, nil
	}
	spent := &rows[0]
	if lockable && !together {
		c, err := count(db, Count{Key: a.LockKey, ResetAt: a.FailureResetAt, Now: a.Now})
		if err != nil {
			return nil, err
		}
		spent.Failures, spent.FailuresResetAt = c.Count, c.ResetAt
	}
	spent.FailuresResetAt = spent.FailuresResetAt.UTC()
	return spent, nil
}

// Code reads the code for purpose and subject sent to email; ErrNotFound when there is none.
func (s *Store) Code(ctx context.Context, purpose, subject, email string) (Verification, error) {
	var v Verification
	err := s.db.WithContext(ctx).Where("purpose = ? AND subject = ? AND email = ?", purpose, subject, email).Take(&v).Error
	if err != nil {
		return Verification{}, notFound(err, "reading a code")
	}
	return v, nil
}

// CodeByID reads the code or link id of purpose; ErrNotFound when there is none.
func (s *Store) CodeByID(ctx context.Context, id, purpose string) (Verification, error) {
	var v Verification
	err := s.db.WithContext(ctx).Where("id = ? AND purpose = ?", id, purpose).Take(&v).Error
	if err != nil {
		return Verification{}, notFound(err, "reading a link")
	}
	return v, nil
}

// DeleteCode deletes the code id (an expired one, found by a verification).
func (s *Store) DeleteCode(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Where("id = ?", id).Delete(&Verification{}).Error
}

// MarkCodeExhausted marks the code id as out of attempts, and reports whether this call did: of
// parallel requests that find the budget spent, exactly one gets true.
func (s *Store) MarkCodeExhausted(ctx context.Context, id string) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Verification{}).Where("id = ? AND exhausted = ?", id, false).Update("exhausted", true)
	if res.Error != nil {
		return false, fmt.Errorf("models: marking a code exhausted: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// consumeCode deletes the matched code inside tx, or fails with ErrLost: exactly one of any
// number of parallel requests holding the same right code consumes it.
func consumeCode(tx *gorm.DB, v Verification) error {
	n, err := execNow(tx, "DELETE FROM verifications WHERE id = ? AND code_hash = ?", v.ID, v.CodeHash)
	if err != nil {
		return fmt.Errorf("models: consuming a code: %w", err)
	}
	if n != 1 {
		return ErrLost
	}
	return nil
}
