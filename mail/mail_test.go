package mail

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/models"
)

var composer = Composer{SiteName: "Acme", SiteURL: "https://auth.acme.test"}

// The console line is the contract with developers and the load tool: one line per e-mail,
// naming the kind, the recipient and the code or link.
func TestConsoleLine(t *testing.T) {
	var b strings.Builder
	c := NewConsole(&b)
	ctx := context.Background()
	r := renderer{t, composer}
	code := r.of(composer.SignInCode("alice@example.com", "123456", 10*time.Minute))
	link := r.of(composer.ChangeEmailLink("new@example.com", "alice@example.com", "https://auth.acme.test/auth/verify-email?token=t", 15*time.Minute))
	welcome := r.of(composer.Welcome("alice@example.com"))
	for _, m := range []Message{code, link, welcome} {
		if err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	want := "mail kind=sign-in-code to=alice@example.com code=123456\n" +
		"mail kind=change-email-link to=new@example.com link=https://auth.acme.test/auth/verify-email?token=t\n" +
		"mail kind=welcome to=alice@example.com\n"
	if b.String() != want {
		t.Fatalf("console wrote %q, want %q", b.String(), want)
	}
}

func TestConsoleLinesDoNotInterleave(t *testing.T) {
	var b lockedBuilder
	c := NewConsole(&b)
	m := renderer{t, composer}.of(composer.SignInCode("bob@example.com", "000111", 10*time.Minute))
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Send(context.Background(), m)
		}()
	}
	wg.Wait()
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if line != "mail kind=sign-in-code to=bob@example.com code=000111" {
			t.Fatalf("garbled line %q", line)
		}
	}
}

// Writes are split on purpose, so only the mailer's own lock keeps lines whole.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	for i := range p {
		l.mu.Lock()
		l.b.WriteByte(p[i])
		l.mu.Unlock()
	}
	return len(p), nil
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every template renders with all its placeholders filled, as HTML with a plain-text part, the
// logo and the site's name and address; the code e-mail has the code in its subject.
func TestTemplatesRender(t *testing.T) {
	msgs := map[Kind]func() (Draft, error){
		KindSignInCode:      func() (Draft, error) { return composer.SignInCode("a@example.com", "482913", 10*time.Minute) },
		KindChangeEmailCode: func() (Draft, error) { return composer.ChangeEmailCode("a@example.com", "482913", 10*time.Minute) },
		KindChangeEmailLink: func() (Draft, error) {
			return composer.ChangeEmailLink("n@example.com", "a@example.com", "https://auth.acme.test/auth/verify-email?token=x.y&callbackURL=%2Faccount", 15*time.Minute)
		},
		KindEmailChanged: func() (Draft, error) {
			return composer.EmailChanged("a@example.com", "n@example.com", "https://auth.acme.test/r?token=z", 7*24*time.Hour)
		},
		KindWelcome: func() (Draft, error) { return composer.Welcome("a@example.com") },
		KindAccountDeleted: func() (Draft, error) {
			return composer.AccountDeleted("a@example.com", time.Date(2026, 12, 21, 3, 0, 0, 0, time.UTC))
		},
		KindNewDevice: func() (Draft, error) {
			return composer.NewDevice("a@example.com", "Firefox", "Windows", "203.0.113.7", time.Date(2026, 12, 21, 3, 4, 0, 0, time.UTC), 90*24*time.Hour)
		},
		KindFormerAddressDeleted: func() (Draft, error) {
			return composer.FormerAddressDeleted("old@example.com", "a@example.com", time.Date(2026, 12, 21, 3, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC))
		},
		KindSignInCodeLink: func() (Draft, error) {
			return composer.SignInCodeWithLink("a@example.com", "482913", "https://auth.acme.test/auth/link?token=x", 10*time.Minute)
		},
		KindSignInPaused: func() (Draft, error) {
			return composer.SignInPaused("a@example.com", 25, time.Date(2026, 12, 21, 3, 4, 0, 0, time.UTC))
		},
	}
	if len(msgs) != len(Kinds()) {
		t.Fatalf("%d kinds rendered of %d", len(msgs), len(Kinds()))
	}
	r := renderer{t, composer}
	for kind, make := range msgs {
		m := r.of(make())
		if m.Kind != kind || m.Subject == "" || m.Text == "" || !strings.Contains(m.HTML, "<html") {
			t.Fatalf("%s: %+v", kind, m)
		}
		for _, part := range []string{m.Subject, m.Text, m.HTML} {
			if strings.Contains(part, "{{") {
				t.Fatalf("%s: an unfilled placeholder in %q", kind, part)
			}
		}
		if !strings.Contains(m.HTML, "Acme") || !strings.Contains(m.HTML, `src="https://auth.acme.test/static/logo.svg"`) {
			t.Fatalf("%s: no site name or logo", kind)
		}
	}
	code := r.of(composer.SignInCode("a@example.com", "482913", 10*time.Minute))
	if !strings.Contains(code.Subject, "482913") || !strings.Contains(code.Text, "482913") || !strings.Contains(code.HTML, "482913") {
		t.Fatalf("the code is not in every part: %+v", code)
	}
	link := r.of(composer.ChangeEmailLink("n@example.com", "a@example.com", "https://auth.acme.test/v?token=x.y&cb=1", 15*time.Minute))
	if !strings.Contains(link.HTML, `href="https://auth.acme.test/v?token=x.y&amp;cb=1"`) || !strings.Contains(link.Text, "https://auth.acme.test/v?token=x.y&cb=1") {
		t.Fatalf("link not placed: %s", link.HTML)
	}
}

// Catalogue N114, N115: every inserted value is escaped for where it goes. The service only lets
// validated addresses and names through, but the templates do not rely on that.
func TestTemplatesEscapeHostileValues(t *testing.T) {
	hostile := `"><img src=x onerror=alert(1)><a href="https://evil.test">click</a>` + "\r\nBcc: evil@example.net"
	evil := Composer{SiteName: "Acme <b>" + hostile, SiteURL: "https://auth.acme.test"}
	r := renderer{t, evil}
	for _, m := range []Message{
		r.of(evil.EmailChanged(hostile, hostile, "https://auth.acme.test/r?a=1&b=<2>", 7*24*time.Hour)),
		r.of(evil.ChangeEmailLink(hostile, hostile, "https://auth.acme.test/v?\"onmouseover=x", 15*time.Minute)),
		r.of(evil.SignInCode(hostile, hostile, 10*time.Minute)),
	} {
		for _, bad := range []string{"<img src=x", `<a href="https://evil.test"`, "<b>", `"onmouseover`} {
			if strings.Contains(m.HTML, bad) {
				t.Fatalf("%s: HTML holds %q", m.Kind, bad)
			}
		}
		for _, part := range []string{m.Subject, m.Text} {
			if strings.ContainsAny(part[:len(part)-1], "\r") || strings.Contains(part, "\nBcc:") {
				t.Fatalf("%s: a line break came through in %q", m.Kind, part)
			}
		}
		if strings.ContainsAny(m.Subject, "\r\n") {
			t.Fatalf("%s: subject %q spans lines", m.Kind, m.Subject)
		}
	}
}

// renderer renders drafts with c, failing t on any error: renderer{t, c}.of(c.Welcome(to)).
type renderer struct {
	t *testing.T
	c Composer
}

func (r renderer) of(d Draft, err error) Message {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := r.c.Render(d)
	if err != nil {
		r.t.Fatalf("%s: %v", d.Kind, err)
	}
	return m
}

func TestNewSelectsTheMailer(t *testing.T) {
	if m, err := New(ProviderConfig{}, &strings.Builder{}); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*Console); !ok {
		t.Fatalf("no key gave %T", m)
	}
	if _, err := New(ProviderConfig{APIKey: "re_123"}, nil); err == nil || !strings.Contains(err.Error(), "EMAIL_FROM") {
		t.Fatalf("a key without a sender: %v", err)
	}
	if m, err := New(ProviderConfig{APIKey: "re_123", From: "Acme <a@acme.test>"}, nil); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*Resend); !ok {
		t.Fatalf("a key gave %T", m)
	}
}

// The Resend mailer sends what the provider's API expects, with the key, the sender and the
// message id as Idempotency-Key; refusals are permanent, outages are not.
func TestResendRequests(t *testing.T) {
	var mu sync.Mutex
	status := http.StatusOK
	var got []map[string]any
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(body, &m)
		mu.Lock()
		got, headers = append(got, m), append(headers, r.Header.Clone())
		s := status
		mu.Unlock()
		if r.URL.Path != "/emails" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s)
		w.Write([]byte(`{"id":"re-1","message":"nope"}`))
	}))
	defer srv.Close()
	r, err := NewResend(ProviderConfig{APIKey: "re_test", From: "Acme <auth@acme.test>", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m := renderer{t, composer}.of(composer.SignInCode("alice@example.com", "482913", 10*time.Minute))
	m.ID = "0d9e3d5a-8f0e-4f5e-9a63-0e7a9c1c2b11"
	if err := r.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got[0]["from"] != "Acme <auth@acme.test>" || got[0]["subject"] != m.Subject || got[0]["html"] != m.HTML || got[0]["text"] != m.Text {
		t.Fatalf("request %v", got[0])
	}
	if to, _ := got[0]["to"].([]any); len(to) != 1 || to[0] != "alice@example.com" {
		t.Fatalf("recipients %v", got[0]["to"])
	}
	if headers[0].Get("Authorization") != "Bearer re_test" || headers[0].Get("Idempotency-Key") != m.ID {
		t.Fatalf("headers %v", headers[0])
	}
	// A refused message is permanent; refused credentials are the operator's to fix, and retried.
	var permanent *PermanentError
	var credentials *CredentialsError
	for s, want := range map[int]string{422: "permanent", 400: "permanent", 401: "credentials", 403: "credentials", 409: "retry", 429: "retry", 500: "retry", 503: "retry"} {
		mu.Lock()
		status = s
		mu.Unlock()
		err := r.Send(context.Background(), m)
		got := "retry"
		switch {
		case err == nil:
			t.Fatalf("HTTP %d: no error", s)
		case errors.As(err, &permanent):
			got = "permanent"
		case errors.As(err, &credentials):
			got = "credentials"
		}
		if got != want {
			t.Fatalf("HTTP %d: %v is %s, want %s", s, err, got, want)
		}
	}
}

// Of several codes for one address claimed in one batch, only the newest goes out (catalogue
// R4: a replaced code is dead, so the last code a person receives must be the live one).
func TestDropSuperseded(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1_700_000_000+int64(s), 0) }
	batch := []models.OutboxMessage{
		{ID: "a-old", Supersede: "a", CreatedAt: at(1)},
		{ID: "welcome", CreatedAt: at(0)},
		{ID: "a-new", Supersede: "a", CreatedAt: at(3)},
		{ID: "b", Supersede: "b", CreatedAt: at(2)},
		{ID: "a-mid", Supersede: "a", CreatedAt: at(2)},
		{ID: "notice", CreatedAt: at(5)},
	}
	outcomes := make([]outcome, len(batch))
	errs := make([]error, len(batch))
	dropSuperseded(batch, outcomes, errs)
	var kept []string
	for i, row := range batch {
		switch {
		case outcomes[i] == 0 && errs[i] == nil:
			kept = append(kept, row.ID)
		case outcomes[i] == outcomeDropped && errors.Is(errs[i], errSuperseded):
		default:
			t.Fatalf("%s: outcome %d, error %v", row.ID, outcomes[i], errs[i])
		}
	}
	if got := strings.Join(kept, " "); got != "welcome a-new b notice" {
		t.Fatalf("kept %q, want the newest of each key and every message without one", got)
	}
}

// A draft names every value its template needs, so a caller that forgets one fails when it
// queues the e-mail, not when the outbox delivers it.
func TestDraftNeedsEveryValue(t *testing.T) {
	if _, err := composer.draft(KindSignInCode, "a@example.com", nil); err == nil || !strings.Contains(err.Error(), "otp") {
		t.Fatalf("a code e-mail without its code: %v", err)
	}
	if _, err := composer.draft(KindChangeEmailLink, "n@example.com", map[string]string{"verificationUrl": "https://x.test"}); err == nil || !strings.Contains(err.Error(), "oldEmail") {
		t.Fatalf("a link e-mail without the old address: %v", err)
	}
	if _, err := (Composer{}).Welcome("a@example.com"); err != nil {
		t.Fatalf("the site's values are always there, even empty: %v", err)
	}
}

// The outbox stores a draft, a fraction of the rendered e-mail, sealed to the message's id, and
// renders it when it delivers; a payload an earlier version stored rendered is sent as it is.
func TestOutboxStoresDraftsAndRendersThemOnDelivery(t *testing.T) {
	o, err := NewOutbox(nil, nil, composer, make([]byte, 32), time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := composer.SignInCode("alice@example.com", "482913", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := renderer{t, composer}.of(d, nil)
	payload, err := o.seal("m1", d, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(payload); n >= len(want.HTML)/3 {
		t.Fatalf("payload of %d bytes for an e-mail of %d: the rendered e-mail was stored", n, len(want.HTML))
	}
	got, withheld, err := o.open(models.OutboxMessage{ID: "m1", Payload: payload})
	want.ID = "m1"
	if err != nil || got != want || withheld {
		t.Fatalf("delivered %+v (%v, withheld %v), want %+v", got, err, withheld, want)
	}
	if _, _, err := o.open(models.OutboxMessage{ID: "m2", Payload: payload}); err == nil {
		t.Fatal("a payload opened under another message's id")
	}

	old := Message{ID: "m3", Kind: KindWelcome, To: "bob@example.com", Subject: "Hello then", Text: "Hi", HTML: "<p>Hi</p>"}
	payload, err = o.seal("m3", old, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := o.open(models.OutboxMessage{ID: "m3", Payload: payload}); err != nil || got != old {
		t.Fatalf("an e-mail stored rendered came out as %+v (%v), want %+v", got, err, old)
	}
}

// A withheld draft (EnqueueOptions.Withhold) is sealed like any other, to the byte count, so its
// row cannot be told from one that is sent without the key; it opens with the mark that keeps it
// from the mailer, and a worker of an earlier version, which opens a payload under its message
// id alone, cannot open it at all, so it gives the message up instead of sending it.
func TestOutboxWithheldDraftsAreSealedLikeOthers(t *testing.T) {
	o, err := NewOutbox(nil, nil, composer, make([]byte, 32), time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := composer.ChangeEmailCode("bob@example.com", "482913", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := o.seal("m1", d, false)
	if err != nil {
		t.Fatal(err)
	}
	withheld, err := o.seal("m2", d, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(withheld) != len(sent) {
		t.Fatalf("a withheld payload is %d bytes, a sent one %d", len(withheld), len(sent))
	}
	for _, c := range []struct {
		id      string
		payload []byte
		want    bool
	}{{"m1", sent, false}, {"m2", withheld, true}} {
		m, w, err := o.open(models.OutboxMessage{ID: c.id, Payload: c.payload})
		if err != nil || w != c.want || m.Code != "482913" {
			t.Fatalf("%s opened as %+v, withheld %v (%v); want withheld %v", c.id, m, w, err, c.want)
		}
	}
	ns := o.aead.NonceSize()
	if _, err := o.aead.Open(nil, withheld[:ns], withheld[ns:], []byte("m2")); err == nil {
		t.Fatal("a withheld payload opens under its message id alone, as an earlier version's worker would open it")
	}
	if _, _, err := o.open(models.OutboxMessage{ID: "m1", Payload: withheld}); err == nil {
		t.Fatal("a withheld payload opened under another message's id")
	}
}
