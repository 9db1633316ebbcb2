package mail_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// queueCode stores a sign-in code for to and queues its e-mail through store, in one transaction
// of the store (as a send does), and returns the message's id.
func (f *fleet) queueCode(store *models.Store, o *mail.Outbox, to string) string {
	f.t.Helper()
	d, err := composer.SignInCode(to, "123456", 5*time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	row, err := o.Prepare(d, mail.EnqueueOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	now := f.clock.Now().UTC()
	v := models.Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: to, Email: to, CodeHash: "h", ExpiresAt: now.Add(5 * time.Minute), CreatedAt: now}
	if err := store.ReplaceCode(context.Background(), v, row); err != nil {
		f.t.Fatal(err)
	}
	return row.ID
}

// run runs o's workers until the test ends, and returns once they run.
func (f *fleet) run(o *mail.Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
	f.waitFor("the workers to run", func() bool {
		_, running := o.HandoffLease(models.EmailQueue)
		return running
	})
}

// A message a transaction queues while the worker runs is written leased to it, its attempt
// counted, and handed to it after the commit: it goes out without a claim (a statement, and a
// read of its payload back, fewer for every message). No claim could have taken it: it is sent
// under the lease it was written with, its one attempt the one it was written with.
func TestOutbox_AHandedMessageGoesWithoutAClaim(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		store := f.newStore()
		mailer := newGate()
		o := f.outbox(store, mailer)
		store.SetOutboxHandoff(o)
		f.run(o)

		id := f.queueCode(store, o, "alice@example.com")
		m := receive(t, mailer.entered, "the handed message to be sent")
		if m.To != "alice@example.com" {
			t.Fatalf("sent to %q", m.To)
		}
		until := f.clock.Now().UTC().Add(10 * time.Second).Format(time.RFC3339Nano)
		if got, want := f.state(id), "status pending, attempts 1, leased until "+until; !strings.HasPrefix(got, want) {
			t.Fatalf("while it is sent: %s; want %s…", got, want)
		}
		mailer.release <- nil
		f.waitFor("the sent message to be deleted", func() bool { return f.state(id) == "gone" })
	})
}

// Without a running worker (a command, a test), nothing is handed over: the message is queued
// unleased, for any worker's claim.
func TestOutbox_WithoutAWorkerNothingIsHanded(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		store := f.newStore()
		got := testkit.NewMemory()
		o := f.outbox(store, got)
		store.SetOutboxHandoff(o)
		id := f.queueCode(store, o, "alice@example.com")
		if s := f.state(id); !strings.Contains(s, "attempts 0, leased until none") {
			t.Fatalf("queued without a worker: %s; want it unleased", s)
		}
		if r, err := o.DeliverDue(context.Background()); err != nil || r.Sent != 1 {
			t.Fatalf("claimed: %+v, %v; want it sent", r, err)
		}
	})
}

// droppingHandoff leases messages as the outbox would and then loses them, as an instance that
// crashes right after its commit does.
type droppingHandoff struct{ *mail.Outbox }

func (droppingHandoff) Handoff([]models.OutboxMessage) {}

// A message leased to an instance that crashed before it sent it waits for its lease, like one it
// had claimed: then another instance delivers it, once.
func TestOutbox_AMessageHandedToACrashedInstanceIsClaimedAfterItsLease(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		store := f.newStore()
		crashed := f.outbox(store, testkit.NewMemory())
		store.SetOutboxHandoff(droppingHandoff{crashed})
		f.run(crashed) // leases are granted only while the workers run
		id := f.queueCode(store, crashed, "alice@example.com")
		if s := f.state(id); !strings.Contains(s, "attempts 1") {
			t.Fatalf("queued: %s; want it leased", s)
		}
		got := testkit.NewMemory()
		survivor := f.instance(got)
		ctx := context.Background()
		f.clock.Advance(9 * time.Second)
		if r, err := survivor.DeliverDue(ctx); err != nil || r != (mail.DeliveryReport{}) {
			t.Fatalf("while the lease holds: %+v, %v; want nothing done", r, err)
		}
		f.clock.Advance(2 * time.Second)
		if r, err := survivor.DeliverDue(ctx); err != nil || r.Sent != 1 {
			t.Fatalf("after the lease: %+v, %v; want the message delivered", r, err)
		}
		if m := got.Messages(); len(m) != 1 || m[0].To != "alice@example.com" {
			t.Fatalf("delivered %+v", m)
		}
	})
}

// A stop releases what was handed to the worker and not yet taken: another instance delivers it
// at once rather than after its lease, and its attempt, never made, is not counted. A message
// whose send the stop cut off is left to its lease, as ever.
func TestOutbox_AStopReleasesWhatWasHandedAndNotSent(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		store := f.newStore()
		mailer := newGate()
		o := f.outbox(store, mailer)
		store.SetOutboxHandoff(o)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { o.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		f.waitFor("the workers to run", func() bool {
			_, running := o.HandoffLease(models.EmailQueue)
			return running
		})

		sending := f.queueCode(store, o, "alice@example.com")
		receive(t, mailer.entered, "the first message to be sent")
		waiting := f.queueCode(store, o, "bob@example.com") // the worker is busy: it waits
		cancel()
		<-done
		if s := f.state(waiting); !strings.Contains(s, "attempts 0, leased until none") {
			t.Fatalf("the message waiting at the stop: %s; want it released", s)
		}
		if s := f.state(sending); !strings.Contains(s, "attempts 1, leased until 20") {
			t.Fatalf("the message being sent at the stop: %s; want it left to its lease", s)
		}
		got := testkit.NewMemory()
		if r, err := f.instance(got).DeliverDue(context.Background()); err != nil || r.Sent != 1 {
			t.Fatalf("another instance, at once: %+v, %v; want the released message sent", r, err)
		}
		if m := got.Messages(); len(m) != 1 || m[0].To != "bob@example.com" {
			t.Fatalf("delivered %+v", m)
		}
	})
}

// Of two codes for one address handed together (queued at the same instant by the clock), only
// the later one goes out: the database's superseding spares messages under a lease, so the batch
// has to.
func TestOutbox_OfTwoCodesHandedTogetherOnlyTheLaterGoesOut(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		store := f.newStore()
		mailer := newGate()
		o := f.outbox(store, mailer)
		store.SetOutboxHandoff(o)
		// Both are queued before the worker runs, leased, and handed at its start.
		rows := make([]models.OutboxMessage, 2)
		for i := range rows {
			d, err := composer.SignInCode("alice@example.com", []string{"111111", "222222"}[i], 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if rows[i], err = o.Prepare(d, mail.EnqueueOptions{Supersede: "sign-in-code:alice@example.com"}); err != nil {
				t.Fatal(err)
			}
			until := f.clock.Now().UTC().Add(10 * time.Second)
			rows[i].LockedUntil, rows[i].Attempts = &until, 1
			if err := f.db.Create(&rows[i]).Error; err != nil {
				t.Fatal(err)
			}
		}
		f.run(o)
		o.Handoff(rows)
		m := receive(t, mailer.entered, "the live code to be sent")
		if m.Code != "222222" {
			t.Fatalf("sent code %q; want the later one", m.Code)
		}
		mailer.release <- nil
		f.waitFor("both messages to be settled", func() bool { return f.state(rows[0].ID) == "gone" && f.state(rows[1].ID) == "gone" })
		if sent := mailer.Sent(); len(sent) != 1 {
			t.Fatalf("sent %d messages", len(sent))
		}
	})
}
