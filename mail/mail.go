// Package mail sends the service's e-mail: the templates, the Mailer interface with its console
// and provider implementations, and the durable outbox that delivers in the background. The
// console mailer is used when no provider is configured, so local and mobile sign-in work on a
// fresh machine with nothing set up.
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Kind names what an e-mail is for; it appears in logs, console lines and template names.
type Kind string

// The kinds of e-mail the service sends.
const (
	// KindSignInCode carries a one-time sign-in code.
	KindSignInCode Kind = "sign-in-code"
	// KindSignInCodeLink carries a one-time sign-in code and a link that signs in with it
	// (AUTH_SIGNIN_LINK).
	KindSignInCodeLink Kind = "sign-in-code-link"
	// KindChangeEmailCode carries the code that confirms a new address (app flow).
	KindChangeEmailCode Kind = "change-email-code"
	// KindChangeEmailLink carries the link that confirms a new address (web flow).
	KindChangeEmailLink Kind = "change-email-link"
	// KindEmailChanged tells the old address about a change, with a link to undo it.
	KindEmailChanged Kind = "email-changed"
	// KindWelcome greets a new account after sign-up.
	KindWelcome Kind = "welcome"
	// KindAccountDeleted confirms a deletion and its grace period.
	KindAccountDeleted Kind = "account-deleted"
	// KindFormerAddressDeleted tells an old address whose restore link still works that the
	// account was deleted: the link also undoes the deletion.
	KindFormerAddressDeleted Kind = "former-address-deleted"
	// KindNewDevice tells an account it was signed in from a device it had not seen lately.
	KindNewDevice Kind = "new-device"
	// KindSignInPaused tells an address that failed codes paused its sign-in, and until when.
	KindSignInPaused Kind = "sign-in-paused"
)

// Message is one e-mail to one recipient. Code and Link are the secrets it carries, if any; they
// are separate fields so the console mailer can show them and nothing else ever logs them. ID,
// set by the outbox, identifies the message to the provider, so a retry is never sent twice.
type Message struct {
	ID      string
	Kind    Kind
	To      string
	Subject string
	Text    string
	HTML    string
	Code    string
	Link    string
}

// Mailer delivers messages. Send returns once the message is handed over; an error means it was
// not, and a PermanentError that it never will be.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// PermanentError is a refusal that retrying cannot change (an address or a message the provider
// rejects); the outbox gives up on the message at once.
type PermanentError struct{ Err error }

// Error describes the refusal.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the provider's error.
func (e *PermanentError) Unwrap() error { return e.Err }

// CredentialsError is the provider refusing this service's credentials (a wrong or revoked API
// key, an unverified sending domain). It is fixed by the operator, not by the message, so the
// outbox keeps retrying, and logs it as an error that needs someone's attention: giving up would
// silently lose every e-mail of the outage, restore links included.
type CredentialsError struct{ Err error }

// Error describes the refusal.
func (e *CredentialsError) Error() string { return "credentials refused: " + e.Err.Error() }

// Unwrap returns the provider's error.
func (e *CredentialsError) Unwrap() error { return e.Err }

// ProviderConfig selects and configures the provider.
type ProviderConfig struct {
	// APIKey is EMAIL_PROVIDER_API_KEY; empty selects the console mailer.
	APIKey string
	// From is the sender (EMAIL_FROM), required with a provider.
	From string
	// BaseURL overrides the provider's API address (EMAIL_PROVIDER_URL), for tests and for
	// compatible self-hosted endpoints.
	BaseURL string
	// SMTPURL is the relay used without an API key (SMTP_URL; SMTPConfig.URL says its form).
	SMTPURL string
	// SMTPTLS, when set, replaces the relay's TLS settings (SMTPConfig.TLS).
	SMTPTLS *tls.Config
}

// New returns the mailer the configuration asks for, one transport chosen once: Resend when an
// API key is set, else the SMTP relay when SMTP_URL is, else the console mailer writing to
// console. Describe names it for the start-up log.
func New(cfg ProviderConfig, console io.Writer) (Mailer, error) {
	switch {
	case cfg.APIKey != "":
		if cfg.From == "" {
			return nil, errors.New("EMAIL_FROM: required with EMAIL_PROVIDER_API_KEY")
		}
		return NewResend(cfg)
	case cfg.SMTPURL != "":
		if cfg.From == "" {
			return nil, errors.New("EMAIL_FROM: required with SMTP_URL")
		}
		return NewSMTP(SMTPConfig{URL: cfg.SMTPURL, From: cfg.From, TLS: cfg.SMTPTLS})
	}
	return NewConsole(console), nil
}

// Describe names the transport m delivers through, for the start-up log, without secrets:
// "resend", "smtp mail.example.com:587 (STARTTLS, authenticated)", "console".
func Describe(m Mailer) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", m)
}

// Console writes one line per e-mail, naming the kind, the recipient and the code or link:
//
//	mail kind=sign-in-code to=alice@example.com code=123456
//
// It is the development and zero-configuration mailer; tools may read these lines.
type Console struct {
	mu sync.Mutex
	w  io.Writer
}

// NewConsole returns a console mailer writing to w.
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

// String names the transport for the start-up log.
func (c *Console) String() string { return "console (codes and links on stdout, nothing e-mailed)" }

// Send writes the message's line.
func (c *Console) Send(_ context.Context, m Message) error {
	var b strings.Builder
	b.WriteString("mail kind=")
	b.WriteString(string(m.Kind))
	b.WriteString(" to=")
	b.WriteString(m.To)
	if m.Code != "" {
		b.WriteString(" code=")
		b.WriteString(m.Code)
	}
	if m.Link != "" {
		b.WriteString(" link=")
		b.WriteString(m.Link)
	}
	b.WriteByte('\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.w, b.String())
	return err
}
