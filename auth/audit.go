package auth

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"codeauth/models"
)

// The audit log: the security events of every account, who caused each (the account itself, an
// admin, or nobody known) and from where, kept for AUTH_AUDIT_RETENTION. A sign-in's event is
// written in the sign-in's own transaction; the others right after the change they record, and a
// failure to write one is logged, never the request's failure. Events never hold a code, a token
// or another person's full address.

// The actions of the audit log.
const (
	AuditSignUp               = "user.signed_up"
	AuditSignIn               = "user.signed_in"
	AuditVerificationLocked   = "user.verification_locked"
	AuditSignOut              = "session.signed_out"
	AuditSessionRevoked       = "session.revoked"
	AuditEmailChangeRequested = "user.email_change_requested"
	AuditEmailChanged         = "user.email_changed"
	AuditEmailRestored        = "user.email_restored"
	AuditConsentGranted       = "consent.granted"
	AuditConsentWithdrawn     = "consent.withdrawn"
	AuditDeletionRequested    = "user.deletion_requested"
	AuditDeletionRestored     = "user.deletion_restored"
	AuditPurged               = "user.purged"
	AuditRoleSet              = "admin.role_set"
	AuditUserUpdated          = "admin.user_updated"
	AuditBanned               = "admin.user_banned"
	AuditUnbanned             = "admin.user_unbanned"
	AuditUserRemoved          = "admin.user_removed"
	AuditImpersonationStarted = "admin.impersonation_started"
	AuditImpersonationStopped = "admin.impersonation_stopped"
)

// DefaultAuditRetention is how long audit events are kept (AUTH_AUDIT_RETENTION): 400 days, a
// year's look back with a margin.
const DefaultAuditRetention = 400 * 24 * time.Hour

// auditStore is the storage of the audit log: models.Store implements it.
type auditStore interface {
	RecordAudit(ctx context.Context, events ...models.AuditEvent) error
	AuditLog(ctx context.Context, q models.AuditQuery) ([]models.AuditEvent, int64, error)
	PruneAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// RequestSource tells the audit log about the request under way: the HTTP layer puts one in
// each request's context (WithRequest).
type RequestSource interface {
	// RequestID is the request's id, as the access log and X-Request-Id have it.
	RequestID() string
	// ClientIP is the client's address as the per-IP limits see it.
	ClientIP() string
	// VouchedIP is the client's address when the client cannot have chosen it (the connection's
	// own peer, or a forwarding header of a proxy the configuration names or trusts), else "":
	// what is shown to a person as where something came from.
	VouchedIP() string
	// UserAgent is the request's User-Agent header.
	UserAgent() string
	// Impersonator is the admin who opened the request's session as its account
	// (impersonate-user), or "": what is done in such a session is the admin's doing.
	Impersonator() string
}

type requestKey struct{}

// WithRequest returns ctx carrying src, for the audit events recorded while serving it.
func WithRequest(ctx context.Context, src RequestSource) context.Context {
	return context.WithValue(ctx, requestKey{}, src)
}

// RequestFrom returns the request ctx carries, or nil.
func RequestFrom(ctx context.Context) RequestSource {
	src, _ := ctx.Value(requestKey{}).(RequestSource)
	return src
}

// auditEvent makes the row of an event, its request details read from ctx now (the strings
// copied: the HTTP layer reuses its buffers after the request).
func (s *Service) auditEvent(ctx context.Context, action, actor, subject string, detail map[string]any) models.AuditEvent {
	ev := models.AuditEvent{ID: newID(), At: s.now(), Action: action, Detail: "{}"}
	if actor != "" {
		ev.ActorID = &actor
	}
	if subject != "" {
		ev.SubjectID = &subject
	}
	if src := RequestFrom(ctx); src != nil {
		ev.RequestID = cleanText(strings.Clone(src.RequestID()), 64)
		ev.IPAddress = cleanText(strings.Clone(src.ClientIP()), 64)
		ev.UserAgent = cleanText(strings.Clone(src.UserAgent()), 512)
		if admin := src.Impersonator(); admin != "" {
			// Done in a session an admin opened as the account: the admin acted.
			admin = strings.Clone(admin)
			ev.ActorID = &admin
			if detail == nil {
				detail = map[string]any{}
			}
			detail["impersonated"] = true
		}
	}
	if len(detail) > 0 {
		if b, err := json.Marshal(detail); err == nil && len(b) <= 1000 {
			ev.Detail = string(b)
		}
	}
	return ev
}

// record writes one event now; a failure is logged and goes no further: the change it records
// has happened.
func (s *Service) record(ctx context.Context, action, actor, subject string, detail map[string]any) {
	ev := s.auditEvent(ctx, action, actor, subject, detail)
	if err := s.store.RecordAudit(context.WithoutCancel(ctx), ev); err != nil {
		s.log.WarnContext(ctx, "recording an audit event failed", "action", action, "error", err)
	}
}

// AuditLog returns a page of the audit log for an admin, newest first, and how many events match.
func (s *Service) AuditLog(ctx context.Context, st *SessionState, q models.AuditQuery) ([]models.AuditEvent, int64, models.AuditQuery, error) {
	if err := requireAdmin(st); err != nil {
		return nil, 0, q, err
	}
	if q.Limit <= 0 {
		q.Limit = DefaultUserPage
	}
	q.Limit, q.Offset = min(q.Limit, MaxUserPage), max(q.Offset, 0)
	if q.SubjectID != "" && !canonicalUUID(q.SubjectID) {
		return nil, 0, q, ErrInvalidUserQuery
	}
	if !queryText(q.Action) {
		return nil, 0, q, ErrInvalidAuditAction
	}
	events, total, err := s.store.AuditLog(ctx, q)
	return events, total, q, err
}

// UserAudit returns the newest limit audit events of one account, for an admin.
func (s *Service) UserAudit(ctx context.Context, st *SessionState, userID string, limit int) ([]models.AuditEvent, error) {
	events, _, _, err := s.AuditLog(ctx, st, models.AuditQuery{SubjectID: userID, Limit: limit})
	return events, err
}

// maskEmail is an address shown in an audit detail about someone who is not the event's subject:
// its first character and its domain ("a…@example.com").
func maskEmail(email string) string {
	at := strings.LastIndexByte(email, '@')
	if at <= 0 {
		return "…"
	}
	return email[:1] + "…" + email[at:]
}
