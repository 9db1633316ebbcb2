package auth

import (
	"context"
	"time"

	"codeauth/models"

	"gorm.io/gorm"
)

// SetPruneBatch sets the most rows one statement of the prune deletes.
func (s *Service) SetPruneBatch(n int) { s.pruneBatch = n }

// PurgeUsersForTest runs the purge of the accounts ids, deleted before cutoff, in a transaction,
// as the nightly job does after picking them.
func (s *Service) PurgeUsersForTest(ctx context.Context, ids []string, cutoff time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		n, err = purgeUsers(tx, ids, cutoff)
		return err
	})
	return n, err
}

// SessionReadQueue is how many session reads may wait for the database on PostgreSQL.
const SessionReadQueue = sessionReadQueue

// ErrSessionReadsBusy is the error of a session read past SessionReadQueue.
var ErrSessionReadsBusy = errSessionReadsBusy

// SetSessionReadTimeout bounds each batch query of the session reads on PostgreSQL to d; it
// reports false on SQLite, whose reads are not batched.
func (s *Service) SetSessionReadTimeout(d time.Duration) bool {
	b, ok := s.readSession.(*batchReader)
	if ok {
		b.timeout.Store(int64(d))
	}
	return ok
}

// ReadSession runs the session reader for a token hash, as a request's session check does.
func (s *Service) ReadSession(ctx context.Context, hash string) (models.Session, models.User, error) {
	var sess models.Session
	var user models.User
	err := s.readSession.read(ctx, hash, &sess, &user)
	return sess, user, err
}
