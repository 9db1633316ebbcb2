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

// SignInInput is one verification request.
type SignInInput struct {
	Email string
	Code  string
	// Name is used only when this verification creates the account.
	Name   string
	Client ClientMeta
}

// SignInResult is a successful verification.
type SignInResult struct {
	SessionState
	// Created reports whether this verification created the account (a sign-up).
	Created bool
}

// ErrSignInUnconfirmed means the database broke off before it confirmed a sign-in's commit and
// could not be asked afterwards whether it had committed: the code may have been used, so the
// person should ask for a new one rather than try it again.
var ErrSignInUnconfirmed = errors.New("auth: the sign-in could not be confirmed")

// confirmTimeout bounds the look, after a commit that was not acknowledged, at whether it
// committed: the request is already waiting on a broken connection.
const confirmTimeout = 3 * time.Second

// SignIn verifies a sign-in code and opens a session. An address without an account gets one
// here, and nowhere else: an account exists only once someone has proved they read its mailbox.
// Past the cap of consecutive failed verifications for the address, it fails with a
// RateLimitError without comparing; a successful sign-in resets the count.
//
// Consuming the code, creating the account with its UserData and linking earlier purchases, and
// creating the session happen in one transaction; if it fails, the code stays usable. The welcome
// e-mail is queued in that transaction and delivered after the commit; a failed delivery does not
// undo the sign-up. When the connection breaks after the COMMIT was sent, the session it stored
// tells whether the sign-in happened: if it is there, the sign-in succeeds as if nothing had
// gone wrong (the token is still in hand); if it cannot be found out, ErrSignInUnconfirmed.
func (s *Service) SignIn(ctx context.Context, in SignInInput) (*SignInResult, error) {
	email, err := NormalizeEmail(in.Email)
	if err != nil {
		return nil, err
	}
	name, err := ValidateName(in.Name)
	if err != nil {
		return nil, err
	}
	v, err := s.checkCode(ctx, PurposeSignIn, email, email, in.Code, true)
	if err != nil {
		s.stats.failedVerifications.Add(1)
		return nil, err
	}

	var res SignInResult
	err = models.Transaction(ctx, s.db, func(tx *gorm.DB) error {
		// The account row is inserted or locked before the code is consumed: every transaction
		// that touches both an account and its codes takes them in that order (restore, address
		// change, purge), so none can deadlock with another. Both statements go to the database
		// in one round trip. A lost race for the code rolls back the account it created.
		fresh := s.newUser(email, name)
		var found []models.User
		if err := models.LaterScan(tx, &found, upsertUserSQL, fresh.ID, fresh.Email, fresh.Name, fresh.EmailVerified, fresh.CreatedAt, fresh.UpdatedAt); err != nil {
			return fmt.Errorf("auth: creating a user: %w", err)
		}
		ok, err := consumeCode(tx, v)
		if err != nil {
			return err
		}
		if !ok {
			return ErrInvalidOTP
		}
		user, created, err := s.settleUser(tx, fresh, found)
		if err != nil {
			return err
		}
		if err := s.clearFailures(tx, email); err != nil {
			return err
		}
		token, sess, err := s.createSession(tx, user.ID, in.Client)
		if err != nil {
			return err
		}
		if created {
			// The welcome e-mail is queued with the account and delivered after the commit; a
			// failed delivery never undoes the sign-up.
			m, err := s.compose.Welcome(user.Email)
			if err := s.queue(tx, m, err, mail.EnqueueOptions{}); err != nil {
				return err
			}
		}
		res = SignInResult{SessionState: SessionState{Session: sess, User: user, Token: token}, Created: created}
		return nil
	})
	if errors.Is(err, models.ErrCommitUnknown) {
		err = s.confirmCommit(ctx, res.Session.ID, err)
	}
	if err != nil {
		s.stats.failedVerifications.Add(1)
		return nil, err
	}
	s.stats.signIns.Add(1)
	if res.Created {
		s.stats.signUps.Add(1)
		s.log.InfoContext(ctx, "account created", "user_id", res.User.ID)
		s.outbox.Kick()
	}
	return &res, nil
}

// confirmCommit settles a sign-in whose commit was not acknowledged (unknown, the error): it
// committed exactly when its session exists. A session that is not there is no proof of a
// rollback (the server may still be running the COMMIT it received), so that, like a failed
// look, is ErrSignInUnconfirmed.
func (s *Service) confirmCommit(ctx context.Context, sessionID string, unknown error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
	defer cancel()
	var n int64
	if err := s.db.WithContext(ctx).Model(&models.Session{}).Where("id = ?", sessionID).Count(&n).Error; err == nil && n == 1 {
		s.log.WarnContext(ctx, "a sign-in's commit was not acknowledged, and was found committed", "error", unknown)
		return nil
	}
	return fmt.Errorf("%w: %w", ErrSignInUnconfirmed, unknown)
}

// newUser is the account a first verification of email creates.
func (s *Service) newUser(email, name string) models.User {
	now := s.now()
	return models.User{ID: newID(), Email: email, Name: name, EmailVerified: true, CreatedAt: now, UpdatedAt: now}
}

// upsertUserSQL inserts an account, or, when one holds the address, locks it as SELECT … FOR
// UPDATE would (the no-op SET), and returns the row either way. Of two parallel first
// verifications exactly one inserts; the other waits for it and gets its row. An account that
// held the address and moves away meanwhile is no conflict: PostgreSQL tries the insert again.
const upsertUserSQL = `INSERT INTO users (id, email, name, email_verified, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (email) DO UPDATE SET email = excluded.email
RETURNING *`

// settleUser finishes what upsertUser started, given the fresh account it tried to insert and
// the row it returned, and returns the account that signs in and whether it was created here
// (the returned row is the fresh one). A new account gets its sign-up effects. A soft-deleted
// account inside its grace period is restored by signing in; past it, it is purged and a new
// account is made. An existing account's row stays locked until the sign-in commits, so an
// address change or restore that commits meanwhile waits for it, and then ends the new session
// with the others; without the lock the new session could outlive the restore meant to end it.
func (s *Service) settleUser(tx *gorm.DB, fresh models.User, found []models.User) (models.User, bool, error) {
	if len(found) != 1 {
		return models.User{}, false, fmt.Errorf("auth: creating a user returned %d rows", len(found))
	}
	existing := found[0]
	if existing.ID == fresh.ID {
		return fresh, true, s.signUpEffects(tx, fresh)
	}
	now := s.now()
	if s.pastGraceAt(existing, now) {
		// Past its grace period the account is gone, whether or not the nightly purge has run:
		// purge it now and sign up afresh. The row is locked, and the purge's cutoff is the one
		// just checked, so it goes; a parallel sign-up for the address waits on the unique index.
		n, err := purgeUsers(tx, []string{existing.ID}, now.Add(-s.deletionGrace))
		if err != nil {
			return models.User{}, false, err
		}
		if n != 1 {
			return models.User{}, false, fmt.Errorf("auth: purging an account past its grace removed %d", n)
		}
		if err := tx.Create(&fresh).Error; err != nil {
			return models.User{}, false, fmt.Errorf("auth: creating a user: %w", err)
		}
		return fresh, true, s.signUpEffects(tx, fresh)
	}
	if existing.DeletedAt.Valid || !existing.EmailVerified {
		// Signing in restores a deleted account, and the code just proved the address.
		if err := models.Later(tx, "UPDATE users SET deleted_at = NULL, email_verified = ?, updated_at = ? WHERE id = ?", true, now, existing.ID); err != nil {
			return models.User{}, false, fmt.Errorf("auth: updating a user: %w", err)
		}
		existing.DeletedAt = gorm.DeletedAt{}
		existing.EmailVerified = true
		existing.UpdatedAt = now
	}
	existing.CreatedAt, existing.UpdatedAt = existing.CreatedAt.UTC(), existing.UpdatedAt.UTC()
	return existing, false, nil
}

// signUpEffects runs in the transaction that creates the account: the UserData row, and every
// purchase made with this address before the account existed is linked to it.
func (s *Service) signUpEffects(tx *gorm.DB, user models.User) error {
	if err := s.ensureUserData(tx, user.ID); err != nil {
		return err
	}
	if err := models.Later(tx, "UPDATE purchases SET user_id = ? WHERE email = ? AND user_id IS NULL", user.ID, user.Email); err != nil {
		return fmt.Errorf("auth: linking purchases: %w", err)
	}
	return nil
}

// ensureUserData creates the user's UserData row with its defaults if it does not exist.
func (s *Service) ensureUserData(tx *gorm.DB, userID string) error {
	now := s.now()
	ud := models.UserData{ID: newID(), UserID: userID, MarketingOptIn: false, IsTrialEligible: true, CreatedAt: now, UpdatedAt: now}
	if err := models.LaterInsert(tx, &ud, " ON CONFLICT (user_id) DO NOTHING"); err != nil {
		return fmt.Errorf("auth: creating user data: %w", err)
	}
	return nil
}

// Preferences returns the user's UserData, creating the default row for accounts that predate
// it.
func (s *Service) Preferences(ctx context.Context, userID string) (models.UserData, error) {
	db := s.db.WithContext(ctx)
	var ud models.UserData
	err := db.Where("user_id = ?", userID).Take(&ud).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if err := s.ensureUserData(db, userID); err != nil {
			return models.UserData{}, err
		}
		err = db.Where("user_id = ?", userID).Take(&ud).Error
	}
	if err != nil {
		return models.UserData{}, fmt.Errorf("auth: reading user data: %w", err)
	}
	return ud, nil
}
