// Package models holds the GORM models of the service and the code that opens and migrates the
// database. The same models and migrations serve the embedded SQLite default and PostgreSQL.
//
// Every time stored here is UTC: SQLite keeps times as text, and UTC text sorts in time order.
package models

import (
	"time"

	"gorm.io/gorm"
)

// User is one person's account. Email is the canonical (trimmed, lower-cased) address, unique
// across live and soft-deleted accounts, so a deleted account can be restored during its grace
// period and its address cannot be taken over in the meantime.
type User struct {
	ID            string    `gorm:"type:uuid;primaryKey"`
	Email         string    `gorm:"size:254;not null;uniqueIndex"`
	Name          string    `gorm:"size:200;not null"`
	EmailVerified bool      `gorm:"not null"`
	Image         *string   `gorm:"size:2048"`
	CreatedAt     time.Time `gorm:"not null"`
	UpdatedAt     time.Time `gorm:"not null"`
	// DeletedAt's index holds only deleted accounts, which is all the purge looks for: an index
	// of every account's NULL would cost each sign-up one more index insert for nothing.
	DeletedAt gorm.DeletedAt `gorm:"index:idx_users_deleted,where:deleted_at IS NOT NULL"`
	// Role is "user" or "admin" (better-auth's admin plugin; several, comma-separated, are
	// allowed by its format, and read as a set).
	Role string `gorm:"size:64;not null;default:user"`
	// Banned, BanReason and BanExpires are an admin's ban: a banned account signs in no more
	// until BanExpires (nil: for good) or an unban.
	Banned     bool       `gorm:"not null;default:false"`
	BanReason  *string    `gorm:"size:500"`
	BanExpires *time.Time ``
	// Locale is the language of the account's e-mails (a code of the i18n files, "de"): the
	// language it signed up in, or the last one chosen with the pages' language switch. Empty
	// for an account made before accounts had one, until its next sign-in gives it that
	// request's.
	Locale string `gorm:"size:16;not null;default:''"`
}

// The roles a User's Role is made of: every account is a user; RoleAdmin marks an admin. auth
// holds the same names for its rules (auth.RoleUser, auth.RoleAdmin are these).
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
)

// Session is one signed-in device or client. Token holds the SHA-256 of the session token, never
// the token itself, so a leaked table yields no usable session. ExpiresAt is the sliding
// expiry; AbsoluteExpiresAt caps it however often the session is refreshed.
type Session struct {
	ID                string    `gorm:"type:uuid;primaryKey"`
	Token             string    `gorm:"size:64;not null;uniqueIndex"`
	UserID            string    `gorm:"type:uuid;not null;index"`
	User              *User     `gorm:"constraint:OnDelete:CASCADE"`
	ExpiresAt         time.Time `gorm:"not null;index"`
	AbsoluteExpiresAt time.Time `gorm:"not null"`
	IPAddress         string    `gorm:"size:64;not null"`
	UserAgent         string    `gorm:"size:512;not null"`
	CreatedAt         time.Time `gorm:"not null"`
	UpdatedAt         time.Time `gorm:"not null"`
	// ImpersonatedBy is the admin who opened this session as its user (impersonate-user), or nil.
	// The partial index serves ending an admin's impersonations (endImpersonations) and costs
	// the ordinary sign-in nothing, its sessions having none.
	ImpersonatedBy *string `gorm:"type:uuid;index:idx_sessions_impersonated_by,where:impersonated_by IS NOT NULL"`
}

// Account links a user to an external identity provider. Passwordless sign-in does not use it;
// it is kept so the schema matches what better-auth-based tools expect.
type Account struct {
	ID         string    `gorm:"type:uuid;primaryKey"`
	UserID     string    `gorm:"type:uuid;not null;index"`
	User       *User     `gorm:"constraint:OnDelete:CASCADE"`
	ProviderID string    `gorm:"size:64;not null"`
	AccountID  string    `gorm:"size:255;not null"`
	CreatedAt  time.Time `gorm:"not null"`
	UpdatedAt  time.Time `gorm:"not null"`
}

// Verification is one live one-time code. There is at most one per purpose and subject (the
// unique index), so issuing a new code replaces the previous one. Subject is the canonical e-mail
// for sign-in codes, the user's id for codes and links bound to an account (with ":<old address>"
// for restore links, one per old address); Email is the address the code or link was sent to. CodeHash is an HMAC of the code bound to purpose, subject and
// e-mail. Attempts counts comparisons made, raised by one atomic conditional UPDATE each, and never
// passes the budget; Exhausted is set by the one request that reports the budget spent. The row
// stays until it expires or is replaced, so a comparison reserved within the budget can still
// consume it.
type Verification struct {
	ID        string    `gorm:"type:uuid;primaryKey"`
	Purpose   string    `gorm:"size:32;not null;uniqueIndex:idx_verification_subject,priority:1"`
	Subject   string    `gorm:"size:300;not null;uniqueIndex:idx_verification_subject,priority:2"`
	Email     string    `gorm:"size:254;not null"`
	CodeHash  string    `gorm:"size:64;not null"`
	Attempts  int       `gorm:"not null"`
	Exhausted bool      `gorm:"not null"`
	ExpiresAt time.Time `gorm:"not null;index"`
	CreatedAt time.Time `gorm:"not null"`
	// SealedCode is a sign-in code itself, sealed with a key derived from AUTH_SECRET (bound to
	// the row's id), so a resend within its lifetime can send the same code again instead of
	// killing the one still on its way (auth.SendSignInCode). Nil for the other purposes, whose
	// codes only their hash keeps.
	SealedCode []byte
}

// UserData is the service's own per-user preference record, created with the account.
// MarketingOptInAt is when the current consent was granted; the evidence of each grant is a
// ConsentEvent.
type UserData struct {
	ID               string     `gorm:"type:uuid;primaryKey"`
	UserID           string     `gorm:"type:uuid;not null;uniqueIndex"`
	User             *User      `gorm:"constraint:OnDelete:CASCADE"`
	MarketingOptIn   bool       `gorm:"not null"`
	MarketingOptInAt *time.Time ``
	IsTrialEligible  bool       `gorm:"not null"`
	CreatedAt        time.Time  `gorm:"not null"`
	UpdatedAt        time.Time  `gorm:"not null"`
}

// ConsentEvent is the evidence of a change of consent, a grant or (Granted false) a withdrawal:
// who, what (Kind and the Wording shown), when, through which page or client (Source), and from
// which address and user agent.
type ConsentEvent struct {
	ID        string    `gorm:"type:uuid;primaryKey"`
	UserID    string    `gorm:"type:uuid;not null;index"`
	User      *User     `gorm:"constraint:OnDelete:CASCADE"`
	Kind      string    `gorm:"size:32;not null"`
	Granted   bool      `gorm:"not null"`
	Wording   string    `gorm:"size:64;not null"`
	Source    string    `gorm:"size:200;not null"`
	IPAddress string    `gorm:"size:64;not null"`
	UserAgent string    `gorm:"size:512;not null"`
	CreatedAt time.Time `gorm:"not null"`
}

// TableName keeps the table name singular, as the spec names it.
func (UserData) TableName() string { return "user_data" }

// AuditEvent is one security event of the audit log: when, who acted (ActorID: the account
// itself, an admin, or nil for the service or an anonymous caller), whose account it concerns
// (SubjectID), what happened (Action, auth's Audit* names), and from where (IPAddress,
// UserAgent, RequestID). Detail is a small JSON object; it never holds a code, a token or
// another person's full address. The rows outlive their account (no foreign key) until
// AUTH_AUDIT_RETENTION has passed. It is indexed by time (the prune, the newest-first reads) and
// by account; a read of one action walks the time index (an admin's, bounded by its page).
type AuditEvent struct {
	ID        string    `gorm:"type:uuid;primaryKey"`
	At        time.Time `gorm:"not null;index;index:idx_audit_subject,priority:2"`
	ActorID   *string   `gorm:"type:uuid"`
	SubjectID *string   `gorm:"type:uuid;index:idx_audit_subject,priority:1"`
	Action    string    `gorm:"size:64;not null"`
	IPAddress string    `gorm:"size:64;not null"`
	UserAgent string    `gorm:"size:512;not null"`
	RequestID string    `gorm:"size:64;not null"`
	Detail    string    `gorm:"size:1000;not null"`
}

// KnownDevice is a device an account has signed in from, for the new-device notice: DeviceKey is
// a keyed hash of its browser family and system (never the User-Agent itself), LastSeenAt its
// latest sign-in. Rows unseen for the notice's window are pruned.
type KnownDevice struct {
	UserID     string    `gorm:"type:uuid;primaryKey"`
	User       *User     `gorm:"constraint:OnDelete:CASCADE"`
	DeviceKey  string    `gorm:"size:64;primaryKey"`
	LastSeenAt time.Time `gorm:"not null;index"`
}

// AuthThrottle is a persistent counter shared by every instance, such as the code sends per
// e-mail address in the current window. Key names what is counted; the row is dead after ResetAt.
type AuthThrottle struct {
	Key       string    `gorm:"size:300;primaryKey"`
	Count     int       `gorm:"not null"`
	ResetAt   time.Time `gorm:"not null;index"`
	UpdatedAt time.Time `gorm:"not null"`
}

// TableName is auth_throttle, the name the spec and the scheduled prune task use.
func (AuthThrottle) TableName() string { return "auth_throttle" }

// Purchase is something bought, possibly before its buyer had an account. UserID is filled in
// when an account with that e-mail exists or is created.
type Purchase struct {
	ID          string    `gorm:"type:uuid;primaryKey"`
	Email       string    `gorm:"size:254;not null;index"`
	UserID      *string   `gorm:"type:uuid;index"`
	User        *User     `gorm:"constraint:OnDelete:SET NULL"`
	Product     string    `gorm:"size:200;not null"`
	PurchasedAt time.Time `gorm:"not null"`
	CreatedAt   time.Time `gorm:"not null"`
}

// OutboxMessage is an e-mail waiting for delivery, written in the same transaction as the change
// that caused it. Payload is the message's draft (mail.Draft) sealed with a key derived from
// AUTH_SECRET (a code e-mail is a live code). A message delivered, or dropped unsent (replaced or
// expired), is deleted; one given up keeps a record without its payload (status abandoned, kind,
// recipient, LastError, GivenUpAt) until the prune removes it. Messages queued with the same
// Supersede key replace each other while pending: only the newest code of a kind goes out.
// LockedUntil is a worker's lease on the message, short and extended while the worker delivers
// it; the id doubles as the provider's idempotency key. The due-message indexes cover pending
// rows only, the ones the workers poll all the time, one for each queue (models.OutboxQueue), so
// the e-mail worker's claim never walks past a backlog of webhooks; the Supersede index only rows
// with a key (a code's e-mail), so the welcome e-mails and webhooks, most of the queue, cost it no
// entry. A struct tag cannot name a constant: 'pending' and 'webhook' there must stay
// OutboxPending and OutboxKindWebhook. (Databases made by earlier versions also have a sent_at
// column, which nothing reads or writes any more.)
type OutboxMessage struct {
	ID            string     `gorm:"type:uuid;primaryKey"`
	Kind          string     `gorm:"size:32;not null"`
	Recipient     string     `gorm:"size:254;not null"`
	Supersede     string     `gorm:"size:300;not null;index:idx_outbox_supersede_key,where:supersede <> ''"`
	Payload       []byte     `gorm:"not null"`
	Status        string     `gorm:"size:16;not null"`
	Attempts      int        `gorm:"not null"`
	NextAttemptAt time.Time  `gorm:"not null;index:idx_outbox_due_email,where:status = 'pending' AND kind <> 'webhook';index:idx_outbox_due_webhook,where:status = 'pending' AND kind = 'webhook'"`
	LockedUntil   *time.Time ``
	ExpiresAt     *time.Time ``
	LastError     string     `gorm:"size:500;not null"`
	CreatedAt     time.Time  `gorm:"not null"`
	GivenUpAt     *time.Time ``
}

// TableName is outbox.
func (OutboxMessage) TableName() string { return "outbox" }

// SigningKey is one key pair that signs the service's JWTs (GET /api/auth/token and the
// set-auth-jwt header), published in the JWKS by its ID, the JWT header's kid. PublicKey is the
// raw public key; PrivateKey is the private key sealed with a key derived from AUTH_SECRET
// (auth/jwt.go), never the key itself, so a leaked table signs nothing. Generation numbers the
// keys 1, 2, 3…: it is unique, so of two instances that add the same generation at once (the
// first key, or a rotation) one wins and both go on with the winner's key. The key signs from
// ActiveFrom on, until the next generation's ActiveFrom; a rotation adds the next key some
// minutes ahead, so verifiers see it in the JWKS before any JWT carries it.
type SigningKey struct {
	ID         string    `gorm:"size:64;primaryKey"`
	Generation int64     `gorm:"not null;uniqueIndex"`
	Algorithm  string    `gorm:"size:16;not null"`
	PublicKey  []byte    `gorm:"not null"`
	PrivateKey []byte    `gorm:"not null"`
	ActiveFrom time.Time `gorm:"not null"`
	CreatedAt  time.Time `gorm:"not null"`
}

// TableName is jwks, the table better-auth's jwt plugin keeps its keys in.
func (SigningKey) TableName() string { return "jwks" }

// All lists every model, in the order they are migrated.
func All() []any {
	return []any{&User{}, &Session{}, &Account{}, &Verification{}, &UserData{}, &ConsentEvent{}, &AuthThrottle{}, &Purchase{}, &OutboxMessage{}, &SigningKey{}, &KnownDevice{}, &AuditEvent{}}
}
