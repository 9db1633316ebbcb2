package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The session statements. The reads are the one query of every protected request that the
// cookie cache cannot answer; their readers, which bypass GORM, are in sessionreads.go.

// ReadSession reads the live session whose token hashes to hash, joined to its live account,
// into sess and user, and reports whether there is one (a signed-out or unknown token, or a
// deleted account, is none). Times are UTC. On PostgreSQL reads that arrive together share one
// query (batchReader); ErrSessionReadsBusy when too many wait for the database.
func (s *Store) ReadSession(ctx context.Context, hash string, sess *Session, user *User) (bool, error) {
	// The reader is picked by a branch here rather than called through an interface: the caller
	// already reaches this method through auth's interface, and a second dynamic call (or a
	// method of sessionReaders, which the compiler does not inline) would add to every read.
	var err error
	if r := s.sessions.batch; r != nil {
		err = r.read(ctx, hash, sess, user)
	} else {
		err = s.sessions.stmt.read(ctx, hash, sess, user)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("models: reading a session: %w", err)
	}
	user.ID = sess.UserID
	for _, t := range []*time.Time{&sess.ExpiresAt, &sess.AbsoluteExpiresAt, &sess.CreatedAt, &sess.UpdatedAt, &user.CreatedAt, &user.UpdatedAt} {
		*t = t.UTC()
	}
	return true, nil
}

// SessionQueries counts the queries that answered ReadSession since the store opened. On
// PostgreSQL, reads that arrive while a query runs share the next one, so under load it is far
// below the number of reads.
func (s *Store) SessionQueries() int64 { return s.sessionQueries.Load() }

// DeleteSession deletes the session id (one found expired).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Where("id = ?", id).Delete(&Session{}).Error
}

// RefreshSession extends the session id to expires, refreshed at now, and reports whether it
// still existed (false: signed out meanwhile).
func (s *Store) RefreshSession(ctx context.Context, id string, expires, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Session{}).Where("id = ?", id).
		Updates(map[string]any{"expires_at": expires, "updated_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("models: refreshing a session: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// EndSession deletes the session whose token hashes to hash and returns its id; "" when there
// is none. It is one statement (both databases have DELETE … RETURNING), so a sign-out is one
// round trip, and of two sign-outs of the same session at once exactly one gets its id. With
// webhooks it is a transaction that also queues the session.revoked event.
func (s *Store) EndSession(ctx context.Context, hash string) (id, userID string, err error) {
	var ended struct{ ID, UserID string }
	err = s.emitting(ctx, func(db *gorm.DB) error {
		if err := db.Raw("DELETE FROM sessions WHERE token = ? RETURNING id, user_id", hash).Scan(&ended).Error; err != nil {
			return fmt.Errorf("models: ending a session: %w", err)
		}
		if ended.ID != "" {
			note(db, revokedEvents(ended.UserID, ReasonSignedOut, []string{ended.ID})...)
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	return ended.ID, ended.UserID, nil
}

// ListSessions returns the sessions of userID that have not expired at now, newest first: what
// its owner sees of where it is signed in.
func (s *Store) ListSessions(ctx context.Context, userID string, now time.Time) ([]Session, error) {
	var sessions []Session
	err := s.db.WithContext(ctx).Where("user_id = ? AND expires_at > ? AND absolute_expires_at > ?", userID, now, now).
		Order("created_at DESC").Order("id").Find(&sessions).Error
	if err != nil {
		return nil, fmt.Errorf("models: listing sessions: %w", err)
	}
	for i := range sessions {
		t := &sessions[i]
		t.ExpiresAt, t.AbsoluteExpiresAt, t.CreatedAt, t.UpdatedAt = t.ExpiresAt.UTC(), t.AbsoluteExpiresAt.UTC(), t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	}
	return sessions, nil
}

// EndUserSession deletes the session of userID with the id, or, when id is "", the one whose
// token hashes to tokenHash, and returns its id; "" when userID has no such session (another
// account's session is never touched). reason is its session.revoked event's (ReasonRevoked by
// the account itself, ReasonRevokedByAdmin).
func (s *Store) EndUserSession(ctx context.Context, userID, id, tokenHash, reason string) (string, error) {
	query, key := "DELETE FROM sessions WHERE user_id = ? AND id = ? RETURNING id", id
	if id == "" {
		query, key = "DELETE FROM sessions WHERE user_id = ? AND token = ? RETURNING id", tokenHash
	}
	var ended string
	err := s.emitting(ctx, func(db *gorm.DB) error {
		if err := db.Raw(query, userID, key).Scan(&ended).Error; err != nil {
			return fmt.Errorf("models: ending a session: %w", err)
		}
		if ended != "" {
			note(db, revokedEvents(userID, reason, []string{ended})...)
		}
		return nil
	})
	return ended, err
}

// EndUserSessions deletes every session of userID but keep ("" for none), and those it opened as
// others (impersonations), in one transaction, and returns the ids it deleted; reason is their
// session.revoked events' (as for EndUserSession).
func (s *Store) EndUserSessions(ctx context.Context, userID, keep, reason string) ([]string, error) {
	var ended []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var err error
		ended, err = endSessions(tx, userID, keep, reason)
		return err
	})
	return ended, err
}
