package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Accounts: reading and changing them, moving them to another address and back, deleting and
// purging them. Codes and links bound to an account have its id as their subject, or its id, a
// ':' and more (a restore link's old address), as Verification says; purges and restores rely on
// that.

// subjectsOf is the LIKE pattern of the subjects bound to the account userID after a ':'. A user
// id is a UUID, so it holds no LIKE wildcard.
func subjectsOf(userID string) string { return userID + ":%" }

// User reads the live account id; ErrNotFound when there is none (or it is deleted).
func (s *Store) User(ctx context.Context, id string) (User, error) {
	return readUser(s.db.WithContext(ctx), id)
}

// UserWithDeleted reads the account id, live or in its deletion grace period; ErrNotFound when
// there is none.
func (s *Store) UserWithDeleted(ctx context.Context, id string) (User, error) {
	return readUser(s.db.WithContext(ctx).Unscoped(), id)
}

// UserByEmailWithDeleted reads the account holding the address email, live or in its deletion
// grace period; ErrNotFound when there is none.
func (s *Store) UserByEmailWithDeleted(ctx context.Context, email string) (User, error) {
	var u User
	if err := s.db.WithContext(ctx).Unscoped().Where("email = ?", email).Take(&u).Error; err != nil {
		return User{}, notFound(err, "reading an account")
	}
	u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
	return u, nil
}

func readUser(db *gorm.DB, id string) (User, error) {
	var u User
	if err := db.Where("id = ?", id).Take(&u).Error; err != nil {
		return User{}, notFound(err, "reading an account")
	}
	u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
	return u, nil
}

// AddressTaken reports whether an account, live or in its deletion grace period, has the address.
func (s *Store) AddressTaken(ctx context.Context, email string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Unscoped().Model(&User{}).Where("email = ?", email).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("models: looking an address up: %w", err)
	}
	return n > 0, nil
}

// SetUserLocale makes locale the language of the live account id's e-mails; ErrNotFound when there
// is no such account. It is a preference, not part of the profile better-auth shows, so the
// account's updated_at stays.
func (s *Store) SetUserLocale(ctx context.Context, id, locale string) error {
	n, err := execNow(s.db.WithContext(ctx), "UPDATE users SET locale = ? WHERE id = ? AND deleted_at IS NULL", locale, id)
	if err != nil {
		return fmt.Errorf("models: setting an account's language: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// UserChanges is a change to a live account's profile: Name when set, and the image when
// SetImage (nil Image clears it), at UpdatedAt.
type UserChanges struct {
	Name      *string
	SetImage  bool
	Image     *string
	UpdatedAt time.Time
}

// UpdateUser applies c to the live account id and returns it; ErrNotFound when there is none.
// With nothing to change it only reads the account.
func (s *Store) UpdateUser(ctx context.Context, id string, c UserChanges) (User, error) {
	db := s.db.WithContext(ctx)
	changes := map[string]any{}
	if c.Name != nil {
		changes["name"] = *c.Name
	}
	if c.SetImage {
		changes["image"] = nil
		if c.Image != nil {
			changes["image"] = *c.Image
		}
	}
	if len(changes) > 0 {
		changes["updated_at"] = c.UpdatedAt
		res := db.Model(&User{}).Where("id = ?", id).Updates(changes)
		if res.Error != nil {
			return User{}, fmt.Errorf("models: updating a user: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return User{}, ErrNotFound
		}
	}
	return readUser(db, id)
}

// EmailChange moves account UserID from OldEmail to NewEmail with the code or link Code: every
// session but KeepSession ends, the account's pending changes (codes and links of
// PendingPurposes) go, NewEmail's failure counters (FailureKeys) are cleared, and the old address
// gets RestoreLink, announced by Notice.
type EmailChange struct {
	UserID, OldEmail, NewEmail string
	Code                       Verification
	KeepSession                string
	PendingPurposes            []string
	FailureKeys                []string
	RestoreLink                Verification
	Notice                     OutboxMessage
	Now                        time.Time
}

// ApplyEmailChange runs an EmailChange in one transaction and returns the account and the ids of
// the sessions it ended. ErrAddressTaken when another account took NewEmail meanwhile; ErrLost
// when the account's address changed or the code was used meanwhile.
func (s *Store) ApplyEmailChange(ctx context.Context, c EmailChange) (User, []string, error) {
	var revoked []string
	var user User
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		// The account row first, then the code: the order of every transaction that touches both.
		res := tx.Model(&User{}).Where("id = ? AND email = ?", c.UserID, c.OldEmail).
			Updates(map[string]any{"email": c.NewEmail, "email_verified": true, "updated_at": c.Now})
		if errors.Is(res.Error, gorm.ErrDuplicatedKey) {
			return ErrAddressTaken
		}
		if res.Error != nil {
			return fmt.Errorf("models: changing the address: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrLost
		}
		note(tx, Event{Type: EventUserEmailChanged, UserID: c.UserID, Data: map[string]any{"email": c.NewEmail, "previousEmail": c.OldEmail}})
		if err := consumeCode(tx, c.Code); err != nil {
			return err
		}
		var err error
		if revoked, err = endSessions(tx, c.UserID, c.KeepSession, ReasonEmailChanged); err != nil {
			return err
		}
		if err := tx.Where("subject = ? AND purpose IN ?", c.UserID, c.PendingPurposes).Delete(&Verification{}).Error; err != nil {
			return err
		}
		for _, key := range c.FailureKeys {
			if err := clearCounter(tx, key); err != nil {
				return err
			}
		}
		if err := upsertCode(tx, &c.RestoreLink); err != nil {
			return err
		}
		if err := enqueueOutbox(tx, &c.Notice); err != nil {
			return err
		}
		if err := sendNow(tx, "writing the address change"); err != nil {
			return err
		}
		user, err = readUser(tx, c.UserID)
		return err
	})
	if err != nil {
		return User{}, nil, err
	}
	return user, revoked, nil
}

// EmailRestore gives account UserID its old address Email back with the restore link Code
// (purpose RestorePurpose): a deletion is undone, every session ends, the restore links of every
// change made since the link (created at or after Code.CreatedAt) go, and so do the account's
// pending changes (PendingPurposes). An account deleted at or before GraceCutoff is past saving.
type EmailRestore struct {
	UserID, Email   string
	Code            Verification
	RestorePurpose  string
	PendingPurposes []string
	GraceCutoff     time.Time
	Now             time.Time
}

// RestoreEmail runs an EmailRestore in one transaction and returns the account as it was before
// it (locked and read again, so what it is now, not when the link's page opened), and the ids of
// the sessions it ended. ErrNotFound when the account is gone or past its grace period;
// ErrAddressTaken when another account holds Email; ErrLost when the link was used meanwhile.
func (s *Store) RestoreEmail(ctx context.Context, r EmailRestore) (User, []string, error) {
	var revoked []string
	var user User
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		// The account row first, locked and read again, then the link: the order of every
		// transaction that touches both.
		if err := forUpdate(tx.Unscoped()).Where("id = ?", r.UserID).Take(&user).Error; err != nil {
			return notFound(err, "locking an account")
		}
		if user.DeletedAt.Valid && !user.DeletedAt.Time.After(r.GraceCutoff) {
			return ErrNotFound
		}
		err := tx.Unscoped().Model(&User{}).Where("id = ?", r.UserID).
			Updates(map[string]any{"email": r.Email, "email_verified": true, "updated_at": r.Now, "deleted_at": nil}).Error
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return ErrAddressTaken
		}
		if err != nil {
			return fmt.Errorf("models: restoring the address: %w", err)
		}
		if err := consumeCode(tx, r.Code); err != nil {
			return err
		}
		if revoked, err = endSessions(tx, r.UserID, "", ReasonEmailRestored); err != nil {
			return err
		}
		if user.Email != r.Email {
			note(tx, Event{Type: EventUserEmailChanged, UserID: r.UserID, Data: map[string]any{"email": r.Email, "previousEmail": user.Email, "restored": true}})
		}
		if user.DeletedAt.Valid {
			note(tx, Event{Type: EventUserDeleted, UserID: r.UserID, Data: map[string]any{"stage": StageRestored}})
		}
		if err := tx.Where("purpose = ? AND subject LIKE ? AND created_at >= ?", r.RestorePurpose, subjectsOf(r.UserID), r.Code.CreatedAt).
			Delete(&Verification{}).Error; err != nil {
			return err
		}
		return tx.Where("subject = ? AND purpose IN ?", r.UserID, r.PendingPurposes).Delete(&Verification{}).Error
	})
	if err != nil {
		return User{}, nil, err
	}
	return user, revoked, nil
}

// AccountDeletion soft-deletes account UserID from its session SessionID at Now: every session
// ends, the account's pending codes and links go (restore links, bound to an old address, stay),
// and the e-mails Notices returns are queued: it is given the account, and the live restore links
// of RestorePurpose, whose old addresses may need telling.
type AccountDeletion struct {
	UserID, SessionID string
	RestorePurpose    string
	Notices           func(user User, links []Verification) ([]OutboxMessage, error)
	Now               time.Time
}

// DeleteAccount runs an AccountDeletion in one transaction and returns the ids of the sessions it
// ended. ErrNotFound when the account is gone, or the session was ended meanwhile: the account
// row is locked, then the session checked again, so a restore that committed since the request
// was authenticated (and ended the session) is not undone by a deletion from the session it
// ended.
func (s *Store) DeleteAccount(ctx context.Context, d AccountDeletion) ([]string, error) {
	var revoked []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		// The last admin in force does not delete the account the service is run with
		// (ErrLastAdmin), as it could not be demoted, banned or removed.
		if err := keepAnAdmin(tx, d.UserID, d.Now); err != nil {
			return err
		}
		var user User
		if err := forUpdate(tx).Where("id = ?", d.UserID).Take(&user).Error; err != nil {
			return notFound(err, "locking an account")
		}
		var live int64
		if err := tx.Model(&Session{}).Where("id = ? AND user_id = ?", d.SessionID, d.UserID).Count(&live).Error; err != nil {
			return err
		}
		if live == 0 {
			return ErrNotFound
		}
		if err := tx.Model(&User{}).Where("id = ?", d.UserID).
			Updates(map[string]any{"deleted_at": d.Now, "updated_at": d.Now}).Error; err != nil {
			return fmt.Errorf("models: deleting an account: %w", err)
		}
		note(tx, Event{Type: EventUserDeleted, UserID: d.UserID, Data: map[string]any{"stage": StageRequested, "email": user.Email}})
		var err error
		if revoked, err = endSessions(tx, d.UserID, "", ReasonAccountDeleted); err != nil {
			return err
		}
		if err := tx.Where("subject = ?", d.UserID).Delete(&Verification{}).Error; err != nil {
			return err
		}
		var links []Verification
		if err := tx.Where("purpose = ? AND subject LIKE ? AND expires_at > ?", d.RestorePurpose, subjectsOf(d.UserID), d.Now).
			Find(&links).Error; err != nil {
			return err
		}
		mails, err := d.Notices(user, links)
		if err != nil {
			return err
		}
		for i := range mails {
			if err := enqueueOutbox(tx, &mails[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return revoked, err
}

// endSessions deletes the user's sessions except keep, and the sessions the user opened as other
// accounts (an admin's impersonations, which the user's authority no longer backs), inside tx,
// and returns their ids; each is a session.revoked event, for reason.
func endSessions(tx *gorm.DB, userID, keep, reason string) ([]string, error) {
	q := tx.Model(&Session{}).Where("(user_id = ? OR impersonated_by = ?)", userID, userID)
	if keep != "" {
		q = q.Where("id <> ?", keep)
	}
	return deleteSessions(tx, q, reason)
}

// endImpersonations deletes the sessions adminID opened as other accounts, inside tx, and
// returns their ids: the admin's authority, which they rested on, is gone (demoted, banned,
// removed).
func endImpersonations(tx *gorm.DB, adminID, reason string) ([]string, error) {
	return deleteSessions(tx, tx.Model(&Session{}).Where("impersonated_by = ?", adminID), reason)
}

// deleteSessions deletes the sessions q selects and returns their ids, noting a session.revoked
// event for each, for reason.
func deleteSessions(tx *gorm.DB, q *gorm.DB, reason string) ([]string, error) {
	var found []struct{ ID, UserID string }
	if err := q.Select("id", "user_id").Scan(&found).Error; err != nil {
		return nil, fmt.Errorf("models: reading sessions to end: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = f.ID
		if noting(tx) {
			note(tx, revokedEvents(f.UserID, reason, []string{f.ID})...)
		}
	}
	if err := tx.Where("id IN ?", ids).Delete(&Session{}).Error; err != nil {
		return nil, fmt.Errorf("models: ending sessions: %w", err)
	}
	return ids, nil
}

// purgeBatch is how many accounts one transaction of PurgeDeleted removes.
const purgeBatch = 100

// PurgeDeleted removes the accounts deleted at or before cutoff, a hundred per transaction, and
// returns how many (see purgeUsers).
func (s *Store) PurgeDeleted(ctx context.Context, cutoff time.Time) (int64, error) {
	var ids []string
	if err := s.db.WithContext(ctx).Unscoped().Model(&User{}).Where("deleted_at IS NOT NULL AND deleted_at <= ?", cutoff).
		Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("models: finding accounts to purge: %w", err)
	}
	var purged int64
	for start := 0; start < len(ids); start += purgeBatch {
		n, err := s.PurgeAccounts(ctx, ids[start:min(start+purgeBatch, len(ids))], cutoff)
		purged += n
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// PurgeAccounts removes, in one transaction, those of the accounts ids still deleted at or before
// cutoff (one may have been restored since it was picked), and returns how many (see purgeUsers).
func (s *Store) PurgeAccounts(ctx context.Context, ids []string, cutoff time.Time) (int64, error) {
	var n int64
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var err error
		n, err = purgeUsers(tx, ids, cutoff)
		return err
	})
	return n, err
}

// purgeUsers hard-deletes, inside tx, those of the users ids that are still deleted since before
// cutoff, and returns how many. The account rows are locked first, as every transaction touching
// an account and its codes does. The foreign keys cascade to sessions, accounts, user data and
// consent events; purchases, codes, links and the outbox are handled here so nothing depends on
// them.
func purgeUsers(tx *gorm.DB, ids []string, cutoff time.Time) (int64, error) {
	var users []User
	if err := forUpdate(tx.Unscoped()).Where("id IN ? AND deleted_at IS NOT NULL AND deleted_at <= ?", ids, cutoff).
		Find(&users).Error; err != nil {
		return 0, fmt.Errorf("models: locking accounts to purge: %w", err)
	}
	if len(users) == 0 {
		return 0, nil
	}
	if err := eraseUsers(tx, users); err != nil {
		return 0, err
	}
	return int64(len(users)), nil
}

// eraseUsers hard-deletes the users, whose rows tx has locked, with what belongs to them: their
// codes and links, the records of e-mail to them that could not be delivered, their sessions,
// accounts, user data, consent events and known devices; their purchases are kept, unlinked. The purge of
// deleted accounts and an admin's removal share it.
func eraseUsers(tx *gorm.DB, users []User) error {
	ids := make([]string, len(users))
	emails := make([]string, len(users))
	for i, u := range users {
		ids[i], emails[i] = u.ID, u.Email
		// The account's own codes and links go: address changes and restore links. Sign-in codes
		// belong to the address, not the account: one asked for just now makes a new account.
		if err := tx.Where("subject = ? OR subject LIKE ?", u.ID, subjectsOf(u.ID)).Delete(&Verification{}).Error; err != nil {
			return err
		}
	}
	// The records of e-mail to the account's address that could not be delivered go with it
	// (delivered e-mail leaves none); e-mail still waiting may be a sign-in code just asked for,
	// and is left to be delivered. (Notices to its former addresses, which may belong to other
	// accounts now, are left to the outbox's own retention.)
	if err := forgetGivenUp(tx, emails); err != nil {
		return fmt.Errorf("models: purging the record of e-mail: %w", err)
	}
	if err := tx.Model(&Purchase{}).Where("user_id IN ?", ids).Update("user_id", nil).Error; err != nil {
		return err
	}
	// Sessions the accounts opened as others (an admin's impersonations) end with them.
	if err := tx.Where("impersonated_by IN ?", ids).Delete(&Session{}).Error; err != nil {
		return err
	}
	for _, m := range []any{&Session{}, &Account{}, &UserData{}, &ConsentEvent{}, &KnownDevice{}} {
		if err := tx.Where("user_id IN ?", ids).Delete(m).Error; err != nil {
			return err
		}
	}
	if err := tx.Unscoped().Where("id IN ?", ids).Delete(&User{}).Error; err != nil {
		return fmt.Errorf("models: purging accounts: %w", err)
	}
	for _, u := range users {
		note(tx, Event{Type: EventUserDeleted, UserID: u.ID, Data: map[string]any{"stage": StagePurged, "email": u.Email}})
	}
	return nil
}

// SetConsent records a change of defaults.UserID's marketing consent to event.Granted (creating
// its UserData as defaults if missing) with event as its evidence, in one transaction. It reports
// false, and records nothing, when the consent already was as asked, so parallel grants (or
// withdrawals) leave one flag and one event. A grant keeps when it was given; a withdrawal clears
// it.
func (s *Store) SetConsent(ctx context.Context, defaults UserData, event ConsentEvent) (bool, error) {
	changed := false
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		if err := ensureUserData(tx, &defaults); err != nil {
			return err
		}
		if err := sendNow(tx, "creating user data"); err != nil {
			return err
		}
		var since any
		if event.Granted {
			since = event.CreatedAt
		}
		res := tx.Model(&UserData{}).Where("user_id = ? AND marketing_opt_in = ?", defaults.UserID, !event.Granted).
			Updates(map[string]any{"marketing_opt_in": event.Granted, "marketing_opt_in_at": since, "updated_at": event.CreatedAt})
		if res.Error != nil {
			return fmt.Errorf("models: changing consent: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		if err := tx.Create(&event).Error; err != nil {
			return fmt.Errorf("models: recording consent: %w", err)
		}
		kind := EventConsentWithdrawn
		if event.Granted {
			kind = EventConsentGranted
		}
		note(tx, Event{Type: kind, UserID: defaults.UserID, Data: map[string]any{"purpose": "marketing"}})
		changed = true
		return nil
	})
	return changed, err
}

// Purchase reads the purchase id; ErrNotFound when there is none.
func (s *Store) Purchase(ctx context.Context, id string) (Purchase, error) {
	var p Purchase
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&p).Error; err != nil {
		return Purchase{}, notFound(err, "reading a purchase")
	}
	return p, nil
}

// ClaimPurchase links the purchase id to userID unless another account has it, and reports
// whether it is now the user's (claiming one's own again is true).
func (s *Store) ClaimPurchase(ctx context.Context, id, userID string) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Purchase{}).
		Where("id = ? AND (user_id IS NULL OR user_id = ?)", id, userID).Update("user_id", userID)
	if res.Error != nil {
		return false, fmt.Errorf("models: claiming a purchase: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}
