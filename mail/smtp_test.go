package mail_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"

	"github.com/emersion/go-smtp"
)

// newSMTP is the mailer for url, trusting pool.
func newSMTP(t *testing.T, url string, pool *x509.CertPool) *mail.SMTP {
	t.Helper()
	m, err := mail.NewSMTP(mail.SMTPConfig{URL: url, From: "Acme <auth@acme.test>", TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func message(id, to string) mail.Message {
	return mail.Message{ID: id, Kind: mail.KindSignInCode, To: to, Subject: "123456 is your Acme code",
		Text: "Your code is 123456.", HTML: "<p>Your code is <b>123456</b>.</p>", Code: "123456"}
}

// Over STARTTLS with a login, a batch of messages goes out through a few reused connections, each
// a text part with its HTML alternative, the outbox id as its Message-ID, and marked as sent by a
// machine.
func TestSMTP_StartTLSLoginAndReuse(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "p@ss:word/1")
	m := newSMTP(t, "smtp://acme:p%40ss%3Aword%2F1@"+r.Addr, pool)
	if got := mail.Describe(m); got != "smtp "+r.Addr+" (STARTTLS, authenticated)" {
		t.Fatalf("described as %q", got)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Send(context.Background(), message(fmt.Sprintf("id-%02d", i), fmt.Sprintf("user%02d@example.com", i)))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := r.Messages()
	if len(got) != n {
		t.Fatalf("the relay took %d messages, want %d", len(got), n)
	}
	if s := r.Conns.Load(); s > 4 {
		t.Fatalf("%d connections for %d messages: connections are not reused (at most 4 at once)", s, n)
	}
	for _, rc := range got {
		id := strings.TrimSuffix(strings.TrimPrefix(rc.To, "user"), "@example.com")
		if want := "<id-" + id + "@acme.test>"; rc.Msg.Header.Get("Message-Id") != want {
			t.Errorf("Message-ID %q, want %q", rc.Msg.Header.Get("Message-Id"), want)
		}
		if rc.From != "auth@acme.test" || rc.Msg.Header.Get("From") != `"Acme" <auth@acme.test>` {
			t.Errorf("envelope from %q, header From %q", rc.From, rc.Msg.Header.Get("From"))
		}
		if rc.Msg.Header.Get("Subject") != "123456 is your Acme code" || rc.Msg.Header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("headers %v", rc.Msg.Header)
		}
		if ct := rc.Msg.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative") {
			t.Errorf("Content-Type %q, want multipart/alternative", ct)
		}
		if !strings.Contains(rc.Body, "Your code is 123456.") || !strings.Contains(rc.Body, "<b>123456</b>") {
			t.Errorf("body lacks a part:\n%s", rc.Body)
		}
	}
	// The next message reuses an idle connection: no new one, no new login.
	sessions, logins := r.Conns.Load(), r.Logins.Load()
	if err := m.Send(context.Background(), message("id-again", "again@example.com")); err != nil {
		t.Fatal(err)
	}
	if r.Conns.Load() != sessions || r.Logins.Load() != logins {
		t.Fatalf("a message after a batch opened a connection (%d → %d) or logged in again (%d → %d)",
			sessions, r.Conns.Load(), logins, r.Logins.Load())
	}
}

// smtps:// speaks TLS from the first byte.
func TestSMTP_ImplicitTLS(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelay(t, testkit.ImplicitRelay, cert, "acme", "secret")
	m := newSMTP(t, "smtps://acme:secret@"+r.Addr, pool)
	if err := m.Send(context.Background(), message("id-1", "bob@example.com")); err != nil {
		t.Fatal(err)
	}
	if len(r.Messages()) != 1 {
		t.Fatal("nothing arrived")
	}
}

// What the relay or its set-up refuses is sorted by what a retry can do: a refused login, a relay
// without the required STARTTLS and a certificate that does not verify are the operator's to fix
// (retried, logged as errors); greylisting is retried; a 5xx to the message gives it up.
func TestSMTP_FailuresAreClassified(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	var credentials *mail.CredentialsError
	var permanent *mail.PermanentError

	t.Run("wrong password", func(t *testing.T) {
		r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "secret")
		err := newSMTP(t, "smtp://acme:wrong@"+r.Addr, pool).Send(context.Background(), message("id-1", "bob@example.com"))
		if !errors.As(err, &credentials) || !strings.Contains(err.Error(), "535") {
			t.Fatalf("a refused login gave %v (%T)", err, err)
		}
		if strings.Contains(err.Error(), "wrong") {
			t.Fatalf("the error repeats the password: %v", err)
		}
	})
	t.Run("no STARTTLS", func(t *testing.T) {
		r := testkit.StartRelay(t, testkit.PlainRelay, cert, "", "")
		err := newSMTP(t, "smtp://"+r.Addr, pool).Send(context.Background(), message("id-1", "bob@example.com"))
		if !errors.As(err, &credentials) || len(r.Messages()) != 0 {
			t.Fatalf("a relay without STARTTLS gave %v (%T), %d messages went in the clear", err, err, len(r.Messages()))
		}
		// Said otherwise in the URL, it is used in the clear.
		if err := newSMTP(t, "smtp://"+r.Addr+"?starttls=opportunistic", pool).Send(context.Background(), message("id-2", "bob@example.com")); err != nil {
			t.Fatal(err)
		}
		if err := newSMTP(t, "smtp://"+r.Addr+"?starttls=off", pool).Send(context.Background(), message("id-3", "bob@example.com")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "", "")
		err := newSMTP(t, "smtp://"+r.Addr, x509.NewCertPool()).Send(context.Background(), message("id-1", "bob@example.com"))
		if !errors.As(err, &credentials) || len(r.Messages()) != 0 {
			t.Fatalf("an untrusted certificate gave %v (%T)", err, err)
		}
	})
	t.Run("greylisting and a refused address", func(t *testing.T) {
		r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "secret")
		r.Answer = func(to string) error {
			switch to {
			case "grey@example.com":
				return testkit.Greylisted
			case "nobody@example.com":
				return testkit.NoSuchUser
			}
			return nil
		}
		m := newSMTP(t, "smtp://acme:secret@"+r.Addr, pool)
		err := m.Send(context.Background(), message("id-1", "grey@example.com"))
		if err == nil || errors.As(err, &permanent) || errors.As(err, &credentials) || !strings.Contains(err.Error(), "451") {
			t.Fatalf("greylisting gave %v (%T), want a failure worth retrying", err, err)
		}
		err = m.Send(context.Background(), message("id-2", "nobody@example.com"))
		if !errors.As(err, &permanent) || !strings.Contains(err.Error(), "550") {
			t.Fatalf("550 gave %v (%T), want a permanent refusal", err, err)
		}
		// A failure leaves the mailer working for the next message.
		if err := m.Send(context.Background(), message("id-3", "bob@example.com")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("relay down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		err = newSMTP(t, "smtp://"+addr, pool).Send(context.Background(), message("id-1", "bob@example.com"))
		if err == nil || errors.As(err, &permanent) || errors.As(err, &credentials) {
			t.Fatalf("an unreachable relay gave %v (%T), want a failure worth retrying", err, err)
		}
	})
}

// A connection the relay closed while it was idle is replaced without failing the message.
func TestSMTP_RelayClosedIdleConnection(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "", "")
	m := newSMTP(t, "smtp://"+r.Addr, pool)
	if err := m.Send(context.Background(), message("id-1", "bob@example.com")); err != nil {
		t.Fatal(err)
	}
	// A relay restart: every connection is dropped, and it listens again on the same address.
	r.Srv.Close()
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	r.Srv = smtp.NewServer(r.Srv.Backend)
	r.Srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	go r.Srv.Serve(ln)
	if err := m.Send(context.Background(), message("id-2", "bob@example.com")); err != nil {
		t.Fatalf("after the relay dropped the idle connection: %v", err)
	}
	if len(r.Messages()) != 2 {
		t.Fatalf("%d messages arrived, want 2", len(r.Messages()))
	}
}

// Through the outbox, on both databases: a testkit.Greylisted message is retried after its backoff and
// then delivered once; a message the relay refuses with 5xx is given up at once.
func TestSMTP_OutboxRetriesGreylistingAndGivesUpOn5xx(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		cert, pool := testkit.RelayCert(t)
		r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "secret")
		var greylist atomic.Bool
		greylist.Store(true)
		r.Answer = func(to string) error {
			if to == "grey@example.com" && greylist.Load() {
				return testkit.Greylisted
			}
			if to == "nobody@example.com" {
				return testkit.NoSuchUser
			}
			return nil
		}
		o := f.instance(newSMTP(t, "smtp://acme:secret@"+r.Addr, pool))
		f.enqueue(o, "grey@example.com")
		f.enqueue(o, "nobody@example.com")
		report, err := o.DeliverDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if report != (mail.DeliveryReport{Failed: 1, Abandoned: 1}) {
			t.Fatalf("first pass %+v, want one failed (testkit.Greylisted) and one given up (550)", report)
		}
		greylist.Store(false)
		f.clock.Advance(mail.Backoff(1))
		if report, err = o.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		if report != (mail.DeliveryReport{Sent: 1}) {
			t.Fatalf("after the backoff %+v, want the testkit.Greylisted message sent", report)
		}
		got := r.Messages()
		if len(got) != 1 || got[0].To != "grey@example.com" {
			t.Fatalf("the relay took %+v", got)
		}
		if f.pending() != 0 {
			t.Fatalf("%d messages still pending", f.pending())
		}
	})
}

// smtp://relay:25 dials port 25, the URL's: go-mail's port policy moved it to 587 (review of
// issue 17).
func TestSMTP_DialsThePortOfTheURL(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelayAt(t, "127.0.0.1:25", testkit.StartTLSRelay, cert, "", "")
	m := newSMTP(t, "smtp://127.0.0.1:25", pool)
	if got := mail.Describe(m); got != "smtp 127.0.0.1:25 (STARTTLS)" {
		t.Fatalf("described as %q", got)
	}
	if err := m.Send(context.Background(), message("id-1", "bob@example.com")); err != nil {
		t.Fatal(err)
	}
	if len(r.Messages()) != 1 {
		t.Fatal("nothing arrived on port 25")
	}
}

// A connection kept idle past its last command's deadline (shorter than the idle time) is used
// again, its deadline renewed: not failed, redialled and logged in again.
func TestSMTP_IdleConnectionsOutliveTheirCommandDeadline(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "secret")
	m, err := mail.NewSMTPWithTimeout(mail.SMTPConfig{URL: "smtp://acme:secret@" + r.Addr, From: "auth@acme.test",
		TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 3 {
		if err := m.Send(context.Background(), message(fmt.Sprintf("id-%d", i), "bob@example.com")); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		time.Sleep(500 * time.Millisecond) // past the command deadline, within the idle time
	}
	if r.Conns.Load() != 1 || r.Logins.Load() != 1 {
		t.Fatalf("%d connections and %d logins for 3 messages, want 1 of each", r.Conns.Load(), r.Logins.Load())
	}
}

// A relay that refuses the sender (MAIL FROM) or the greeting refuses every message alike: the
// operator's configuration (CredentialsError), kept and retried, not a message given up.
func TestSMTP_RefusedSenderIsTheOperators(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	var credentials *mail.CredentialsError
	r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "acme", "secret")
	r.MailAnswer = func(string) error {
		return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Sender address rejected: not owned by user acme"}
	}
	err := newSMTP(t, "smtp://acme:secret@"+r.Addr, pool).Send(context.Background(), message("id-1", "bob@example.com"))
	if !errors.As(err, &credentials) || !strings.Contains(err.Error(), "553") {
		t.Fatalf("a refused sender gave %v (%T), want the operator's error", err, err)
	}
	// A relay whose greeting is a 554 (it does not serve this client).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "554 5.7.1 No SMTP service here\r\n")
			c.Close()
		}
	}()
	err = newSMTP(t, "smtp://"+ln.Addr().String(), pool).Send(context.Background(), message("id-2", "bob@example.com"))
	if !errors.As(err, &credentials) || !strings.Contains(err.Error(), "554") {
		t.Fatalf("a refused greeting gave %v (%T), want the operator's error", err, err)
	}
}

// A relay that stalls mid-message holds the send only as long as its context: the connection is
// closed under it and the send returns the context's error, to be retried.
func TestSMTP_SendStopsWhenItsContextEnds(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	r := testkit.StartRelay(t, testkit.StartTLSRelay, cert, "", "")
	r.Hold = make(chan struct{})
	defer close(r.Hold)
	m := newSMTP(t, "smtp://"+r.Addr, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := m.Send(ctx, message("id-1", "bob@example.com"))
	var permanent *mail.PermanentError
	if err == nil || errors.As(err, &permanent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a stalled relay gave %v (%T), want the context's deadline", err, err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the send held on for %v after its context ended", waited)
	}
}

// Every set-up that fails closes the connection it opened: a relay without the required
// STARTTLS, a certificate that does not verify, a refused login.
func TestSMTP_FailedSetUpClosesItsConnection(t *testing.T) {
	cert, pool := testkit.RelayCert(t)
	for _, c := range []struct {
		name string
		mode testkit.RelayMode
		url  func(addr string) string
		pool *x509.CertPool
	}{
		{"no STARTTLS", testkit.PlainRelay, func(a string) string { return "smtp://" + a }, pool},
		{"untrusted certificate", testkit.StartTLSRelay, func(a string) string { return "smtp://" + a }, x509.NewCertPool()},
		{"untrusted certificate, smtps", testkit.ImplicitRelay, func(a string) string { return "smtps://" + a }, x509.NewCertPool()},
		{"refused login", testkit.StartTLSRelay, func(a string) string { return "smtp://acme:wrong@" + a }, pool},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := testkit.StartRelay(t, c.mode, cert, "acme", "secret")
			m := newSMTP(t, c.url(r.Addr), c.pool)
			for i := range 3 {
				if err := m.Send(context.Background(), message(fmt.Sprintf("id-%d", i), "bob@example.com")); err == nil {
					t.Fatal("the send succeeded")
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for r.Open.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := r.Open.Load(); n != 0 {
				t.Fatalf("%d of %d connections left open after failed set-ups", n, r.Conns.Load())
			}
		})
	}
}
