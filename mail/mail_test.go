package mail

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// The console line is the contract with developers and the load tool: one line per e-mail,
// naming the kind, the recipient and the code or link.
func TestConsoleLine(t *testing.T) {
	var b strings.Builder
	c := NewConsole(&b)
	ctx := context.Background()
	if err := c.Send(ctx, SignInCode("Acme", "alice@example.com", "123456")); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, Welcome("Acme", "alice@example.com")); err != nil {
		t.Fatal(err)
	}
	want := "mail kind=sign-in-code to=alice@example.com code=123456\nmail kind=welcome to=alice@example.com\n"
	if b.String() != want {
		t.Fatalf("console wrote %q, want %q", b.String(), want)
	}
}

func TestConsoleLinesDoNotInterleave(t *testing.T) {
	var b lockedBuilder
	c := NewConsole(&b)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Send(context.Background(), SignInCode("Acme", "bob@example.com", "000111"))
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

func TestSignInCodeMessage(t *testing.T) {
	m := SignInCode("Acme", "alice@example.com", "123456")
	if !strings.Contains(m.Subject, "123456") || !strings.Contains(m.Text, "123456") || m.Code != "123456" || m.To != "alice@example.com" {
		t.Fatalf("message %+v", m)
	}
}

func TestNewRefusesUnavailableProvider(t *testing.T) {
	if _, err := New("re_123", nil); err == nil || !strings.Contains(err.Error(), "EMAIL_PROVIDER_API_KEY") {
		t.Fatalf("New with a key: %v", err)
	}
	if m, err := New("", &strings.Builder{}); err != nil || m == nil {
		t.Fatalf("New without a key: %v", err)
	}
}
