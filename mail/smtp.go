package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// SMTP delivery policy.
const (
	// smtpConns is how many connections to the relay are open at most, each used by one message
	// at a time: relays limit connections per client, and a handful keeps a batch moving.
	smtpConns = 4
	// smtpIdle is how long a connection is kept open with nothing to send, for the next message
	// (a code asked for again, the next message of a batch). Relays drop idle clients after a
	// few minutes (RFC 5321 asks them to wait at least 5); well within that, no NOOP is wasted
	// on a connection the relay has already closed.
	smtpIdle = 30 * time.Second
	// smtpTimeout bounds a dial with its TLS and authentication, and each command after it.
	smtpTimeout = 15 * time.Second
)

// SMTPConfig is an SMTP relay to deliver through.
type SMTPConfig struct {
	// URL is SMTP_URL: smtp://user:pass@host:587 (STARTTLS, required) or smtps://user:pass@host:465
	// (TLS from the first byte). ?starttls=opportunistic uses STARTTLS when the relay offers it;
	// ?starttls=off never does (a relay on the same host or network only: the password and every
	// code then cross the network in the clear).
	URL string
	// From is the sender (EMAIL_FROM); its domain also names the Message-ID.
	From string
	// TLS, when set, replaces the TLS settings (the system's roots, the URL's host name): tests
	// trust their own certificate with it. Operators with a private CA set SSL_CERT_FILE.
	TLS *tls.Config
}

// smtpTarget is a checked SMTP_URL.
type smtpTarget struct {
	host       string
	port       int
	implicit   bool // smtps: TLS from the first byte
	policy     gomail.TLSPolicy
	user, pass string
}

// CheckSMTPURL checks an SMTP_URL and returns how the start-up log names it (no password); the
// error says what is wrong without repeating the password.
func CheckSMTPURL(raw string) (string, error) {
	t, err := parseSMTPURL(raw)
	if err != nil {
		return "", err
	}
	return t.describe(), nil
}

// parseSMTPURL reads an SMTP_URL's parts (SMTPConfig.URL says what they are).
func parseSMTPURL(raw string) (smtpTarget, error) {
	var t smtpTarget
	u, err := url.Parse(raw)
	if err != nil {
		return t, errors.New("is not a URL (smtp://user:password@host:587 or smtps://user:password@host:465)")
	}
	switch u.Scheme {
	case "smtp":
		t.port, t.policy = 587, gomail.TLSMandatory
	case "smtps":
		t.port, t.implicit, t.policy = 465, true, gomail.NoTLS
	default:
		return t, fmt.Errorf("scheme %q: use smtp:// (STARTTLS) or smtps:// (TLS)", u.Scheme)
	}
	t.host = u.Hostname()
	if t.host == "" || u.Path != "" && u.Path != "/" || u.Fragment != "" {
		return t, errors.New("must be smtp(s)://[user:password@]host[:port][?starttls=…] and nothing else")
	}
	if p := u.Port(); p != "" {
		if t.port, err = strconv.Atoi(p); err != nil || t.port < 1 || t.port > 65535 {
			return t, fmt.Errorf("port %q is not a port number", p)
		}
	}
	if u.User != nil {
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
		if t.user == "" {
			return t, errors.New("has a password without a user name")
		}
	}
	q := u.Query()
	for k := range q {
		if k != "starttls" {
			return t, fmt.Errorf("unknown setting %q (only starttls)", k)
		}
	}
	switch v := q.Get("starttls"); {
	case !q.Has("starttls") || v == "required":
	case t.implicit:
		return t, errors.New("starttls has no meaning with smtps://, which is TLS from the first byte")
	case v == "opportunistic":
		t.policy = gomail.TLSOpportunistic
	case v == "off":
		t.policy = gomail.NoTLS
	default:
		return t, fmt.Errorf("starttls=%q: use required (the default), opportunistic or off", v)
	}
	return t, nil
}

// describe names the relay and how it is reached, for the start-up log: no password.
func (t smtpTarget) describe() string {
	mode := "STARTTLS"
	switch {
	case t.implicit:
		mode = "TLS"
	case t.policy == gomail.TLSOpportunistic:
		mode = "STARTTLS if offered"
	case t.policy == gomail.NoTLS:
		mode = "no TLS"
	}
	auth := ""
	if t.user != "" {
		auth = ", authenticated"
	}
	return fmt.Sprintf("smtp %s (%s%s)", net.JoinHostPort(t.host, strconv.Itoa(t.port)), mode, auth)
}

// SMTP delivers through an SMTP relay with go-mail. Connections are reused from one message to
// the next (up to smtpConns at once, each kept smtpIdle), so a batch costs one dial, TLS
// handshake and login per connection, not per message. Each message's Message-ID is its outbox
// id, so a message sent again after an answer that was lost (SMTP has no idempotency key) is
// recognisable as the same one.
type SMTP struct {
	client *gomail.Client
	target smtpTarget
	from   string
	domain string
	// slots holds a token per connection that may be open.
	slots chan struct{}
	mu    sync.Mutex
	idle  []idleConn
	timer *time.Timer
}

// idleConn is an open connection waiting for the next message.
type idleConn struct {
	c     *smtp.Client
	since time.Time
}

// NewSMTP returns the mailer for cfg.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	t, err := parseSMTPURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("EMAIL_FROM: %q is not an address (Acme <auth@acme.example>)", cfg.From)
	}
	tlsConfig := cfg.TLS
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: t.host, MinVersion: tls.VersionTLS12}
	}
	opts := []gomail.Option{
		gomail.WithPort(t.port), gomail.WithTimeout(smtpTimeout), gomail.WithTLSConfig(tlsConfig),
		gomail.WithTLSPortPolicy(t.policy),
	}
	if t.implicit {
		opts = append(opts, gomail.WithSSL())
	}
	if t.user != "" {
		// The strongest mechanism the relay offers; PLAIN and LOGIN only over TLS.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover), gomail.WithUsername(t.user), gomail.WithPassword(t.pass))
	}
	client, err := gomail.NewClient(t.host, opts...)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	// The port policy above chose the port; it must not be replaced by a fallback.
	client.SetTLSPolicy(t.policy)
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	return &SMTP{client: client, target: t, from: cfg.From, domain: domain, slots: make(chan struct{}, smtpConns)}, nil
}

// String names the relay for the start-up log.
func (s *SMTP) String() string { return s.target.describe() }

// Send hands m to the relay on an open connection, or a new one. A 4xx answer (greylisting, a
// full queue) and a lost connection are worth retrying; a 5xx answer to the message refuses it
// (PermanentError); a refused login or TLS that cannot be set up is the operator's to fix
// (CredentialsError).
func (s *SMTP) Send(ctx context.Context, m Message) error {
	msg, err := s.message(m)
	if err != nil {
		return &PermanentError{Err: err}
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.slots }()
	c, reused := s.take()
	if c == nil {
		if c, err = s.dial(ctx); err != nil {
			return err
		}
	}
	err = s.client.SendWithSMTPClient(c, msg)
	var sendErr *gomail.SendError
	if reused && errors.As(err, &sendErr) && sendErr.Reason == gomail.ErrConnCheck {
		// The relay closed the connection while it was idle: once more on a new one.
		c.Close()
		if c, err = s.dial(ctx); err != nil {
			return err
		}
		err = s.client.SendWithSMTPClient(c, msg)
	}
	if err == nil {
		s.put(c)
		return nil
	}
	// After a failure the connection's state is not worth trusting: it goes.
	_ = c.Close()
	return classifySMTP(err)
}

// message builds the MIME message of m: text with an HTML alternative.
func (s *SMTP) message(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("recipient: %w", err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	if m.ID != "" {
		msg.SetMessageIDWithValue(m.ID + "@" + s.domain)
	} else {
		msg.SetMessageID()
	}
	// RFC 3834: no vacation or out-of-office answers to a code.
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// dial opens and readies a connection: TLS, EHLO, login.
func (s *SMTP) dial(ctx context.Context) (*smtp.Client, error) {
	c, err := s.client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return nil, classifySMTP(err)
	}
	return c, nil
}

// take returns an idle connection (reused true), or nil when there is none.
func (s *SMTP) take() (*smtp.Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		last := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if time.Since(last.since) < smtpIdle {
			return last.c, true
		}
		go last.c.Quit()
	}
	return nil, false
}

// put keeps c for the next message, and has it closed once it has been idle smtpIdle.
func (s *SMTP) put(c *smtp.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle = append(s.idle, idleConn{c: c, since: time.Now()})
	if s.timer == nil {
		s.timer = time.AfterFunc(smtpIdle, s.reap)
	}
}

// reap closes the connections idle for smtpIdle, and comes back for the others.
func (s *SMTP) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	kept := s.idle[:0]
	for _, ic := range s.idle {
		if time.Since(ic.since) >= smtpIdle {
			go ic.c.Quit()
			continue
		}
		kept = append(kept, ic)
	}
	s.idle = kept
	if len(s.idle) > 0 {
		s.timer = time.AfterFunc(smtpIdle-time.Since(s.idle[0].since), s.reap)
	}
}

// Close says goodbye on the idle connections.
func (s *SMTP) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	for _, ic := range idle {
		_ = ic.c.Quit()
	}
	return nil
}

// classifySMTP sorts a failure by what retrying can do about it: the relay's 5xx to the message
// is permanent; a refused login (530, 534, 535, 538), a relay without the required STARTTLS or
// AUTH, or a certificate that does not verify is the operator's (CredentialsError); a 4xx, a
// timeout or a lost connection is retried.
func classifySMTP(err error) error {
	code := 0
	var tp *textproto.Error
	var sendErr *gomail.SendError
	switch {
	case errors.As(err, &tp):
		code = tp.Code
	case errors.As(err, &sendErr):
		code = sendErr.ErrorCode()
	}
	err = fmt.Errorf("smtp: %w", err)
	var certErr *tls.CertificateVerificationError
	switch {
	case code == 530 || code == 534 || code == 535 || code == 538:
		return &CredentialsError{Err: err}
	case code >= 500:
		return &PermanentError{Err: err}
	case code >= 400:
		return err
	case errors.As(err, &certErr), errors.Is(err, gomail.ErrNoSupportedAuthDiscovered),
		strings.Contains(err.Error(), "does not support STARTTLS"), strings.Contains(err.Error(), "does not support SMTP AUTH"):
		return &CredentialsError{Err: err}
	}
	return err
}
