// Package mail sends the service's e-mail. Everything goes through the small Mailer interface;
// the console mailer is used when no provider is configured, so local and mobile sign-in work
// on a fresh machine with nothing set up.
package mail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Kind names what an e-mail is for; it appears in logs and console lines.
type Kind string

// The kinds of e-mail the service sends.
const (
	// KindSignInCode carries a one-time sign-in code.
	KindSignInCode Kind = "sign-in-code"
	// KindWelcome greets a new account after sign-up.
	KindWelcome Kind = "welcome"
)

// Message is one e-mail to one recipient. Code and Link are the secrets it carries, if any; they
// are separate fields so the console mailer can show them and nothing else ever logs them.
type Message struct {
	Kind    Kind
	To      string
	Subject string
	Text    string
	Code    string
	Link    string
}

// Mailer delivers messages. Send returns once the message is handed over; an error means it was
// not.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// New returns the mailer the configuration asks for: the console mailer writing to console
// unless an e-mail provider key is set.
func New(providerAPIKey string, console io.Writer) (Mailer, error) {
	if providerAPIKey != "" {
		return nil, errors.New("EMAIL_PROVIDER_API_KEY: provider delivery is not available in this version yet; unset it to use the console mailer")
	}
	return NewConsole(console), nil
}

// SignInCode composes the e-mail that carries a sign-in code.
func SignInCode(siteName, to, code string) Message {
	return Message{
		Kind:    KindSignInCode,
		To:      to,
		Subject: fmt.Sprintf("%s is your %s code", code, siteName),
		Text:    fmt.Sprintf("Your %s sign-in code is %s.\n\nIt expires in 10 minutes. If you did not ask for it, you can ignore this e-mail.\n", siteName, code),
		Code:    code,
	}
}

// Welcome composes the e-mail sent once an account has been created.
func Welcome(siteName, to string) Message {
	return Message{
		Kind:    KindWelcome,
		To:      to,
		Subject: fmt.Sprintf("Welcome to %s", siteName),
		Text:    fmt.Sprintf("Welcome to %s! Your account is ready; sign in any time with a code sent to this address.\n", siteName),
	}
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

// Memory keeps every message in memory. Tests read codes from it, and can make sends of a kind
// fail to see what the service does when delivery breaks.
type Memory struct {
	mu       sync.Mutex
	messages []Message
	failures map[Kind]error
}

// NewMemory returns an empty memory mailer.
func NewMemory() *Memory { return &Memory{failures: map[Kind]error{}} }

// Send records m, or returns the failure set for its kind.
func (m *Memory) Send(_ context.Context, msg Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failures[msg.Kind]; err != nil {
		return err
	}
	m.messages = append(m.messages, msg)
	return nil
}

// FailKind makes every later send of kind return err; a nil err makes them succeed again.
func (m *Memory) FailKind(kind Kind, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.failures, kind)
		return
	}
	m.failures[kind] = err
}

// Messages returns a copy of every message sent so far.
func (m *Memory) Messages() []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Message(nil), m.messages...)
}

// Find returns the messages of kind sent to the address to, oldest first.
func (m *Memory) Find(kind Kind, to string) []Message {
	var out []Message
	for _, msg := range m.Messages() {
		if msg.Kind == kind && msg.To == to {
			out = append(out, msg)
		}
	}
	return out
}

// LastCode returns the code of the newest sign-in code e-mail to the address to, or "".
func (m *Memory) LastCode(to string) string {
	found := m.Find(KindSignInCode, to)
	if len(found) == 0 {
		return ""
	}
	return found[len(found)-1].Code
}
