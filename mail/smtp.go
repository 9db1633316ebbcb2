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
	tls    *tls.Config
	from   string
	domain string
	// timeout bounds a dial and each command: smtpTimeout (tests shorten it).
	timeout time.Duration
	// slots holds a token per connection that may be open.
	slots chan struct{}
	// dialing serialises dials: go-mail's Client rewrites its own login setting during one (for
	// a relay that offers none of the preferred mechanisms), under a read lock only. Dials are
	// rare: connections are reused.
	dialing sync.Mutex
	// auth is the login setting each dial starts from (go-mail may have rewritten it).
	auth  gomail.SMTPAuthType
	mu    sync.Mutex
	idle  []idleConn
	timer *time.Timer
}

// relayConn is a connection to the relay: the SMTP conversation, and the network connection
// under it, which is closed to stop a conversation whose context ended.
type relayConn struct {
	c   *smtp.Client
	raw net.Conn
}

// close ends the connection without a goodbye.
func (rc relayConn) close() {
	_ = rc.c.Close()
	_ = rc.raw.Close()
}

// quit says goodbye, and closes the connection whatever the relay answers.
func (rc relayConn) quit() {
	_ = rc.c.Quit()
	_ = rc.raw.Close()
}

// idleConn is an open connection waiting for the next message.
type idleConn struct {
	relayConn
	since time.Time
}

// dialedKey carries, in a dial's context, the dialedConn where dialRelay records the connection
// it opened, so that a set-up that fails after it (a refused login, no STARTTLS) closes it
// (go-mail leaves it open), and one whose context ends stops at once.
type dialedKey struct{}

// dialedConn is the connection a dial opened, once it has one, and whether the dial was stopped
// (its context ended): a connection recorded after that is closed at once.
type dialedConn struct {
	mu      sync.Mutex
	conn    net.Conn
	stopped bool
}

// set records c, or reports false when the dial was stopped already.
func (d *dialedConn) set(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return false
	}
	d.conn = c
	return true
}

// stop closes the connection, under whatever the dial is waiting for (the greeting, EHLO,
// STARTTLS, the login), and any recorded later.
func (d *dialedConn) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.conn != nil {
		_ = d.conn.Close()
	}
}

// recorded is the connection recorded, or nil.
func (d *dialedConn) recorded() net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// NewSMTP returns the mailer for cfg.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) { return newSMTP(cfg, smtpTimeout) }

// newSMTP is NewSMTP with timeout for each dial and command.
func newSMTP(cfg SMTPConfig, timeout time.Duration) (*SMTP, error) {
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
	s := &SMTP{target: t, tls: tlsConfig, from: cfg.From, timeout: timeout, slots: make(chan struct{}, smtpConns)}
	s.domain = from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	// The URL's port, and the URL's TLS policy: go-mail's "port policy" options would move the
	// port (smtp://relay:25 to 587) and fall back to another. Implicit TLS (smtps) is set up by
	// dialRelay, which also records each connection so a failed set-up closes it.
	opts := []gomail.Option{
		gomail.WithPort(t.port), gomail.WithTimeout(timeout), gomail.WithTLSConfig(tlsConfig),
		gomail.WithTLSPolicy(t.policy), gomail.WithDialContextFunc(s.dialRelay),
	}
	if t.user != "" {
		// The strongest mechanism the relay offers; PLAIN and LOGIN only over TLS (smtp's own
		// PLAIN and LOGIN refuse a connection without it).
		s.auth = gomail.SMTPAuthOpportunistic
		opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthSCRAMSHA256PLUS, gomail.SMTPAuthSCRAMSHA256,
			gomail.SMTPAuthSCRAMSHA1PLUS, gomail.SMTPAuthSCRAMSHA1, gomail.SMTPAuthCramMD5, gomail.SMTPAuthPlain, gomail.SMTPAuthLogin),
			gomail.WithUsername(t.user), gomail.WithPassword(t.pass))
	}
	client, err := gomail.NewClient(t.host, opts...)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	s.client = client
	return s, nil
}

// dialRelay opens a connection to the relay, with TLS from the first byte for smtps, and records
// it where the dial's context says (dialedKey).
func (s *SMTP) dialRelay(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if s.target.implicit {
		tc := tls.Client(conn, s.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}
	if at, ok := ctx.Value(dialedKey{}).(*dialedConn); ok && !at.set(conn) {
		_ = conn.Close()
		return nil, ctx.Err()
	}
	return conn, nil
}

// String names the relay for the start-up log.
func (s *SMTP) String() string { return s.target.describe() }

// Send hands m to the relay on an open connection, or a new one. A 4xx answer (greylisting, a
// full queue) and a lost connection are worth retrying; a 5xx answer to the message refuses it
// (PermanentError); a refused login or TLS that cannot be set up is the operator's to fix
// (CredentialsError).
//
// The send stops when ctx ends, at whatever command it is: its connection is closed under it.
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
	rc, reused := s.take()
	if !reused {
		if rc, err = s.dial(ctx); err != nil {
			return err
		}
	}
	err = s.send(ctx, rc, msg)
	var sendErr *gomail.SendError
	if reused && ctx.Err() == nil && errors.As(err, &sendErr) && sendErr.Reason == gomail.ErrConnCheck {
		// The relay closed the connection while it was idle: once more on a new one.
		rc.close()
		if rc, err = s.dial(ctx); err != nil {
			return err
		}
		err = s.send(ctx, rc, msg)
	}
	if err == nil {
		s.put(rc)
		return nil
	}
	// After a failure the connection's state is not worth trusting: it goes.
	rc.close()
	if ctx.Err() != nil {
		return fmt.Errorf("smtp: %w", ctx.Err())
	}
	return classifySMTP(err, false)
}

// send hands msg to the relay on rc, closing rc's connection if ctx ends first.
func (s *SMTP) send(ctx context.Context, rc relayConn, msg *gomail.Msg) error {
	stop := context.AfterFunc(ctx, func() { _ = rc.raw.Close() })
	defer stop()
	return s.client.SendWithSMTPClient(rc.c, msg)
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

// dial opens and readies a connection: TLS, EHLO, login. A set-up that fails closes the
// connection it opened, and one whose context ends stops at whatever step it is.
func (s *SMTP) dial(ctx context.Context) (relayConn, error) {
	s.dialing.Lock()
	defer s.dialing.Unlock()
	if s.auth != "" {
		s.client.SetSMTPAuth(s.auth) // as configured, whatever the last dial left
	}
	held := &dialedConn{}
	stop := context.AfterFunc(ctx, held.stop)
	c, err := s.client.DialToSMTPClientWithContext(context.WithValue(ctx, dialedKey{}, held))
	stopped := !stop()
	raw := held.recorded()
	if err != nil || stopped {
		if c != nil {
			_ = c.Close()
		}
		if raw != nil {
			_ = raw.Close()
		}
		if ctx.Err() != nil {
			return relayConn{}, fmt.Errorf("smtp: %w", ctx.Err())
		}
		return relayConn{}, classifySMTP(err, true)
	}
	return relayConn{c: c, raw: raw}, nil
}

// take returns an idle connection, its command deadline renewed (reused true), or none.
func (s *SMTP) take() (relayConn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		last := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		// The deadline set by the last command has passed while it waited (it is shorter than
		// smtpIdle): renewed, the connection's next command gets its full time.
		if time.Since(last.since) < smtpIdle && last.c.UpdateDeadline(s.timeout) == nil {
			return last.relayConn, true
		}
		go last.quit()
	}
	return relayConn{}, false
}

// put keeps rc for the next message, and has it closed once it has been idle smtpIdle.
func (s *SMTP) put(rc relayConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle = append(s.idle, idleConn{relayConn: rc, since: time.Now()})
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
			go ic.quit()
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
		ic.quit()
	}
	return nil
}

// classifySMTP sorts a failure by what retrying can do about it: the relay's 5xx to the
// recipient or the message is permanent; a 5xx while the connection is set up (the greeting,
// EHLO: setup) or to the sender (MAIL FROM: a sender the relay does not accept), a refused login
// (530, 534, 535, 538), a relay without the required STARTTLS or AUTH, or a certificate that
// does not verify is the operator's (CredentialsError), as it fails every message alike; a 4xx,
// a timeout or a lost connection is retried.
func classifySMTP(err error, setup bool) error {
	code := 0
	var tp *textproto.Error
	var sendErr *gomail.SendError
	switch {
	case errors.As(err, &tp):
		code = tp.Code
	case errors.As(err, &sendErr):
		code = sendErr.ErrorCode()
		setup = setup || sendErr.Reason == gomail.ErrSMTPMailFrom
	}
	err = fmt.Errorf("smtp: %w", err)
	var certErr *tls.CertificateVerificationError
	switch {
	case code == 530 || code == 534 || code == 535 || code == 538:
		return &CredentialsError{Err: err}
	case code >= 500 && setup:
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
