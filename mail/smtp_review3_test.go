package mail_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/mail"
)

// Third review of the SMTP transport (commit 98ade3f): failing tests for what the change left.

// fakeRelay serves each connection with serve on a loopback listener and returns its address.
func fakeRelay(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// "A send stops when its context ends, at whatever command it is" (SMTP.Send): not while a new
// connection is set up. The context reaches only the TCP dial (and smtps' handshake); the
// greeting, EHLO, STARTTLS and AUTH that follow are bounded by the command timeout alone, so a
// relay that accepts and then says nothing holds the send (and the outbox's shutdown, and one of
// the four connection slots) for the whole timeout, 15 s in production, after its context ended.
func TestSMTP_SendStopsWhenItsContextEndsDuringConnectionSetUp(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	addr := fakeRelay(t, func(c net.Conn) {
		select { // accepted, and no greeting
		case <-hold:
		case <-time.After(30 * time.Second):
		}
	})
	const timeout = 8 * time.Second
	m, err := mail.NewSMTPWithTimeout(mail.SMTPConfig{URL: "smtp://" + addr + "?starttls=off", From: "Acme <auth@acme.test>"}, timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = m.Send(ctx, message("id-1", "bob@example.com"))
	waited := time.Since(start)
	if waited > 3*time.Second {
		t.Fatalf("the send held on for %v (its context ended after 300ms; the command timeout is %v): %v", waited, timeout, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a relay that never greets gave %v (%T), want the context's deadline", err, err)
	}
}

// The mechanism preference (WithOpportunisticSMTPAuth) makes go-mail, for a relay that offers
// none of the preferred mechanisms, rewrite the shared Client's smtpAuthType (to auto-discovery)
// inside DialToSMTPClientWithContext, which holds only the Client's read lock: the up to four
// connections Send dials at once write it concurrently, a data race (go test -race fails), and
// the shared Client is left switched to auto-discovery (which adds NTLM, a mechanism the
// preference list leaves out) for every later connection.
//
// Run with -race: go test -race ./mail/ -run TestSMTP_ConcurrentDialsToARelayWithoutAPreferredMechanism
func TestSMTP_ConcurrentDialsToARelayWithoutAPreferredMechanism(t *testing.T) {
	addr := fakeRelay(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		c.Write([]byte("220 relay.test ESMTP\r\n"))
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
			case strings.HasPrefix(cmd, "EHLO"):
				// Give the other dials time to reach their own EHLO.
				time.Sleep(50 * time.Millisecond)
				c.Write([]byte("250-relay.test\r\n250 AUTH XOAUTH2 GSSAPI\r\n"))
			case strings.HasPrefix(cmd, "QUIT"):
				c.Write([]byte("221 bye\r\n"))
				return
			default:
				c.Write([]byte("502 not implemented\r\n"))
			}
		}
	})
	m, err := mail.NewSMTPWithTimeout(mail.SMTPConfig{URL: "smtp://acme:secret@" + addr + "?starttls=off", From: "Acme <auth@acme.test>"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = m.Send(context.Background(), message("id-"+string(rune('a'+i)), "bob@example.com"))
		}()
	}
	wg.Wait()
}
