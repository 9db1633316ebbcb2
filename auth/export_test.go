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
