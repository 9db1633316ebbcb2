package mail

import (
	"codeauth/models"

	"github.com/google/uuid"
)

// Prepare is a stand-in for helper A's, removed at merge.
func (o *Outbox) Prepare(d Draft, opts EnqueueOptions) (models.OutboxMessage, error) {
	now := o.clock()
	id := uuid.NewString()
	sealed, err := o.seal(id, d, opts.Withhold)
	if err != nil {
		return models.OutboxMessage{}, err
	}
	return models.OutboxMessage{
		ID: id, Kind: string(d.Kind), Recipient: d.To, Supersede: opts.Supersede, Payload: sealed,
		Status: statusPending, NextAttemptAt: now, ExpiresAt: opts.ExpiresAt, CreatedAt: now,
	}, nil
}
