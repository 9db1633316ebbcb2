package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	stdmail "net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Relay is a real SMTP server (emersion/go-smtp) in the test's process: it takes messages, and
// answers as the test tells it to, per recipient.
type Relay struct {
	t *testing.T
	// Srv is the server; Addr is where it listens.
	Srv  *smtp.Server
	Addr string
	// user and pass are the login it accepts; empty: it offers no AUTH.
	user, pass string
	// Answer, when set, is the relay's answer to RCPT TO for an address; nil accepts.
	Answer func(to string) error
	// MailAnswer, when set, is the relay's answer to MAIL FROM for a sender; nil accepts.
	MailAnswer func(from string) error
	// Hold, when set, makes the relay take a message's data and then say nothing until it is
	// closed: a relay that stalls.
	Hold chan struct{}

	mu       sync.Mutex
	received []Received
	// Conns counts the connections accepted; Open those not closed yet.
	Conns, Open atomic.Int32
	// Logins counts successful logins.
	Logins atomic.Int32
}

// Received is one message the relay took: its envelope and its parsed content.
type Received struct {
	From, To string
	Msg      *stdmail.Message
	Body     string
}

// RelayCert makes a self-signed certificate for 127.0.0.1 and localhost, and the pool that
// trusts it.
func RelayCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// RelayMode is how a relay speaks TLS.
type RelayMode int

const (
	PlainRelay    RelayMode = iota // no TLS at all
	StartTLSRelay                  // STARTTLS offered
	ImplicitRelay                  // TLS from the first byte (smtps)
)

// StartRelay starts a relay in mode with cert, accepting the login user:pass (none when empty).
func StartRelay(t *testing.T, mode RelayMode, cert tls.Certificate, user, pass string) *Relay {
	t.Helper()
	return StartRelayAt(t, "127.0.0.1:0", mode, cert, user, pass)
}

// StartRelayAt is StartRelay listening on addr (such as 127.0.0.1:25) instead of a free port.
func StartRelayAt(t *testing.T, addr string, mode RelayMode, cert tls.Certificate, user, pass string) *Relay {
	t.Helper()
	r := &Relay{t: t, user: user, pass: pass}
	r.Srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &relaySession{r: r}, nil
	}))
	r.Srv.Domain = "relay.test"
	r.Srv.ReadTimeout, r.Srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	r.Addr = ln.Addr().String()
	// Counted under the TLS, so the server still sees a TLS connection (and offers AUTH on it).
	var served net.Listener = countingListener{ln, &r.Conns, &r.Open}
	switch mode {
	case ImplicitRelay:
		served = tls.NewListener(served, &tls.Config{Certificates: []tls.Certificate{cert}})
	case StartTLSRelay:
		r.Srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	go r.Srv.Serve(served)
	t.Cleanup(func() { r.Srv.Close() })
	return r
}

// countingListener counts the connections it accepts, and those still open.
type countingListener struct {
	net.Listener
	n, open *atomic.Int32
}

// Accept counts the connection and wraps it so its closing is counted too.
func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
		l.open.Add(1)
		c = &countedConn{Conn: c, open: l.open}
	}
	return c, err
}

// countedConn takes itself off its listener's open count when it is closed.
type countedConn struct {
	net.Conn
	open *atomic.Int32
	once sync.Once
}

// Close takes the connection off the open count, once, and closes it.
func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// Messages returns what the relay has taken so far.
func (r *Relay) Messages() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.received...)
}

// relaySession is one connection's conversation.
type relaySession struct {
	r        *Relay
	authed   bool
	from, to string
}

func (s *relaySession) AuthMechanisms() []string {
	if s.r.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *relaySession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != s.r.user || password != s.r.pass {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		s.r.Logins.Add(1)
		return nil
	}), nil
}

func (s *relaySession) Mail(from string, _ *smtp.MailOptions) error {
	if s.r.user != "" && !s.authed {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	if s.r.MailAnswer != nil {
		if err := s.r.MailAnswer(from); err != nil {
			return err
		}
	}
	s.from = from
	return nil
}

func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.r.Answer != nil {
		if err := s.r.Answer(to); err != nil {
			return err
		}
	}
	s.to = to
	return nil
}

func (s *relaySession) Data(body io.Reader) error {
	raw, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	msg, err := stdmail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		return err
	}
	content, _ := io.ReadAll(msg.Body)
	if s.r.Hold != nil {
		<-s.r.Hold
	}
	s.r.mu.Lock()
	s.r.received = append(s.r.received, Received{From: s.from, To: s.to, Msg: msg, Body: string(content)})
	s.r.mu.Unlock()
	return nil
}

func (s *relaySession) Reset()        { s.from, s.to = "", "" }
func (s *relaySession) Logout() error { return nil }

// Greylisted is the answer of a relay that greylists: come back later.
var Greylisted = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, try again later"}

// NoSuchUser is the answer for an address the relay knows does not exist.
var NoSuchUser = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"}
