package models

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ReadSession reads the session whose token hashes to tokenHash into sess, and its user into
// user; found is false when no session of a live (not deleted) account has that hash. An expired
// session is still found: expiry is the caller's rule. The times read are UTC. It is the one
// statement of every protected request that the cookie cache cannot answer, so it fills the
// caller's values in place rather than returning copies, and on PostgreSQL reads that arrive
// while a query runs share the next query (sessionreads.go). Its errors are the database's, the
// context's, or one that is Unavailable when too many reads already wait for the database.
func (s *Store) ReadSession(ctx context.Context, tokenHash string, sess *Session, user *User) (found bool, err error) {
	if err := s.sessionReads.read(ctx, tokenHash, sess, user); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return false, err
	}
	user.ID = sess.UserID
	for _, t := range []*time.Time{&sess.ExpiresAt, &sess.AbsoluteExpiresAt, &sess.CreatedAt, &sess.UpdatedAt, &user.CreatedAt, &user.UpdatedAt} {
		*t = t.UTC()
	}
	return true, nil
}

// SessionQueries is the number of queries that have answered ReadSession since the store was
// built. On PostgreSQL, reads that arrive while a query runs share the next one, so under load it
// is far below the number of reads.
func (s *Store) SessionQueries() int64 { return s.sessionReads.queries.Load() }

// RefreshSession moves the session id's expiry to expires and its last refresh to now. It reports
// false when there is no such session any more: it was signed out since it was read.
func (s *Store) RefreshSession(ctx context.Context, id string, expires, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&Session{}).Where("id = ?", id).
		Updates(map[string]any{"expires_at": expires, "updated_at": now})
	return res.RowsAffected > 0, res.Error
}

// DeleteSession deletes the session id, if it is still there.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.db.WithContext(ctx).Where("id = ?", id).Delete(&Session{}).Error
}

// DeleteSessionByToken deletes the session whose token hashes to tokenHash and returns its id;
// found is false when there is none. It is one statement, so of two sign-outs of the same
// session at once exactly one finds it.
func (s *Store) DeleteSessionByToken(ctx context.Context, tokenHash string) (id string, found bool, err error) {
	res := s.db.WithContext(ctx).Raw("DELETE FROM sessions WHERE token = ? RETURNING id", tokenHash).Scan(&id)
	if res.Error != nil {
		return "", false, res.Error
	}
	return id, res.RowsAffected > 0, nil
}
