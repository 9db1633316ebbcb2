package mail_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"github.com/google/uuid"
)

// queueCode stores the sign-in code code for to and queues its e-mail through store, in one
// transaction of the store (as a send does), and returns the message's id. With supersede the
// e-mail replaces those queued under that key, as a code's does.
func (f *fleet) queueCode(store *models.Store, o *mail.Outbox, to, code, supersede string) string {
	f.t.Helper()
	d, err := composer.SignInCode(to, code, 5*time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	row, err := o.Prepare(d, mail.EnqueueOptions{Supersede: supersede})
	if err != nil {
		f.t.Fatal(err)
	}
	now := f.clock.Now().UTC()
	v := models.Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: to, Email: to, CodeHash: code, ExpiresAt: now.Add(5 * time.Minute), CreatedAt: now}
	if err := store.ReplaceCode(context.Background(), v, row); err != nil {
		f.t.Fatal(err)
	}
	return row.ID
}

// handing is an outbox delivering through m on a store of its own that hands it what the store's
// transactions queue, as the service wires them.
func (f *fleet) handing(m mail.Mailer) (*models.Store, *mail.Outbox) {
	f.t.Helper()
	store := f.newStore()
	o := f.outbox(store, m)
	store.SetOutboxHandoff(o)
	return store, o
}

// leasedWelcome writes a welcome e-mail to to as a hand-off writes it, leased left ahead of now
// with its attempt counted, and returns it, for o.Handoff.
func (f *fleet) leasedWelcome(o *mail.Outbox, to string, left time.Duration) models.OutboxMessage {
	f.t.Helper()
	d, err := composer.Welcome(to)
	if err != nil {
		f.t.Fatal(err)
	}
	row, err := o.Prepare(d, mail.EnqueueOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	until := f.clock.Now().UTC().Add(left)
	row.LockedUntil, row.Attempts = &until, 1
	if err := f.db.Create(&row).Error; err != nil {
		f.t.Fatal(err)
	}
	return row
}

// run runs o's workers until the test ends or stop is called, and returns once they run.
func (f *fleet) run(o *mail.Outbox) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	f.t.Cleanup(stop)
	f.waitFor("the workers to run", func() bool {
		_, running := o.HandoffLease(models.EmailQueue)
		return running
	})
	return stop
}

// A message a transaction queues while the worker runs is written leased to it, its attempt
// counted, and handed to it after the commit: it goes out without a claim (a statement, and a
// read of its payload back, fewer for every message). No claim could have taken it: it is sent
// under the lease it was written with, its one attempt the one it was written with.
func TestOutbox_AHandedMessageGoesWithoutAClaim(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		store, o := f.handing(mailer)
		f.run(o)

		id := f.queueCode(store, o, "alice@example.com", "123456", "")
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
		got := testkit.NewMemory()
		store, o := f.handing(got)
		id := f.queueCode(store, o, "alice@example.com", "123456", "")
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
		id := f.queueCode(store, crashed, "alice@example.com", "123456", "")
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
		mailer := newGate()
		store, o := f.handing(mailer)
		stop := f.run(o)
		sending := f.queueCode(store, o, "alice@example.com", "123456", "")
		receive(t, mailer.entered, "the first message to be sent")
		waiting := f.queueCode(store, o, "bob@example.com", "123456", "") // the worker is busy: it waits
		stop()
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

// A message that replaces others (a code's e-mail) is not handed over: leased from the start, it
// could not be replaced in its turn, and a code superseded while it waited would go out after
// the live one. It is claimed, and a newer code deletes it while it waits.
func TestOutbox_AMessageThatSupersedesIsNotHanded(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		store, o := f.handing(mailer)
		f.run(o)
		f.queueCode(store, o, "carol@example.com", "123456", "") // keeps the worker busy
		receive(t, mailer.entered, "the first message to be sent")

		queue := func(code string) string {
			return f.queueCode(store, o, "alice@example.com", code, "sign-in-code:alice@example.com")
		}
		old := queue("111111")
		if s := f.state(old); !strings.Contains(s, "attempts 0, leased until none") {
			t.Fatalf("a code's e-mail queued while the worker runs: %s; want it unleased", s)
		}
		live := queue("222222")
		if s := f.state(old); s != "gone" {
			t.Fatalf("the replaced code's e-mail: %s; want it gone", s)
		}
		mailer.release <- nil
		m := receive(t, mailer.entered, "the live code's e-mail to be sent")
		if m.Code != "222222" {
			t.Fatalf("sent code %q", m.Code)
		}
		mailer.release <- nil
		f.waitFor("the live code's e-mail to be recorded", func() bool { return f.state(live) == "gone" })
	})
}

// A handed message may be taken with up to a beat of its lease gone (its worker was behind): its
// first heartbeat then comes at once, not a beat later, so that one failed beat still leaves a
// second a beat before the lease ends, as for a claimed message.
func TestOutbox_AHandedMessageTakenLateIsExtendedAtOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		_, o := f.handing(mailer)
		o.SetHeartbeat(3 * time.Second) // in real time: less than the 4 s of the lease gone
		f.run(o)
		row := f.leasedWelcome(o, "alice@example.com", 6*time.Second) // two beats left: still taken
		o.Handoff([]models.OutboxMessage{row})
		receive(t, mailer.entered, "the message to be sent")
		want := f.clock.Now().UTC().Add(mail.Lease)
		for stop := time.Now().Add(2 * time.Second); !f.lockedUntil(row.ID).Equal(want); time.Sleep(time.Millisecond) {
			if time.Now().After(stop) {
				t.Fatalf("the lease still ends at %s, 2 s after the message was taken; want it extended at once", f.lockedUntil(row.ID))
			}
		}
		mailer.release <- nil
		f.waitFor("the message to be recorded", func() bool { return f.state(row.ID) == "gone" })
	})
}

// A stream of handed messages never holds back a claim by more than a batch: a code's e-mail
// (claimed, never handed) queued while the worker is busy goes out right after the batch under
// way, before the messages handed after it.
func TestOutbox_HandedMessagesHoldBackNoClaim(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		store, o := f.handing(mailer)
		f.run(o)
		f.queueCode(store, o, "first@example.com", "111111", "")
		receive(t, mailer.entered, "the first handed message to be sent")
		f.queueCode(store, o, "alice@example.com", "222222", "sign-in-code:alice@example.com")
		f.queueCode(store, o, "later@example.com", "333333", "")
		mailer.release <- nil
		if m := receive(t, mailer.entered, "the next message to be sent"); m.To != "alice@example.com" {
			t.Fatalf("sent to %s next; want the code claimed right after the batch under way", m.To)
		}
		mailer.release <- nil
		if m := receive(t, mailer.entered, "the later handed message to be sent"); m.To != "later@example.com" {
			t.Fatalf("sent to %s", m.To)
		}
		mailer.release <- nil
	})
}

// A handed message with less than two heartbeats of its lease left when its worker gets to it (a
// worker far behind, as under overload) has its lease renewed before it is sent, so that one
// failed beat cannot let the lease end mid-send and another instance send it again; renewed, it
// is sent by its worker at once instead of waiting for its lease to end and for a claim.
func TestOutbox_AHandedMessageTooLateIsRenewedBeforeItIsSent(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		_, o := f.handing(mailer)
		f.run(o)
		late := f.leasedWelcome(o, "late@example.com", 6*time.Second) // under two beats (3⅓ s each) left
		o.Handoff([]models.OutboxMessage{late})
		receive(t, mailer.entered, "the late message to be sent")
		if got, want := f.lockedUntil(late.ID), f.clock.Now().UTC().Add(mail.Lease); !got.Equal(want) {
			t.Fatalf("sent under a lease until %s; want it renewed to %s first", got, want)
		}
		mailer.release <- nil
		f.waitFor("the late message to be recorded", func() bool { return f.state(late.ID) == "gone" })
	})
}

// A late handed message whose lease cannot be renewed (here a trigger refuses the UPDATE; the
// database may be out of reach) is not sent by its worker: it is left to its lease, then claimed.
func TestOutbox_AHandedMessageTooLateAndNotRenewedIsLeftToItsLease(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		got := testkit.NewMemory()
		_, o := f.handing(got)
		f.run(o)
		late := f.leasedWelcome(o, "late@example.com", 6*time.Second)
		fresh := f.leasedWelcome(o, "fresh@example.com", mail.Lease)
		refuse, allow := []string{
			`CREATE TRIGGER refuse_leases BEFORE UPDATE OF locked_until ON outbox BEGIN SELECT RAISE(ABORT, 'refused'); END`,
		}, []string{`DROP TRIGGER refuse_leases`}
		if f.url != "" {
			refuse = []string{
				`CREATE FUNCTION refuse_leases() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
				`CREATE TRIGGER refuse_leases BEFORE UPDATE OF locked_until ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_leases()`,
			}
			allow = []string{`DROP TRIGGER refuse_leases ON outbox`}
		}
		for _, stmt := range refuse {
			if err := f.db.Exec(stmt).Error; err != nil {
				t.Fatal(err)
			}
		}
		o.Handoff([]models.OutboxMessage{late, fresh})
		f.waitFor("the fresh message to be delivered", func() bool { return f.state(fresh.ID) == "gone" })
		if m := got.Messages(); len(m) != 1 || m[0].To != "fresh@example.com" {
			t.Fatalf("delivered %+v; want only the fresh message", m)
		}
		if s := f.state(late.ID); !strings.Contains(s, "attempts 1, leased until "+late.LockedUntil.UTC().Format(time.RFC3339Nano)) {
			t.Fatalf("the late message: %s; want it left to its lease", s)
		}
		for _, stmt := range allow {
			if err := f.db.Exec(stmt).Error; err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Advance(7 * time.Second)
		if r, err := f.instance(testkit.NewMemory()).DeliverDue(context.Background()); err != nil || r.Sent != 1 {
			t.Fatalf("once its lease ended, another instance: %+v, %v; want it sent", r, err)
		}
	})
}

// deletions is a store that records the deletions of delivered messages, those of their own
// and those a claim makes before it, and fails the first failFirst of its own.
type deletions struct {
	*models.Store
	mu        sync.Mutex
	calls     [][]string // each deletion's ids, sorted
	failFirst int
	failed    int
	// failWith, when set, is what DeleteSentOutbox and ClaimOutbox fail with for as long as it
	// is set: the database is away.
	failWith error
}

func (d *deletions) note(ids []string) {
	d.calls = append(d.calls, slices.Sorted(slices.Values(ids)))
}

func (d *deletions) DeleteSentOutbox(ctx context.Context, ids []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failWith != nil {
		d.failed++
		return d.failWith
	}
	if d.failed < d.failFirst {
		d.failed++
		return errors.New("the database is away")
	}
	d.note(ids)
	return d.Store.DeleteSentOutbox(ctx, ids)
}

func (d *deletions) ClaimOutbox(ctx context.Context, queue models.OutboxQueue, now, until time.Time, limit int, sent, deleting []string) ([]models.OutboxMessage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failWith != nil {
		return nil, d.failWith
	}
	if len(sent) > 0 {
		d.note(sent)
	}
	return d.Store.ClaimOutbox(ctx, queue, now, until, limit, sent, deleting)
}

// made is the deletions made so far, each the ids it deleted, sorted.
func (d *deletions) made() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// A busy worker deletes what it delivered together, one statement for several batches instead
// of one each: the messages stay leased to it meanwhile, so no other worker sends them. A stop
// deletes what it keeps.
func TestOutbox_AWorkerDeletesWhatItDeliveredTogether(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		got := testkit.NewMemory()
		store := f.newStore()
		counted := &deletions{Store: store}
		o := f.outbox(counted, got)
		o.SetRecordLinger(time.Hour) // only a claim, a stop, DeliverDue or maxUnrecorded delete them
		store.SetOutboxHandoff(o)
		stop := f.run(o)

		// Three batches, one after the other: each is delivered before the next is queued.
		var ids []string
		for i, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
			ids = append(ids, f.queueCode(store, o, to, "123456", ""))
			f.waitFor("a batch to be delivered", func() bool { return len(got.Messages()) == i+1 })
		}
		// The worker's poll claims once a second, and deletes what it keeps in the claim's round
		// trip: at most one such deletion fits in the moment the batches took.
		if d := counted.made(); len(d) >= 2 {
			t.Fatalf("deleted batch by batch: %v", d)
		}
		for _, id := range ids {
			if s := f.state(id); s != "gone" && !strings.Contains(s, "status pending, attempts 1, leased until 20") {
				t.Fatalf("delivered and kept: %s; want it still leased to its worker", s)
			}
		}
		stop()
		var deleted []string
		for _, d := range counted.made() {
			deleted = append(deleted, d...)
		}
		if slices.Sort(deleted); !slices.Equal(deleted, slices.Sorted(slices.Values(ids))) {
			t.Fatalf("deleted %v; want the three ids once each", deleted)
		}
		for _, id := range ids {
			if s := f.state(id); s != "gone" {
				t.Fatalf("after the stop: %s", s)
			}
		}
	})
}

// The timer's deletion tries again every second while the database is unavailable, and says so
// once a minute, as a warning, like the workers: an outage of a minute was sixty ERROR lines.
func TestOutbox_AnOutageOfTheTimersDeletionsIsSaidOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		got := testkit.NewMemory()
		store := f.newStore()
		counted := &deletions{Store: store, failWith: fmt.Errorf("deleting: %w", models.ErrUnavailable)}
		o := f.outbox(counted, got)
		o.SetRecordLinger(5 * time.Millisecond)
		store.SetOutboxHandoff(o)
		f.run(o)
		f.queueCode(store, o, "a@example.com", "123456", "")
		f.waitFor("three failed deletions", func() bool {
			counted.mu.Lock()
			defer counted.mu.Unlock()
			return counted.failed >= 3
		})
		logs := f.logs.String()
		if n := strings.Count(logs, "recording deliveries waits"); n != 1 || strings.Contains(logs, "level=ERROR") {
			t.Fatalf("said %d times, or as an error:\n%s", n, logs)
		}
		counted.mu.Lock()
		counted.failWith = nil
		counted.mu.Unlock()
	})
}

// DeliverDue deletes what it delivered before it returns; ids whose deletion failed are kept and
// deleted by the next claim, in its round trip.
func TestOutbox_AFailedDeletionIsMadeByTheNextClaim(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		got := testkit.NewMemory()
		counted := &deletions{Store: f.newStore(), failFirst: 1}
		o := f.outbox(counted, got)
		f.enqueue(o, "a@example.com")
		if _, err := o.DeliverDue(context.Background()); err == nil {
			t.Fatal("DeliverDue did not report the failed deletion")
		}
		if n := f.pending(); n != 1 {
			t.Fatalf("%d pending after the failed deletion; want the message, still leased", n)
		}
		if _, err := o.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n, sent := f.pending(), len(got.Messages()); n != 0 || sent != 1 {
			t.Fatalf("%d pending, %d sent; want 0 and 1", n, sent)
		}
		if d := counted.made(); len(d) != 1 || len(d[0]) != 1 {
			t.Fatalf("deletions %v; want the one id, by the second pass's claim", d)
		}
	})
}

// What a worker delivered is deleted within recordLinger by a timer of its own, also while the
// worker is busy with a slow send: another instance that finds the lease run out (a worker
// paused past it) does not send it again.
func TestOutbox_DeliveredMessagesAreDeletedWhileTheWorkerIsBusy(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		store, o := f.handing(mailer)
		f.run(o)
		welcome := f.queueCode(store, o, "alice@example.com", "123456", "")
		receive(t, mailer.entered, "the first message to be sent")
		mailer.release <- nil
		// The worker takes the next handed message (no claim, which would delete what it
		// keeps in its round trip) and hangs in its send.
		f.queueCode(store, o, "bob@example.com", "654321", "")
		receive(t, mailer.entered, "the second message to be sent")
		f.waitFor("the delivered message to be deleted", func() bool { return f.state(welcome) == "gone" })
		f.clock.Advance(time.Minute) // every lease this worker set has run out
		other := testkit.NewMemory()
		if _, err := f.instance(other).DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, m := range other.Messages() {
			if m.To == "alice@example.com" {
				t.Fatal("another instance sent the delivered message again")
			}
		}
		mailer.release <- nil
	})
}

// A claim never takes back what its own worker delivered and still keeps, however long the
// worker kept it: the claim deletes those first, in its round trip. Here one DeliverDue pass
// claims three batches while its clock runs past every lease.
func TestOutbox_AClaimNeverTakesBackWhatItsWorkerDelivered(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		sent := testkit.NewMemory()
		slow := clockMover{Memory: sent, clock: f.clock, after: 50, by: time.Minute}
		store := f.newStore()
		o := f.outbox(store, &slow)
		o.SetRecordLinger(time.Hour)
		for i := range 120 {
			f.enqueue(o, fmt.Sprintf("user%d@example.com", i))
		}
		if r, err := o.DeliverDue(context.Background()); err != nil || r.Sent != 120 {
			t.Fatalf("DeliverDue: %+v, %v; want 120 sent", r, err)
		}
		seen := map[string]int{}
		for _, m := range sent.Messages() {
			if seen[m.To]++; seen[m.To] > 1 {
				t.Fatalf("%s was sent twice", m.To)
			}
		}
		if len(seen) != 120 || f.pending() != 0 {
			t.Fatalf("%d sent, %d pending; want 120 and 0", len(seen), f.pending())
		}
	})
}

// clockMover is a mailer that moves the test's clock on by `by` once it has sent `after`
// messages: the provider was slow, and the leases of the batch ran out.
type clockMover struct {
	*testkit.Memory
	clock *testkit.Clock
	after int
	by    time.Duration
	mu    sync.Mutex
	n     int
}

func (m *clockMover) Send(ctx context.Context, msg mail.Message) error {
	if err := m.Memory.Send(ctx, msg); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n++; m.n == m.after {
		m.clock.Advance(m.by)
	}
	return nil
}

// A claim never takes back what its own worker delivered while that message's deletion is under
// way: the database hung past the lease, so the deletion was still waiting (and then failed) when
// the worker's next claim found the lease run out. The claim leaves it out, without waiting for
// the row locks the deletion holds (on PostgreSQL), and sends what else is due; the message goes
// out once, and the next claim deletes it.
func TestOutbox_AClaimNeverTakesBackWhatADeletionUnderWayHolds(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		sent := testkit.NewMemory()
		store := f.stalledDeletion()
		o := f.outbox(store, sent)
		o.SetRecordLinger(time.Hour) // only DeliverDue's own deletion
		f.enqueue(o, "alice@example.com")
		first := make(chan error, 1)
		go func() {
			_, err := o.DeliverDue(context.Background())
			first <- err
		}()
		receive(t, store.entered, "the delivered message's deletion")
		defer func() { // on a failure, let the first pass end
			select {
			case store.release <- errors.New("the test failed"):
			default:
			}
		}()
		f.enqueue(o, "bob@example.com")
		f.clock.Advance(time.Minute) // the database hung: every lease has run out
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if r, err := o.DeliverDue(ctx); err != nil || r.Sent != 1 {
			t.Fatalf("the next pass: %+v, %v; want bob's message sent, and alice's left alone", r, err)
		}
		store.release <- errors.New("the database is away") // the hung deletion fails
		if err := receive(t, first, "the first pass to end"); err == nil {
			t.Fatal("the first pass did not report its failed deletion")
		}
		if _, err := o.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		var to []string
		for _, m := range sent.Messages() {
			to = append(to, m.To)
		}
		if slices.Sort(to); !slices.Equal(to, []string{"alice@example.com", "bob@example.com"}) || f.pending() != 0 {
			t.Fatalf("sent to %v, %d pending; want each once and none", to, f.pending())
		}
	})
}

// A stop waits for a deletion of delivered messages under way (the timer's) and, when it fails,
// deletes them itself before the service closes the store: they never go out again.
func TestOutbox_AStopDeletesWhatADeletionUnderWayLeft(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		got := testkit.NewMemory()
		store := f.stalledDeletion()
		o := f.outbox(store, got)
		o.SetRecordLinger(time.Millisecond)
		stop := f.run(o)
		f.enqueue(o, "alice@example.com")
		o.Kick()
		ids := receive(t, store.entered, "the timer's deletion")
		t.Cleanup(func() { // on a failure, let the deletion end before the store closes
			select {
			case store.release <- errors.New("the test failed"):
			default:
			}
		})
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		select {
		case <-stopped:
			t.Fatal("the stop did not wait for the deletion under way")
		case <-time.After(100 * time.Millisecond):
		}
		store.release <- errors.New("the database is away")
		receive(t, stopped, "the stop")
		if s := f.state(ids[0]); s != "gone" {
			t.Fatalf("after the stop: %s; want it deleted", s)
		}
	})
}

// stalledDeletion is a store whose first deletion of delivered messages announces its ids on
// entered and waits for the test, which sends what it returns on release (nil: it deletes them).
// On PostgreSQL it waits holding the rows' locks, as a deletion whose commit hangs does.
type stalledDeletion struct {
	*models.Store
	f       *fleet
	once    sync.Once
	entered chan []string
	release chan error
}

func (f *fleet) stalledDeletion() *stalledDeletion {
	return &stalledDeletion{Store: f.newStore(), f: f, entered: make(chan []string, 1), release: make(chan error)}
}

func (s *stalledDeletion) DeleteSentOutbox(ctx context.Context, ids []string) error {
	stalled := false
	s.once.Do(func() { stalled = true })
	if !stalled {
		return s.Store.DeleteSentOutbox(ctx, ids)
	}
	if s.f.url == "" {
		s.entered <- ids
		if err := <-s.release; err != nil {
			return err
		}
		return s.Store.DeleteSentOutbox(ctx, ids)
	}
	tx := s.f.db.Begin()
	if err := tx.Exec("DELETE FROM outbox WHERE id IN ?", ids).Error; err != nil {
		tx.Rollback()
		return err
	}
	s.entered <- ids
	if err := <-s.release; err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit().Error
}
