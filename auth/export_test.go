package auth

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// SetJobStarted lets tests observe (and hold) a job once it holds its lock.
func (s *Service) SetJobStarted(f func(name string)) { s.jobStarted = f }

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
