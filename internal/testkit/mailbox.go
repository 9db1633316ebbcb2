package testkit

import (
	"context"
	"sync"
	"time"

	"codeauth/mail"
)

// Memory keeps every message in memory. Tests read codes from it, and can make sends of a kind
// fail to see what the service does when delivery breaks.
type Memory struct {
	mu       sync.Mutex
	messages []mail.Message
	failures map[mail.Kind]error
}

// NewMemory returns an empty memory mailer.
func NewMemory() *Memory { return &Memory{failures: map[mail.Kind]error{}} }

// Send records m, or returns the failure set for its kind.
func (m *Memory) Send(_ context.Context, msg mail.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failures[msg.Kind]; err != nil {
		return err
	}
	m.messages = append(m.messages, msg)
	return nil
}

// FailKind makes every later send of kind return err; a nil err makes them succeed again.
func (m *Memory) FailKind(kind mail.Kind, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.failures, kind)
		return
	}
	m.failures[kind] = err
}

// Messages returns a copy of every message sent so far.
func (m *Memory) Messages() []mail.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mail.Message(nil), m.messages...)
}

// Find returns the messages of kind sent to the address to, oldest first.
func (m *Memory) Find(kind mail.Kind, to string) []mail.Message {
	var out []mail.Message
	for _, msg := range m.Messages() {
		if msg.Kind == kind && msg.To == to {
			out = append(out, msg)
		}
	}
	return out
}

// LastCode returns the code of the newest sign-in code e-mail to the address to, with or without
// a sign-in link, or "".
func (m *Memory) LastCode(to string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.messages) - 1; i >= 0; i-- {
		if msg := m.messages[i]; msg.To == to && (msg.Kind == mail.KindSignInCode || msg.Kind == mail.KindSignInCodeLink) {
			return msg.Code
		}
	}
	return ""
}

// Last returns the newest message of kind to the address to, or the zero Message.
func (m *Memory) Last(kind mail.Kind, to string) mail.Message {
	found := m.Find(kind, to)
	if len(found) == 0 {
		return mail.Message{}
	}
	return found[len(found)-1]
}

// Mailbox is the memory mailer of a test, for one or more instances. Reading it first delivers
// every e-mail that is due from their outboxes, so a test can read a code right after the
// request that queued it.
type Mailbox struct {
	*Memory
	mu       sync.Mutex
	outboxes []*mail.Outbox
}

func (m *Mailbox) addOutbox(o *mail.Outbox) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outboxes = append(m.outboxes, o)
}

// Flush delivers every due e-mail of every instance now, waiting for messages a background
// worker is already delivering.
func (m *Mailbox) Flush() {
	m.mu.Lock()
	outboxes := append([]*mail.Outbox(nil), m.outboxes...)
	m.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for _, o := range outboxes {
		for {
			o.DeliverDue(context.Background())
			if n, err := o.Due(context.Background()); err != nil || n == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// Messages returns every message delivered so far.
func (m *Mailbox) Messages() []mail.Message {
	m.Flush()
	return m.Memory.Messages()
}

// Find returns the messages of kind delivered to the address to, oldest first.
func (m *Mailbox) Find(kind mail.Kind, to string) []mail.Message {
	m.Flush()
	return m.Memory.Find(kind, to)
}

// Last returns the newest message of kind delivered to the address to.
func (m *Mailbox) Last(kind mail.Kind, to string) mail.Message {
	m.Flush()
	return m.Memory.Last(kind, to)
}

// LastCode returns the newest sign-in code delivered to the address to.
func (m *Mailbox) LastCode(to string) string {
	m.Flush()
	return m.Memory.LastCode(to)
}
