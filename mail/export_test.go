package mail

import (
	"context"
	"time"

	"codeauth/models"
)

// NewSMTPWithTimeout is NewSMTP with timeout for each dial and command instead of 15 s.
func NewSMTPWithTimeout(cfg SMTPConfig, timeout time.Duration) (*SMTP, error) {
	return newSMTP(cfg, timeout)
}

// Lease is how long a claim or a heartbeat holds a message.
const Lease = lease

// ClaimAndAbandon claims due messages of both queues as DeliverDue does and then does nothing
// with them, as an instance that dies right after its claims; it returns how many it claimed.
func (o *Outbox) ClaimAndAbandon(ctx context.Context) (int, error) {
	emails, _, err := o.claim(ctx, models.EmailQueue)
	if err != nil {
		return 0, err
	}
	hooks, _, err := o.claim(ctx, models.WebhookQueue)
	return len(emails) + len(hooks), err
}

// SetHeartbeat sets how often, in real time, a delivery extends its lease.
func (o *Outbox) SetHeartbeat(d time.Duration) { o.beat = d }

// SetRecordLinger sets how long delivered messages wait for their deletion (recordLinger).
func (o *Outbox) SetRecordLinger(d time.Duration) { o.linger = d }

// ClaimStallAndFail claims due e-mails as DeliverDue does, runs stall (the worker is paused),
// then lets one heartbeat run and records every send as failed with err, as a worker that wakes
// after its lease ran out.
func (o *Outbox) ClaimStallAndFail(ctx context.Context, stall func(), err error) error {
	batch, h, claimErr := o.claim(ctx, models.EmailQueue)
	if claimErr != nil {
		return claimErr
	}
	stall()
	h = o.extend(ctx, h)
	outcomes, errs := make([]outcome, len(batch)), make([]error, len(batch))
	for i := range batch {
		outcomes[i], errs[i] = outcomeFailed, err
	}
	return o.record(ctx, models.EmailQueue, batch, outcomes, errs, h)
}
