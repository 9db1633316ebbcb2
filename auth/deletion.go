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

// DeletionGrace is the configured grace period.
func (s *Service) DeletionGrace() time.Duration { return s.deletionGrace }

// DeleteAccount soft-deletes the account: every session ends at once, the person is told by
// e-mail when the data goes, and signing in before then restores the account as it was. It
// returns the moment the data goes.
func (s *Service) DeleteAccount(ctx context.Context, userID string) (time.Time, error) {
	now := s.now()
	purgeAt := now.Add(s.deletionGrace)
	var revoked []string
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var user models.User
		if err := tx.Where("id = ?", userID).Take(&user).Error; err != nil {
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
		if err := tx.Where("subject = ? OR subject LIKE ?", userID, userID+":%").Delete(&models.Verification{}).Error; err != nil {
			return err
		}
		m, err := s.compose.AccountDeleted(user.Email, purgeAt.Format("2 January 2006"))
		return s.queue(tx, m, err, mail.EnqueueOptions{})
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
// sessions, codes, preferences and consent records. Purchases are kept, unlinked.
func (s *Service) PurgeDeletedAccounts(ctx context.Context) (int64, error) {
	cutoff := s.now().Add(-s.deletionGrace)
	var users []models.User
	if err := s.db.WithContext(ctx).Unscoped().Where("deleted_at IS NOT NULL AND deleted_at <= ?", cutoff).
		Find(&users).Error; err != nil {
		return 0, fmt.Errorf("auth: finding accounts to purge: %w", err)
	}
	var purged int64
	for start := 0; start < len(users); start += 100 {
		batch := users[start:min(start+100, len(users))]
		if err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return purgeUsers(tx, batch) }); err != nil {
			return purged, err
		}
		purged += int64(len(batch))
	}
	return purged, nil
}

// purgeUsers hard-deletes users inside tx. The foreign keys cascade to sessions, accounts, user
// data and consent events; purchases and codes are handled here so nothing depends on them.
func purgeUsers(tx *gorm.DB, users []models.User) error {
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = u.ID
		if err := tx.Where("subject = ? OR subject = ? OR subject LIKE ?", u.Email, u.ID, u.ID+":%").
			Delete(&models.Verification{}).Error; err != nil {
			return err
		}
	}
	if err := tx.Model(&models.Purchase{}).Where("user_id IN ?", ids).Update("user_id", nil).Error; err != nil {
		return err
	}
	for _, m := range []any{&models.Session{}, &models.Account{}, &models.UserData{}, &models.ConsentEvent{}} {
		if err := tx.Where("user_id IN ?", ids).Delete(m).Error; err != nil {
			return err
		}
	}
	if err := tx.Unscoped().Where("id IN ?", ids).Delete(&models.User{}).Error; err != nil {
		return fmt.Errorf("auth: purging accounts: %w", err)
	}
	return nil
}
