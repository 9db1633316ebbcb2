package testkit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// FakeProvider serves Resend's e-mail API locally, as Resend does it: a bearer key, POST
// /emails with JSON, and an Idempotency-Key that makes a repeated request return the first
// answer instead of sending again. A test can make it fail to imitate an outage.
type FakeProvider struct {
	URL    string
	APIKey string
	mu     sync.Mutex
	down   bool
	// accepted is the key the provider takes now (APIKey unless revoked).
	accepted string
	// requests counts every request; delivered holds each e-mail actually sent, by key.
	requests  int
	delivered map[string]FakeEmail
	order     []string
}

// FakeEmail is one e-mail the fake provider accepted.
type FakeEmail struct {
	From, Subject, HTML, Text string
	To                        []string
}

// NewFakeProvider starts a fake provider for the test.
func NewFakeProvider(t testing.TB) *FakeProvider {
	p := &FakeProvider{APIKey: "re_test_key", accepted: "re_test_key", delivered: map[string]FakeEmail{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *FakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/emails":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"not found"}`)
		return
	case r.Header.Get("Authorization") != "Bearer "+p.accepted:
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"invalid key"}`)
		return
	case p.down:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"message":"outage"}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, seen := p.delivered[key]; seen && key != "" {
		io.WriteString(w, `{"id":"`+key+`"}`)
		return
	}
	var e FakeEmail
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil || len(e.To) != 1 || e.From == "" {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"message":"invalid"}`)
		return
	}
	if key == "" {
		key = "no-key-" + string(rune('a'+len(p.order)))
	}
	p.delivered[key] = e
	p.order = append(p.order, key)
	io.WriteString(w, `{"id":"`+key+`"}`)
}

// RevokeKey makes the provider refuse the key it was created with (401), as after a key is
// revoked in the provider's dashboard; RestoreKey accepts it again.
func (p *FakeProvider) RevokeKey() { p.setKey("re_revoked") }

// RestoreKey accepts the original key again.
func (p *FakeProvider) RestoreKey() { p.setKey(p.APIKey) }

func (p *FakeProvider) setKey(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted = key
}

// SetDown starts or ends an outage.
func (p *FakeProvider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Delivered returns the e-mails sent, in order.
func (p *FakeProvider) Delivered() []FakeEmail {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]FakeEmail, 0, len(p.order))
	for _, k := range p.order {
		out = append(out, p.delivered[k])
	}
	return out
}

// Requests is how many requests reached the provider.
func (p *FakeProvider) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}
