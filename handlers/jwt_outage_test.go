package handlers_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/internal/testdb"
	"codeauth/internal/testkit"
)

// stallProxy forwards to PostgreSQL until stalled; then it forwards nothing, as a network
// partition that drops packets does (no RST, no refusal).
type stallProxy struct {
	addr, target string
	stalled      atomic.Bool
	stop         chan struct{}
}

func newStallProxy(t *testing.T) *stallProxy {
	u, _ := url.Parse(testdb.Base(t))
	p := &stallProxy{target: u.Host, stop: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	t.Cleanup(func() { close(p.stop); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				s, err := net.Dial("tcp", p.target)
				if err != nil {
					c.Close()
					return
				}
				go p.pipe(c, s)
				p.pipe(s, c)
			}()
		}
	}()
	return p
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.stalled.Load() {
			<-p.stop
			return
		}
		if n > 0 {
			dst.Write(buf[:n])
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// A get-session the cookie cache answers needs no database, and its JWT header must not make it
// wait on one that is unreachable (a partition that drops packets: no refusal, no reset) when the
// signing keys are due for a re-read: the read is bounded, and the keys read before serve.
func TestCookieCacheGetSessionAnswersWhileTheKeysCannotBeRead(t *testing.T) {
	p := newStallProxy(t)
	e := testkit.New(t, testkit.Postgres, testkit.WithDatabaseURL(func(s string) string {
		u, _ := url.Parse(s)
		u.Host = p.addr
		return u.String()
	}))
	a := e.SignIn("warm@example.com")
	getSession(e, a.Cookies()) // the keys are read, a JWT made
	b := e.SignIn("cached@example.com")
	e.Clock.Advance(61 * time.Second) // the keys are due for a re-read; b's cookie cache is valid
	p.stalled.Store(true)
	req, _ := http.NewRequest("GET", e.URL+"/api/auth/get-session", nil)
	for _, c := range b.Cookies() {
		req.AddCookie(c)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("get-session answered by the cookie cache, database unreachable: %v after %v", err, time.Since(start))
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("set-auth-jwt") == "" {
		t.Fatalf("get-session while the keys cannot be read: %d, JWT %q", resp.StatusCode, resp.Header.Get("set-auth-jwt"))
	}
	// The failed read is not tried again by every request meanwhile.
	for range 3 {
		start := time.Now()
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("a later get-session, database still unreachable: %v after %v", err, time.Since(start))
		}
		resp.Body.Close()
	}
}
