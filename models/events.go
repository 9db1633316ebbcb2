package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Lifecycle events: what apps hear of by webhook (WEBHOOK_URL). They are written by the
// transactions that make the changes, so an event exists exactly when its change commits.
const (
	// EventUserCreated is an account's sign-up.
	EventUserCreated = "user.created"
	// EventUserDeleted is a deletion's step: its data's stage is "requested" (the grace period
	// begins), "restored" (undone by a sign-in or a restore link) or "purged" (erased for good,
	// by the nightly purge or an admin's removal).
	EventUserDeleted = "user.deleted"
	// EventUserEmailChanged is an address change, or its undoing by the old address's restore link
	// (restored true).
	EventUserEmailChanged = "user.email_changed"
	// EventUserBanned is an admin's ban.
	EventUserBanned = "user.banned"
	// EventSessionCreated is a session opened: a sign-in, or an admin's impersonation.
	EventSessionCreated = "session.created"
	// EventSessionRevoked is a session ended before its time; its data's reason says why.
	EventSessionRevoked = "session.revoked"
	// EventConsentGranted and EventConsentWithdrawn are the marketing consent's changes.
	EventConsentGranted   = "consent.granted"
	EventConsentWithdrawn = "consent.withdrawn"
)

// Deletion stages (EventUserDeleted's stage).
const (
	StageRequested = "requested"
	StageRestored  = "restored"
	StagePurged    = "purged"
)

// Why a session was revoked (EventSessionRevoked's reason).
const (
	ReasonSignedOut      = "signed_out"
	ReasonRevoked        = "revoked"
	ReasonRevokedByAdmin = "revoked_by_admin"
	ReasonBanned         = "banned"
	ReasonEmailChanged   = "email_changed"
	ReasonEmailRestored  = "email_restored"
	ReasonAccountDeleted = "account_deleted"
	ReasonAccountRemoved = "account_removed"
)

// Event is one lifecycle change: its type, the account it concerns, and what it carries (ids,
// the address where the event is about it; never a code, a token or a cookie).
type Event struct {
	Type   string
	UserID string
	Data   map[string]any
}

// EventSink turns the events of a transaction into the outbox rows that deliver them (auth's
// webhooks), which the transaction then writes with its change.
type EventSink func(ctx context.Context, events []Event) ([]OutboxMessage, error)

// SetEventSink has every transaction of the store hand its events to sink, before it is used;
// without one (no webhooks) events cost nothing.
func (s *Store) SetEventSink(sink EventSink) { s.sink = sink }

// events collects the events of one transaction.
type events struct{ list []Event }

type eventsKey struct{}

// note adds events to the transaction tx runs in; without an event sink, it does nothing.
func note(tx *gorm.DB, evs ...Event) {
	if c := collector(tx); c != nil {
		c.list = append(c.list, evs...)
	}
}

// noting reports whether tx collects events: a hot path builds them only then.
func noting(tx *gorm.DB) bool { return collector(tx) != nil }

// collector is the events of the transaction tx runs in; nil without an event sink.
func collector(tx *gorm.DB) *events {
	if tx.Statement == nil || tx.Statement.Context == nil {
		return nil
	}
	c, _ := tx.Statement.Context.Value(eventsKey{}).(*events)
	return c
}

// emitting runs fn in a transaction when an event sink is set, so that the events fn notes are
// written with its change; without one, fn runs on the database alone, as a single statement
// would.
func (s *Store) emitting(ctx context.Context, fn func(db *gorm.DB) error) error {
	if s.sink == nil {
		return fn(s.db.WithContext(ctx))
	}
	return s.transaction(ctx, fn)
}

// transaction runs fn in a transaction (inTransaction) and, with an event sink, writes the
// events fn noted, as the sink's outbox rows, before the commit. With an outbox hand-off, the
// outbox messages it queued are handed over after the commit.
func (s *Store) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.handoff == nil {
		return s.withEvents(ctx, fn)
	}
	q := &queued{handoff: s.handoff}
	if err := s.withEvents(context.WithValue(ctx, queuedKey{}, q), fn); err != nil {
		return err
	}
	if len(q.rows) > 0 {
		s.handoff.Handoff(q.rows)
	}
	return nil
}

// withEvents is transaction without the hand-off.
func (s *Store) withEvents(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if s.sink == nil {
		return inTransaction(ctx, s.db, fn)
	}
	c := &events{}
	ctx = context.WithValue(ctx, eventsKey{}, c)
	return inTransaction(ctx, s.db, func(tx *gorm.DB) error {
		if err := fn(tx); err != nil {
			return err
		}
		if len(c.list) == 0 {
			return nil
		}
		rows, err := s.sink(ctx, c.list)
		if err != nil {
			return fmt.Errorf("models: preparing webhooks: %w", err)
		}
		for i := range rows {
			if err := enqueueOutbox(tx, &rows[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// revokedEvents are the session.revoked events of the sessions ids of userID, ended for reason.
func revokedEvents(userID, reason string, ids []string) []Event {
	out := make([]Event, len(ids))
	for i, id := range ids {
		out[i] = Event{Type: EventSessionRevoked, UserID: userID, Data: map[string]any{"sessionId": id, "reason": reason}}
	}
	return out
}

// sessionCreated is the session.created event of sess.
func sessionCreated(sess Session) Event {
	data := map[string]any{"sessionId": sess.ID, "ipAddress": sess.IPAddress, "userAgent": sess.UserAgent, "expiresAt": sess.ExpiresAt}
	if sess.ImpersonatedBy != nil {
		data["impersonatedBy"] = *sess.ImpersonatedBy
	}
	return Event{Type: EventSessionCreated, UserID: sess.UserID, Data: data}
}
