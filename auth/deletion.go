package auth

import (
	"context"
	"fmt"
	"time"

	"codeauth/mail"
	"codeauth/models"

	"gorm.io/gorm"
)

// DefaultDeletionGrace is how long a deleted account can be restored by signing in, unless
// AUTH_DELETION_GRACE says otherwise.
const DefaultDeletionGrace = 30 * 24 * time.Hour

// JobPurgeAccounts is the nightly task that removes accounts past their grace period.
const JobPurgeAccounts = "auth:purge-accounts"

// pastGrace reports whether the account was deleted longer ago than the grace period: it is gone,
// whether or not the nightly purge has run, and nothing restores it.
func (s *Service) pastGrace(u models.User) bool { return s.pastGraceAt(u, s.now()) }

// pastGraceAt is pastGrace at the time now: deleted at or before now less the grace period, the
// cutoff purgeUsers takes.
func (s *Service) pastGraceAt(u models.User, now time.Time) bool {
	return u.DeletedAt.Valid && !u.DeletedAt.Time.After(now.Add(-s.deletionGrace))
}

// DeleteAccount soft-deletes the account of the signed-in session, which must be fresh: every
// session ends at once, the person is told by e-mail when the data goes, and signing in before
// then restores the account as it was. Restore links of recent address changes keep working (and
// undo the deletion too), and each of those old addresses is told: someone who took the account
// over and then deleted it must not destroy the owner's way back. It returns the moment the data
// goes.
func (s *Service) DeleteAccount(ctx context.Context, st *SessionState) (time.Time, error) {
	if err := s.requireFresh(st); err != nil {
		return time.Time{}, err
	}
	userID := st.User.ID
	now := s.now()
	purgeAt := now.Add(s.deletionGrace)
	var revoked []string
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The account row is locked, then the session checked again: a restore that committed
		// since the request was authenticated has ended it, and must not be undone by a deletion
		// from the session it ended.
		var user models.User
		if err := models.ForUpdate(tx).Where("id = ?", userID).Take(&user).Error; err != nil {
			return notFoundAs(err, ErrUserNotFound, "locking an account")
		}
		var live int64
		if err := tx.Model(&models.Session{}).Where("id = ? AND user_id = ?", st.Session.ID, userID).Count(&live).Error; err != nil {
			return err
		}
		if live == 0 {
			return ErrUserNotFound
		}
		if err := tx.Model(&models.User{}).Where("id = ?", userID).
			Updates(map[string]any{"deleted_at": now, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("auth: deleting an account: %w", err)
		}
		var err error
		if revoked, err = s.endSessions(tx, userID, ""); err != nil {
			return err
		}
		// Pending address changes die with the account; restore links do not.
		if err := tx.Where("subject = ?", userID).Delete(&models.Verification{}).Error; err != nil {
			return err
		}
		m, err := s.compose.AccountDeleted(user.Email, purgeAt)
		if err := s.queue(tx, m, err, mail.EnqueueOptions{}); err != nil {
			return err
		}
		var links []models.Verification
		if err := tx.Where("purpose = ? AND subject LIKE ? AND expires_at > ?", purposeRestore, restoreSubjects(userID), now).
			Find(&links).Error; err != nil {
			return err
		}
		for _, link := range links {
			if link.Email == user.Email {
				continue
			}
			// The link works until it expires or the account is purged, whichever comes first.
			m, err := s.compose.FormerAddressDeleted(link.Email, user.Email, purgeAt, minTime(link.ExpiresAt, purgeAt))
			if err := s.queue(tx, m, err, mail.EnqueueOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	s.revokeLocally(revoked)
	s.outbox.Kick()
	s.log.InfoContext(ctx, "account deleted, restorable until purge", "user_id", userID, "purge_at", purgeAt)
	return purgeAt, nil
}

// PurgeDeletedAccounts removes the accounts deleted longer ago than the grace period, with their
// sessions, address-change codes, restore links, records of e-mail given up, preferences and
// consent records. Purchases are kept, unlinked.
func (s *Service) PurgeDeletedAccounts(ctx context.Context) (int64, error) {
	cutoff := s.now().Add(-s.deletionGrace)
	var ids []string
	if err := s.db.WithContext(ctx).Unscoped().Model(&models.User{}).Where("deleted_at IS NOT NULL AND deleted_at <= ?", cutoff).
		Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("auth: finding accounts to purge: %w", err)
	}
	var purged int64
	for start := 0; start < len(ids); start += 100 {
		batch := ids[start:min(start+100, len(ids))]
		err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			n, err := purgeUsers(tx, batch, cutoff)
			purged += n
			return err
		})
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// purgeUsers hard-deletes, inside tx, those of the users ids that are still deleted since before
// cutoff (one may have been restored since it was picked), and returns how many. The account rows
// are locked first, as every transaction touching an account and its codes does. The foreign keys
// cascade to sessions, accounts, user data and consent events; purchases, codes, links and the
// outbox are handled here so nothing depends on them.
func purgeUsers(tx *gorm.DB, ids []string, cutoff time.Time) (int64, error) {
	var users []models.User
	if err := models.ForUpdate(tx.Unscoped()).Where("id IN ? AND deleted_at IS NOT NULL AND deleted_at <= ?", ids, cutoff).
		Find(&users).Error; err != nil {
		return 0, fmt.Errorf("auth: locking accounts to purge: %w", err)
	}
	if len(users) == 0 {
		return 0, nil
	}
	ids = make([]string, len(users))
	emails := make([]string, len(users))
	for i, u := range users {
		ids[i], emails[i] = u.ID, u.Email
		// The account's own codes and links go: address changes and restore links. Sign-in codes
		// belong to the address, not the account: one asked for just now makes a new account.
		if err := tx.Where("subject = ? OR subject LIKE ?", u.ID, restoreSubjects(u.ID)).
			Delete(&models.Verification{}).Error; err != nil {
			return 0, err
		}
	}
	// The records of e-mail to the account's address that could not be delivered go with it
	// (delivered e-mail leaves none); e-mail still waiting may be a sign-in code just asked for,
	// and is left to be delivered. (Notices to its former addresses, which may belong to other
	// accounts now, are left to the outbox's own retention.)
	if err := models.ForgetGivenUp(tx, emails); err != nil {
		return 0, fmt.Errorf("auth: purging the record of e-mail: %w", err)
	}
	if err := tx.Model(&models.Purchase{}).Where("user_id IN ?", ids).Update("user_id", nil).Error; err != nil {
		return 0, err
	}
	for _, m := range []any{&models.Session{}, &models.Account{}, &models.UserData{}, &models.ConsentEvent{}} {
		if err := tx.Where("user_id IN ?", ids).Delete(m).Error; err != nil {
			return 0, err
		}
	}
	if err := tx.Unscoped().Where("id IN ?", ids).Delete(&models.User{}).Error; err != nil {
		return 0, fmt.Errorf("auth: purging accounts: %w", err)
	}
	return int64(len(users)), nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
