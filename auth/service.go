package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"codeauth/i18n"
	"codeauth/lograte"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// Store is the storage the service needs, by capability; models.Store implements it. The
// service builds its outbox on the same store.
type Store interface {
	codeStore
	limitStore
	signInStore
	changeStore
	deletionStore
	profileStore
	pruneStore
	sessionStore
	jwtStore
	adminStore
	auditStore
	localeStore
	mail.Store
	// SetEventSink has the store's transactions hand their lifecycle events to the webhooks.
	SetEventSink(sink models.EventSink)
	// SetOutboxHandoff has the store's transactions hand what they queue to the outbox's
	// workers once they commit.
	SetOutboxHandoff(h models.OutboxHandoff)
}

// Options are the dependencies and settings of a Service.
type Options struct {
	// Store is the service's storage.
	Store Store
	// Mailer delivers codes and notices.
	Mailer mail.Mailer
	// Webhooks, when set, delivers the lifecycle events to WEBHOOK_URL's endpoints.
	Webhooks *mail.Webhooks
	// Secret is AUTH_SECRET; every key is derived from it.
	Secret []byte
	// SessionMaxAge is the absolute session cap counted from sign-in.
	SessionMaxAge time.Duration
	// MaxFailedVerifications is AUTH_MAX_FAILED_VERIFICATIONS; 0 means the default.
	MaxFailedVerifications int
	// SiteName names the service in e-mails.
	SiteName string
	// SiteURL is the public origin (AUTH_URL), for links in e-mails.
	SiteURL string
	// DefaultLocale is the language of e-mails and new accounts when the request's is not one the
	// service speaks (AUTH_DEFAULT_LOCALE); "" is English.
	DefaultLocale string
	// EmailTemplates are the e-mail templates with EMAIL_TEMPLATES_DIR's replacements; nil means
	// the embedded ones.
	EmailTemplates *mail.Templates
	// EmailChangeLinks enables the link-based e-mail change (the web flow).
	EmailChangeLinks bool
	// DeletionGrace is how long a deleted account can still be restored by signing in.
	DeletionGrace time.Duration
	// JWT says what the session JWTs claim and how often their key rotates; an empty Issuer or
	// Audience is SiteURL, and a zero Rotation DefaultJWTRotation.
	JWT JWTOptions
	// SignUp says who may create an account (AUTH_DISABLE_SIGNUP, AUTH_ALLOWED_EMAIL_DOMAINS);
	// the zero value lets anyone.
	SignUp SignUpPolicy
	// AuditRetention is how long audit events are kept (AUTH_AUDIT_RETENTION); zero means
	// DefaultAuditRetention.
	AuditRetention time.Duration
	// NewDeviceNotice e-mails an account when it signs in from a device it has not used for
	// KnownDeviceWindow (AUTH_NEW_DEVICE_NOTICE).
	NewDeviceNotice bool
	// AdminEmails are the addresses whose accounts are made admins when they are created or next
	// sign in (AUTH_ADMIN_EMAILS).
	AdminEmails []string
	// SignInLinks puts a sign-in link in the code e-mail beside the code (AUTH_SIGNIN_LINK).
	SignInLinks bool
	// Now is the clock; nil means time.Now. Tests pass a clock they can move.
	Now func() time.Time
	// Logger receives operational events. It is never given codes or tokens.
	Logger *slog.Logger
}

// Service implements sign-in by e-mail code and the sessions that follow it.
type Service struct {
	store         Store
	outbox        *mail.Outbox
	compose       mail.Composer
	changeLinks   bool
	deletionGrace time.Duration
	keys          *keys
	sessionMaxAge time.Duration
	maxFailures   int
	siteName      string
	// defaultLocale is Options.DefaultLocale, a language the service speaks.
	defaultLocale string
	clock         func() time.Time
	log           *slog.Logger
	revoked       *revocations
	// started is when this Service was made: a cookie cache sealed before it may vouch for a
	// session revoked in a process before this one (a restart), whose revocations this one
	// never learned, and is checked against the database instead (Session).
	started time.Time
	// refreshWarned keeps a failed session refresh's warning to one a minute: every read of an
	// old session meets it while the database is read-only.
	refreshWarned lograte.Limit
	adminEmails   map[string]bool
	// auditRetention is Options.AuditRetention.
	auditRetention time.Duration
	// hooks is Options.Webhooks; stamps times its events.
	hooks  *mail.Webhooks
	stamps eventStamps
	// signUp is Options.SignUp.
	signUp SignUpPolicy
	// newDeviceNotice is Options.NewDeviceNotice.
	newDeviceNotice bool
	// signInLinks is Options.SignInLinks.
	signInLinks bool
	jwt         *jwts
	stats       counters
	// pruneBatch is the most rows one statement of the prune deletes: the store's PruneBatch, but
	// in tests.
	pruneBatch int
	// pruneShare is the store's PruneShare: the most of its time a prune spends in statements.
	pruneShare float64
}

// New builds a Service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Mailer == nil {
		return nil, errors.New("auth: a store and a mailer are required")
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("auth: a secret is required")
	}
	k, err := newKeys(opts.Secret)
	if err != nil {
		return nil, err
	}
	s := &Service{
		store:           opts.Store,
		changeLinks:     opts.EmailChangeLinks,
		deletionGrace:   opts.DeletionGrace,
		keys:            k,
		sessionMaxAge:   opts.SessionMaxAge,
		maxFailures:     opts.MaxFailedVerifications,
		siteName:        opts.SiteName,
		clock:           opts.Now,
		log:             opts.Logger,
		revoked:         newRevocations(),
		adminEmails:     map[string]bool{},
		newDeviceNotice: opts.NewDeviceNotice,
		signInLinks:     opts.SignInLinks,
		signUp:          opts.SignUp,
		auditRetention:  opts.AuditRetention,
		pruneBatch:      opts.Store.PruneBatch(),
		pruneShare:      opts.Store.PruneShare(),
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.started = s.now()
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.sessionMaxAge <= 0 {
		return nil, errors.New("auth: SessionMaxAge must be positive")
	}
	for _, raw := range opts.AdminEmails {
		email, err := NormalizeEmail(raw)
		if err != nil {
			return nil, fmt.Errorf("auth: an admin address %q: %w", raw, err)
		}
		s.adminEmails[email] = true
	}
	if s.auditRetention <= 0 {
		s.auditRetention = DefaultAuditRetention
	}
	if s.maxFailures <= 0 {
		s.maxFailures = DefaultMaxFailedVerifications
	}
	if s.siteName == "" {
		s.siteName = "codeauth"
	}
	if s.deletionGrace <= 0 {
		s.deletionGrace = DefaultDeletionGrace
	}
	jwtOpts := opts.JWT
	if jwtOpts.Issuer == "" {
		jwtOpts.Issuer = strings.TrimSuffix(opts.SiteURL, "/")
	}
	if jwtOpts.Audience == "" {
		jwtOpts.Audience = strings.TrimSuffix(opts.SiteURL, "/")
	}
	if jwtOpts.Rotation <= 0 {
		jwtOpts.Rotation = DefaultJWTRotation
	}
	s.jwt = &jwts{opts: jwtOpts}
	def, ok := i18n.Lookup(opts.DefaultLocale)
	if !ok && opts.DefaultLocale != "" {
		return nil, fmt.Errorf("auth: the default language %q is not one the service speaks (%s)", opts.DefaultLocale, strings.Join(i18n.Codes(), ", "))
	}
	if !ok {
		def = i18n.English()
	}
	s.defaultLocale = def.Code()
	s.compose = mail.Composer{SiteName: s.siteName, SiteURL: strings.TrimSuffix(opts.SiteURL, "/"),
		Templates: opts.EmailTemplates, DefaultLocale: s.defaultLocale}
	// Mail refused for a revoked provider key is retried as long as a restore link lives, so an
	// operator who fixes the key within that time loses no notice.
	outbox, err := mail.NewOutbox(opts.Store, opts.Mailer, s.compose, deriveKey(opts.Secret, "outbox"), RestoreLinkLifetime, s.now, s.log)
	if err != nil {
		return nil, err
	}
	s.outbox = outbox
	// What a transaction queues goes to the worker after the commit (mail.Outbox's Handoff),
	// which delivers it without a claim, or, for a code's e-mail, is woken to claim it: no Kick
	// is needed.
	opts.Store.SetOutboxHandoff(outbox)
	if opts.Webhooks != nil {
		s.hooks = opts.Webhooks
		outbox.SetWebhooks(opts.Webhooks)
		opts.Store.SetEventSink(s.webhookRows)
	}
	return s, nil
}

// Outbox is the service's queue of outgoing e-mail; the server runs its worker.
func (s *Service) Outbox() *mail.Outbox { return s.outbox }

// prepare is the outbox row of an e-mail, as the Composer returned its draft d with err, to be
// written in the transaction of the change that sends it.
func (s *Service) prepare(d mail.Draft, err error, opts mail.EnqueueOptions) (models.OutboxMessage, error) {
	if err != nil {
		return models.OutboxMessage{}, fmt.Errorf("auth: composing %s: %w", d.Kind, err)
	}
	return s.outbox.Prepare(d, opts)
}

// Now is the service's time, for the pages' own timers (the resend button's countdown).
func (s *Service) Now() time.Time { return s.now() }

// now is the service's single idea of the current time: UTC, at the microsecond precision both
// databases store, so a time read back equals the time written.
func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// Stats counts what the service has done since it started; operators (the Prometheus metrics)
// and tests read it.
type Stats struct {
	// CodesIssued is the number of codes stored and handed to the mailer.
	CodesIssued int64
	// CodesResent is the number of sign-in codes sent again, unchanged, by a resend while they
	// were alive.
	CodesResent int64
	// CodeComparisons is the number of times a submitted code was compared with a stored one.
	CodeComparisons int64
	// SignIns is the number of successful verifications, sign-ups included.
	SignIns int64
	// SignUps is the number of accounts created.
	SignUps int64
	// FailedVerifications is the number of verifications that did not sign anyone in: the sum of
	// the Verify* outcomes below.
	FailedVerifications int64
	// VerifyWrong counts verifications refused for a wrong or unknown code (a code another
	// request used first included); VerifyExpired for an expired one; VerifyLocked for a code out
	// of attempts or an address locked by its failures; VerifyOther for the rest (bad input, an
	// unavailable database).
	VerifyWrong, VerifyExpired, VerifyLocked, VerifyOther int64
	// VerifyBanned counts right codes of banned accounts, which sign nobody in.
	VerifyBanned int64
	// Throttled is the number of sends and verifies refused by the per-address limits:
	// ThrottledSends for an address's used-up sends, ThrottledLocked for one locked by failures.
	Throttled, ThrottledSends, ThrottledLocked int64
	// CookieCacheReads is the number of session checks the cookie cache answered, with no
	// database.
	CookieCacheReads int64
	// SessionReads is the number of session checks that went to the database: those the cookie
	// cache could not answer.
	SessionReads int64
	// SessionQueries is the number of queries that answered them. On PostgreSQL, reads that
	// arrive while a query runs share the next one, so under load it is far below SessionReads.
	SessionQueries int64
	// SessionsEnded is the number of sessions ended by sign-out, revocation, an e-mail change or
	// restore, or a deletion (not those that expired).
	SessionsEnded int64
}

type counters struct {
	codesIssued, codesResent, codeComparisons, signIns, signUps         atomic.Int64
	verifyWrong, verifyExpired, verifyLocked, verifyOther, verifyBanned atomic.Int64
	throttledSends, throttledLocked                                     atomic.Int64
	sessionReads, cookieCacheReads, sessionsEnded                       atomic.Int64
}

// Stats returns a snapshot of the counters.
func (s *Service) Stats() Stats {
	st := Stats{
		CodesIssued:      s.stats.codesIssued.Load(),
		CodesResent:      s.stats.codesResent.Load(),
		CodeComparisons:  s.stats.codeComparisons.Load(),
		SignIns:          s.stats.signIns.Load(),
		SignUps:          s.stats.signUps.Load(),
		VerifyWrong:      s.stats.verifyWrong.Load(),
		VerifyExpired:    s.stats.verifyExpired.Load(),
		VerifyLocked:     s.stats.verifyLocked.Load(),
		VerifyOther:      s.stats.verifyOther.Load(),
		VerifyBanned:     s.stats.verifyBanned.Load(),
		ThrottledSends:   s.stats.throttledSends.Load(),
		ThrottledLocked:  s.stats.throttledLocked.Load(),
		CookieCacheReads: s.stats.cookieCacheReads.Load(),
		SessionReads:     s.stats.sessionReads.Load(),
		SessionQueries:   s.store.SessionQueries(),
		SessionsEnded:    s.stats.sessionsEnded.Load(),
	}
	st.FailedVerifications = st.VerifyWrong + st.VerifyExpired + st.VerifyLocked + st.VerifyOther + st.VerifyBanned
	st.Throttled = st.ThrottledSends + st.ThrottledLocked
	return st
}

// countFailedVerification counts a verification that signed nobody in, by why.
func (s *Service) countFailedVerification(err error) {
	switch {
	case errors.Is(err, ErrInvalidOTP):
		s.stats.verifyWrong.Add(1)
	case errors.Is(err, ErrOTPExpired):
		s.stats.verifyExpired.Add(1)
	case errors.Is(err, ErrTooManyAttempts), errors.Is(err, ErrRateLimited):
		s.stats.verifyLocked.Add(1)
	case errors.Is(err, ErrBanned):
		s.stats.verifyBanned.Add(1)
	default:
		s.stats.verifyOther.Add(1)
	}
}

func newID() string { return uuid.NewString() }
