package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// SignIn is what a verified sign-in code writes: the account (Fresh, when this verification
// creates it, with its UserData), the code consumed (its ID and CodeHash), the address's failure
// counter cleared, the new Session, and, only when it creates the account, the Welcome e-mail.
// GraceCutoff is the deletion time at or before which a deleted account is past its grace period:
// it is purged and the address signs up afresh.
type SignIn struct {
	Fresh       User
	UserData    UserData
	Code        Verification
	FailureKey  string
	Session     Session
	Welcome     OutboxMessage
	GraceCutoff time.Time
	Now         time.Time
	// Admin makes the account an admin (its address is one of AUTH_ADMIN_EMAILS).
	Admin bool
	// Audit, when set, makes the audit events of the sign-in from its outcome; they are written
	// in the sign-in's transaction.
	Audit func(SignInOutcome) []AuditEvent
	// NoSignUp refuses to create an account (sign-up gating): a sign-in that would is
	// ErrSignUpClosed, and nothing is written.
	NoSignUp bool
	// DeviceKey, when set, records the device signing in as known to the account (KnownDevice);
	// NewDevice makes the notice queued when an existing account was not seen on it since
	// DeviceCutoff (it is called only then, so a sign-in from a known device prepares no e-mail).
	// A new account records its first device without a notice. A device seen after
	// DeviceFreshAfter is not written again.
	DeviceKey        string
	NewDevice        func(locale string) (OutboxMessage, error)
	DeviceCutoff     time.Time
	DeviceFreshAfter time.Time
}

// SignInOutcome is what a sign-in did, for its audit events: the account, whether it was created
// or restored from its deletion, whether the device was new to it (an existing account, and the
// new-device notice queued), and, when the sign-in made it an admin (SignIn.Admin), its role.
type SignInOutcome struct {
	UserID                       string
	Created, Restored, NewDevice bool
	PromotedTo                   string
}

// SignedIn is the account a sign-in signed in, and whether the sign-in created it.
type SignedIn struct {
	User    User
	Created bool
}

// upsertUserSQL inserts an account, or, when one holds the address, locks it as SELECT … FOR
// UPDATE would (the SET), and returns the row either way. Of two parallel first verifications
// exactly one inserts; the other waits for it and gets its row. An account that held the address
// and moves away meanwhile is no conflict: PostgreSQL tries the insert again. An existing account
// without a language (made before accounts had one) takes the sign-in's, in the same write.
const upsertUserSQL = `INSERT INTO users (id, email, name, email_verified, created_at, updated_at, locale) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (email) DO UPDATE SET email = excluded.email,
 locale = CASE WHEN users.locale = '' THEN excluded.locale ELSE users.locale END
RETURNING *`

// CompleteSignIn consumes the code and signs in, in one transaction: the account is created,
// restored or purged and created again (settleUser), the failure counter cleared and the session
// stored; a new account's welcome e-mail is queued with it. A code a parallel request consumed
// first is ErrLost, and nothing is written. When the connection breaks after the COMMIT was sent
// the error is ErrCommitUnknown: the session (SessionExists) tells whether it committed.
//
// The account row is inserted or locked before the code is consumed: every transaction that
// touches both an account and its codes takes them in that order (restore, address change,
// purge), so none can deadlock with another. On PostgreSQL the upsert and the consumption go to
// the database in one round trip, and the rest with the COMMIT.
func (s *Store) CompleteSignIn(ctx context.Context, in SignIn) (SignedIn, error) {
	var out SignedIn
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		fresh := in.Fresh
		var found []User
		if err := scanLater(tx, &found, upsertUserSQL, fresh.ID, fresh.Email, fresh.Name, fresh.EmailVerified, fresh.CreatedAt, fresh.UpdatedAt, fresh.Locale); err != nil {
			return fmt.Errorf("models: creating a user: %w", err)
		}
		// The device's row, if the account has one, goes in the same batch as the upsert (which
		// it sees), so reading it costs no round trip.
		var seen []KnownDevice
		if in.DeviceKey != "" {
			if err := scanLater(tx, &seen, `SELECT user_id, device_key, last_seen_at FROM known_devices
 WHERE device_key = ? AND user_id = (SELECT id FROM users WHERE email = ?)`, in.DeviceKey, fresh.Email); err != nil {
				return fmt.Errorf("models: reading a device: %w", err)
			}
		}
		if err := consumeCode(tx, in.Code); err != nil {
			return err
		}
		restored := len(found) == 1 && found[0].ID != in.Fresh.ID && found[0].DeletedAt.Valid &&
			found[0].DeletedAt.Time.After(in.GraceCutoff)
		user, created, err := settleUser(tx, in, found)
		if err != nil {
			return err
		}
		if created && in.NoSignUp {
			return ErrSignUpClosed
		}
		promoted := false
		if user, promoted, err = settleAccess(tx, in, user); err != nil {
			return err
		}
		if err := clearCounter(tx, in.FailureKey); err != nil {
			return err
		}
		in.Session.UserID = user.ID
		if err := insertLater(tx, &in.Session, ""); err != nil {
			return fmt.Errorf("models: creating a session: %w", err)
		}
		if created {
			// The welcome e-mail is queued with the account and delivered after the commit; a
			// failed delivery never undoes the sign-up.
			if err := enqueueOutbox(tx, &in.Welcome); err != nil {
				return err
			}
		}
		newDevice := false
		if in.DeviceKey != "" {
			if newDevice, err = noteDevice(tx, in, user, seen, !created); err != nil {
				return err
			}
		}
		if in.Audit != nil {
			o := SignInOutcome{UserID: user.ID, Created: created, Restored: restored, NewDevice: newDevice}
			if promoted {
				o.PromotedTo = user.Role
			}
			for _, event := range in.Audit(o) {
				if err := insertLater(tx, &event, ""); err != nil {
					return fmt.Errorf("models: recording the sign-in: %w", err)
				}
			}
		}
		if noting(tx) {
			if created {
				note(tx, Event{Type: EventUserCreated, UserID: user.ID, Data: map[string]any{"email": user.Email, "name": user.Name, "emailVerified": user.EmailVerified}})
			}
			if restored {
				note(tx, Event{Type: EventUserDeleted, UserID: user.ID, Data: map[string]any{"stage": StageRestored}})
			}
			note(tx, sessionCreated(in.Session))
		}
		out = SignedIn{User: user, Created: created}
		return nil
	})
	return out, err
}

// settleUser finishes what upsertUserSQL started, given the row it returned, and returns the
// account that signs in and whether it was created here (the returned row is the fresh one). A
// new account gets its sign-up effects. A soft-deleted account inside its grace period is
// restored by signing in; past it, it is purged and a new account is made. An existing account's
// row stays locked until the sign-in commits, so an address change or restore that commits
// meanwhile waits for it, and then ends the new session with the others; without the lock the
// new session could outlive the restore meant to end it.
func settleUser(tx *gorm.DB, in SignIn, found []User) (User, bool, error) {
	if len(found) != 1 {
		return User{}, false, fmt.Errorf("models: creating a user returned %d rows", len(found))
	}
	fresh, existing := in.Fresh, found[0]
	if existing.ID == fresh.ID {
		return fresh, true, signUpEffects(tx, fresh, in.UserData)
	}
	if existing.DeletedAt.Valid && !existing.DeletedAt.Time.After(in.GraceCutoff) {
		// Past its grace period the account is gone, whether or not the nightly purge has run:
		// purge it now and sign up afresh. The row is locked, and the purge's cutoff is the one
		// just checked, so it goes; a parallel sign-up for the address waits on the unique index.
		n, err := purgeUsers(tx, []string{existing.ID}, in.GraceCutoff)
		if err != nil {
			return User{}, false, err
		}
		if n != 1 {
			return User{}, false, fmt.Errorf("models: purging an account past its grace removed %d", n)
		}
		if err := tx.Create(&fresh).Error; err != nil {
			return User{}, false, fmt.Errorf("models: creating a user: %w", err)
		}
		return fresh, true, signUpEffects(tx, fresh, in.UserData)
	}
	if existing.DeletedAt.Valid || !existing.EmailVerified {
		// Signing in restores a deleted account, and the code just proved the address.
		if err := execLater(tx, "UPDATE users SET deleted_at = NULL, email_verified = ?, updated_at = ? WHERE id = ?", true, in.Now, existing.ID); err != nil {
			return User{}, false, fmt.Errorf("models: updating a user: %w", err)
		}
		existing.DeletedAt = gorm.DeletedAt{}
		existing.EmailVerified = true
		existing.UpdatedAt = in.Now
	}
	existing.CreatedAt, existing.UpdatedAt = existing.CreatedAt.UTC(), existing.UpdatedAt.UTC()
	return existing, false, nil
}

// noteDevice records the device of in as seen by user's account now, and, with notify, queues
// in.NewDevice unless seen (the device's row as it was before this sign-in, read in the batch of
// the account's upsert, so at no round trip of its own) says the account used it after
// in.DeviceCutoff. A device seen after in.DeviceFreshAfter is left as it is: the window is
// counted in days, and most sign-ins come from a device used the day before. The account's row
// is locked by the sign-in, so two sign-ins of one account from a new device cannot both find it
// new.
func noteDevice(tx *gorm.DB, in SignIn, user User, seen []KnownDevice, notify bool) (newDevice bool, err error) {
	userID := user.ID
	if len(seen) == 1 && seen[0].UserID != userID {
		// The row read belonged to the account the address had before this sign-in purged it
		// (past its grace period) and made a new one: the new account has seen nothing.
		seen = nil
	}
	if len(seen) == 1 && seen[0].LastSeenAt.After(in.DeviceFreshAfter) {
		return false, nil
	}
	if notify && (len(seen) == 0 || !seen[0].LastSeenAt.After(in.DeviceCutoff)) {
		notice, err := in.NewDevice(user.Locale)
		if err != nil {
			return false, err
		}
		if err := enqueueOutbox(tx, &notice); err != nil {
			return false, fmt.Errorf("models: queueing the new-device notice: %w", err)
		}
		newDevice = true
	}
	err = execLater(tx, `INSERT INTO known_devices (user_id, device_key, last_seen_at) VALUES (?, ?, ?)
 ON CONFLICT (user_id, device_key) DO UPDATE SET last_seen_at = excluded.last_seen_at`, userID, in.DeviceKey, in.Now)
	if err != nil {
		return false, fmt.Errorf("models: recording a device: %w", err)
	}
	return newDevice, nil
}

// settleAccess decides, on the account's locked row, whether it may sign in: a ban in force
// refuses it (ErrBanned, and the transaction rolls back, the code unspent); a ban past its expiry
// is lifted. An account whose address AUTH_ADMIN_EMAILS lists (in.Admin) gets the admin role,
// and promoted reports that it did.
// A ban and a sign-in of one account are serialised by that row's lock (Ban writes it before
// it ends the sessions), so no session of a banned account is left behind.
func settleAccess(tx *gorm.DB, in SignIn, user User) (_ User, promoted bool, _ error) {
	if user.Role == "" {
		user.Role = RoleUser // a fresh row, whose role the database's default sets
	}
	if user.Banned {
		if user.BanExpires == nil || user.BanExpires.After(in.Now) {
			return User{}, false, ErrBanned
		}
		if err := execLater(tx, "UPDATE users SET banned = ?, ban_reason = NULL, ban_expires = NULL WHERE id = ?", false, user.ID); err != nil {
			return User{}, false, fmt.Errorf("models: lifting an expired ban: %w", err)
		}
		user.Banned, user.BanReason, user.BanExpires = false, nil, nil
	}
	if in.Admin && !slices.Contains(strings.Split(user.Role, ","), RoleAdmin) {
		role := RoleAdmin
		if user.Role != RoleUser {
			role = user.Role + "," + RoleAdmin
		}
		if err := execLater(tx, "UPDATE users SET role = ? WHERE id = ?", role, user.ID); err != nil {
			return User{}, false, fmt.Errorf("models: making an admin: %w", err)
		}
		user.Role = role
		promoted = true
	}
	return user, promoted, nil
}

// signUpEffects runs in the transaction that creates the account: its UserData row, and every
// purchase made with its address before the account existed is linked to it.
func signUpEffects(tx *gorm.DB, user User, ud UserData) error {
	ud.UserID = user.ID
	if err := ensureUserData(tx, &ud); err != nil {
		return err
	}
	if err := execLater(tx, "UPDATE purchases SET user_id = ? WHERE email = ? AND user_id IS NULL", user.ID, user.Email); err != nil {
		return fmt.Errorf("models: linking purchases: %w", err)
	}
	return nil
}

// ensureUserData creates the UserData row ud unless its user has one.
func ensureUserData(tx *gorm.DB, ud *UserData) error {
	if err := insertLater(tx, ud, " ON CONFLICT (user_id) DO NOTHING"); err != nil {
		return fmt.Errorf("models: creating user data: %w", err)
	}
	return nil
}

// SessionExists reports whether the session id is stored: after ErrCommitUnknown, whether the
// sign-in that created it committed.
func (s *Store) SessionExists(ctx context.Context, id string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&Session{}).Where("id = ?", id).Count(&n).Error
	return n == 1, err
}

// Preferences returns the UserData of defaults.UserID, creating it as defaults for accounts that
// predate it.
func (s *Store) Preferences(ctx context.Context, defaults UserData) (UserData, error) {
	db := s.db.WithContext(ctx)
	var ud UserData
	err := db.Where("user_id = ?", defaults.UserID).Take(&ud).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if err := ensureUserData(db, &defaults); err != nil {
			return UserData{}, err
		}
		err = db.Where("user_id = ?", defaults.UserID).Take(&ud).Error
	}
	if err != nil {
		return UserData{}, fmt.Errorf("models: reading user data: %w", err)
	}
	return ud, nil
}
