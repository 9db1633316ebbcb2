package auth

import (
	"context"
	"sync"
	"time"

	"codeauth/mail"
	"codeauth/models"
)

// webhookRows is the store's event sink (models.EventSink) when webhooks are configured: each
// event, stamped and given its webhook-id, becomes one outbox row per endpoint, which the
// transaction of its change writes. The outbox then delivers them, signed, at least once each,
// retrying for mail.WebhookRetry. The events of an instance are stamped at least a microsecond
// apart, in the order they were made, so their timestamps order them as the deliveries do
// (lanes), also when the clock has not moved between two changes.
func (s *Service) webhookRows(_ context.Context, events []models.Event) ([]models.OutboxMessage, error) {
	endpoints := s.hooks.Endpoints()
	rows := make([]models.OutboxMessage, 0, len(events)*len(endpoints))
	for _, ev := range events {
		at := s.eventStamp()
		id, err := mail.NewEventID()
		if err != nil {
			return nil, err
		}
		body, err := mail.EventBody(ev, at)
		if err != nil {
			return nil, err
		}
		for _, endpoint := range endpoints {
			row, err := s.outbox.PrepareWebhook(endpoint, id, ev.UserID, body, at)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// eventStamps hands out the event times of an instance: now, or a microsecond after the last
// one when that is later.
type eventStamps struct {
	mu   sync.Mutex
	last time.Time
}

// eventStamp is the time of the next event (eventStamps).
func (s *Service) eventStamp() time.Time {
	now := s.now()
	s.stamps.mu.Lock()
	defer s.stamps.mu.Unlock()
	if !now.After(s.stamps.last) {
		now = s.stamps.last.Add(time.Microsecond)
	}
	s.stamps.last = now
	return now
}
