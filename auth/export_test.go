package auth

import (
	"context"
	"time"

	"codeauth/models"
)

// SetPruneBatch sets the most rows one statement of the prune deletes.
func (s *Service) SetPruneBatch(n int) { s.pruneBatch = n }

// PurgeUsersForTest runs the purge of the accounts ids, deleted before cutoff, in a transaction,
// as the nightly job does after picking them.
func (s *Service) PurgeUsersForTest(ctx context.Context, ids []string, cutoff time.Time) (int64, error) {
	return s.store.(*models.Store).PurgeAccounts(ctx, ids, cutoff)
}

// SessionReadQueue is how many session reads may wait for the database on PostgreSQL.
const SessionReadQueue = models.SessionReadQueue

// ErrSessionReadsBusy is the error of a session read past SessionReadQueue.
var ErrSessionReadsBusy = models.ErrSessionReadsBusy

// SetSessionReadTimeout bounds each batch query of the session reads on PostgreSQL to d; it
// reports false on SQLite, whose reads are not batched.
func (s *Service) SetSessionReadTimeout(d time.Duration) bool {
	return s.store.(*models.Store).SetSessionReadTimeout(d)
}

// ReadSession runs the store's session read for a token hash, as a request's session check does.
func (s *Service) ReadSession(ctx context.Context, hash string) (models.Session, models.User, bool, error) {
	var sess models.Session
	var user models.User
	found, err := s.store.ReadSession(ctx, hash, &sess, &user)
	return sess, user, found, err
}
