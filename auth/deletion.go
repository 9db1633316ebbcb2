package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codeauth/mail"
	"codeauth/models"
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

// deletionStore is the storage of deletions: models.Store implements it.
type deletionStore interface {
	DeleteAccount(ctx context.Context, d models.AccountDeletion) ([]string, error)
	PurgeDeleted(ctx context.Context, cutoff time.Time) (int64, error)
}

// DeleteAccount soft-deletes the account of the signed-in session, which must be fresh: every
// session ends at once, the person is told by e-mail when the data goes, and signing in before
// then restores the account as it was. Restore links of recent address changes keep working (and
// undo the deletion too), and each of those old addresses is told: someone who took the account
// over and then deleted it must not destroy the owner's way back. It returns the moment the data
// goes.
func (s *Service) DeleteAccount(ctx context.Context, st *SessionState) (time.Time, error) {
	if err := ownerOnly(st); err != nil {
		return time.Time{}, err
	}
	if err := s.requireFresh(st); err != nil {
		return time.Time{}, err
	}
	userID := st.User.ID
	now := s.now()
	purgeAt := now.Add(s.deletionGrace)
	revoked, err := s.store.DeleteAccount(ctx, models.AccountDeletion{
		UserID: userID, SessionID: st.Session.ID, RestorePurpose: purposeRestore, Now: now,
		Notices: func(user models.User, links []models.Verification) ([]models.OutboxMessage, error) {
			return s.deletionNotices(user, links, purgeAt)
		},
	})
	if errors.Is(err, models.ErrNotFound) {
		return time.Time{}, ErrUserNotFound
	}
	if errors.Is(err, models.ErrLastAdmin) {
		return time.Time{}, ErrLastAdmin
	}
	if err != nil {
		return time.Time{}, err
	}
	s.revokeLocally(revoked)
	s.log.InfoContext(ctx, "account deleted, restorable until purge", "user_id", userID, "purge_at", purgeAt)
	s.record(ctx, AuditDeletionRequested, userID, userID, map[string]any{"purge_at": purgeAt, "sessions_ended": len(revoked)})
	return purgeAt, nil
}

// deletionNotices are the e-mails of an account's deletion, which goes at purgeAt: to its
// address, and to each old address whose live restore link (links) can still undo it.
func (s *Service) deletionNotices(user models.User, links []models.Verification, purgeAt time.Time) ([]models.OutboxMessage, error) {
	compose := s.compose.In(user.Locale) // the account's language, for its old addresses too
	d, err := compose.AccountDeleted(user.Email, purgeAt)
	m, err := s.prepare(d, err, mail.EnqueueOptions{})
	if err != nil {
		return nil, err
	}
	out := []models.OutboxMessage{m}
	for _, link := range links {
		if link.Email == user.Email {
			continue
		}
		// The link works until it expires or the account is purged, whichever comes first.
		d, err := compose.FormerAddressDeleted(link.Email, user.Email, purgeAt, minTime(link.ExpiresAt, purgeAt))
		m, err := s.prepare(d, err, mail.EnqueueOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// PurgeDeletedAccounts removes the accounts deleted longer ago than the grace period, with their
// sessions, address-change codes, restore links, records of e-mail given up, preferences and
// consent records. Purchases are kept, unlinked.
func (s *Service) PurgeDeletedAccounts(ctx context.Context) (int64, error) {
	n, err := s.store.PurgeDeleted(ctx, s.now().Add(-s.deletionGrace))
	if n > 0 {
		s.record(ctx, AuditPurged, "", "", map[string]any{"accounts": n})
	}
	if err != nil {
		return n, fmt.Errorf("auth: purging deleted accounts: %w", err)
	}
	return n, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
