package mail_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	"gorm.io/gorm"
)

// fleet is one database that several outboxes share, as the instances of a fleet do, with the
// test's clock. No worker runs on its own: the tests call DeliverDue themselves.
type fleet struct {
	t     *testing.T
	clock *testkit.Clock
	db    *gorm.DB
	url   string // PostgreSQL's; "" on SQLite
	logs  *testkit.SyncBuffer
}

// eachDB runs fn on a fresh, migrated database of each kind.
func eachDB(t *testing.T, fn func(t *testing.T, f *fleet)) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(dialect, func(t *testing.T) {
			clock := testkit.NewClock(testkit.Start)
			opts := models.Options{SQLitePath: filepath.Join(t.TempDir(), "db.sqlite"), Now: clock.Now}
			if dialect == testkit.Postgres {
				opts = models.Options{DatabaseURL: testkit.PostgresURL(t), Now: clock.Now}
			}
			f := &fleet{t: t, clock: clock, url: opts.DatabaseURL, logs: &testkit.SyncBuffer{}}
			f.db = f.open(opts)
			if err := models.Migrate(context.Background(), f.db); err != nil {
				t.Fatal(err)
			}
			fn(t, f)
		})
	}
}

func (f *fleet) open(opts models.Options) *gorm.DB {
	f.t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	db, err := models.Open(context.Background(), opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

// instance starts an outbox on the fleet's database that delivers through m (on a store of its
// own: newStore).
func (f *fleet) instance(m mail.Mailer) *mail.Outbox {
	f.t.Helper()
	return f.outbox(f.newStore(), m)
}

// newStore opens a store on the fleet's database. On PostgreSQL it has a connection pool of its
// own, like another process; SQLite serves one process, so there the stores share its connection.
func (f *fleet) newStore() *models.Store {
	f.t.Helper()
	db := f.db
	if f.url != "" {
		db = f.open(models.Options{DatabaseURL: f.url, Now: f.clock.Now})
	}
	store, err := models.NewStore(db)
	if err != nil {
		f.t.Fatal(err)
	}
	return store
}

// outbox is an outbox on store that delivers through m.
func (f *fleet) outbox(store mail.Store, m mail.Mailer) *mail.Outbox {
	f.t.Helper()
	o, err := mail.NewOutbox(store, m, composer, make([]byte, 32), time.Hour, f.clock.Now, slog.New(slog.NewTextHandler(f.logs, nil)))
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

var composer = mail.Composer{SiteName: "Acme", SiteURL: "https://auth.acme.test"}

// enqueue queues a welcome e-mail to the address to through o.
func (f *fleet) enqueue(o *mail.Outbox, to string) {
	f.t.Helper()
	d, err := composer.Welcome(to)
	var row models.OutboxMessage
	if err == nil {
		row, err = o.Prepare(d, mail.EnqueueOptions{})
	}
	if err == nil {
		err = f.db.Create(&row).Error
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// pending counts the messages still waiting for delivery.
func (f *fleet) pending() int64 {
	f.t.Helper()
	var n int64
	if err := f.db.Model(&models.OutboxMessage{}).Where("status = ?", models.OutboxPending).Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}

// state describes the stored state of the message id that a worker could change, or "gone".
func (f *fleet) state(id string) string {
	f.t.Helper()
	var rows []models.OutboxMessage
	if err := f.db.Where("id = ?", id).Find(&rows).Error; err != nil {
		f.t.Fatal(err)
	}
	if len(rows) == 0 {
		return "gone"
	}
	r := rows[0]
	locked := "none"
	if r.LockedUntil != nil {
		locked = r.LockedUntil.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("status %s, attempts %d, leased until %s, next attempt %s, last error %q, payload %d bytes",
		r.Status, r.Attempts, locked, r.NextAttemptAt.UTC().Format(time.RFC3339Nano), r.LastError, len(r.Payload))
}

// lockedUntil reads the lease of the message id.
func (f *fleet) lockedUntil(id string) time.Time {
	f.t.Helper()
	var m models.OutboxMessage
	if err := f.db.Where("id = ?", id).Take(&m).Error; err != nil {
		f.t.Fatal(err)
	}
	if m.LockedUntil == nil {
		return time.Time{}
	}
	return *m.LockedUntil
}

// deadlock bounds every wait of these tests; it only fires when something is stuck.
const deadlock = 10 * time.Second

// waitFor polls cond until it holds, failing the test if it never does.
func (f *fleet) waitFor(what string, cond func() bool) {
	f.t.Helper()
	for stop := time.Now().Add(deadlock); !cond(); {
		if time.Now().After(stop) {
			f.t.Fatalf("waited in vain for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// receive waits for a value on ch, failing the test if none comes.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadlock):
		t.Fatalf("waited in vain for %s", what)
		panic("unreachable")
	}
}

// gate is a mailer whose sends wait for the test: each Send announces its message on entered,
// and returns what the test then sends on release.
type gate struct {
	entered chan mail.Message
	release chan error
	mu      sync.Mutex
	sent    []mail.Message
}

func newGate() *gate { return &gate{entered: make(chan mail.Message, 8), release: make(chan error)} }

func (g *gate) Send(ctx context.Context, m mail.Message) error {
	g.entered <- m
	select {
	case err := <-g.release:
		if err == nil {
			g.mu.Lock()
			g.sent = append(g.sent, m)
			g.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) Sent() []mail.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]mail.Message(nil), g.sent...)
}

// deliver runs DeliverDue on o in the background and hands its report over when it is done. A
// delivery still running when the test ends is cancelled and waited for.
func deliver(t *testing.T, o *mail.Outbox) <-chan mail.DeliveryReport {
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan mail.DeliveryReport, 1), make(chan struct{})
	go func() {
		defer close(finished)
		r, err := o.DeliverDue(ctx)
		if err != nil && ctx.Err() == nil {
			r.Failed = -1 // no report is this one: the test fails on it
			t.Log(err)
		}
		done <- r
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return done
}

// An instance that dies holding a delivery delays the e-mail by one short lease only: once it
// runs out, another instance delivers the message, once.
func TestOutbox_AnotherInstanceTakesOverFromACrashedOne(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		ctx := context.Background()
		crashed := f.instance(testkit.NewMemory())
		f.enqueue(crashed, "alice@example.com")
		if n, err := crashed.ClaimAndAbandon(ctx); err != nil || n != 1 {
			t.Fatalf("claimed %d, %v; want the one message", n, err)
		}
		got := testkit.NewMemory()
		survivor := f.instance(got)
		f.clock.Advance(9 * time.Second)
		if r, err := survivor.DeliverDue(ctx); err != nil || r != (mail.DeliveryReport{}) {
			t.Fatalf("while the lease holds: %+v, %v; want nothing done", r, err)
		}
		// The review asked for a takeover within about 10 s.
		f.clock.Advance(2 * time.Second)
		if r, err := survivor.DeliverDue(ctx); err != nil || r.Sent != 1 {
			t.Fatalf("11 s after the crash: %+v, %v; want the message delivered", r, err)
		}
		if r, err := survivor.DeliverDue(ctx); err != nil || r != (mail.DeliveryReport{}) {
			t.Fatalf("a second pass: %+v, %v; want nothing done", r, err)
		}
		if m := got.Messages(); len(m) != 1 || m[0].To != "alice@example.com" {
			t.Fatalf("delivered %+v, want the one message", m)
		}
		if n := f.pending(); n != 0 {
			t.Fatalf("%d messages still pending", n)
		}
	})
}

// A delivery that takes longer than the lease (a slow provider) keeps its message through
// heartbeats: however far the clock moves, no other instance takes it, and it is delivered once.
func TestOutbox_HeartbeatKeepsASlowDeliveryItsOwn(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		ctx := context.Background()
		slow := newGate()
		busy := f.instance(slow)
		busy.SetHeartbeat(time.Millisecond)
		idle := testkit.NewMemory()
		other := f.instance(idle)
		f.enqueue(busy, "alice@example.com")
		done := deliver(t, busy)
		m := receive(t, slow.entered, "the delivery to start")
		// The provider takes 80 s of the clock, eight leases' worth, in steps shorter than one.
		for step := 0; step < 20; step++ {
			f.clock.Advance(4 * time.Second)
			want := f.clock.Now().Add(mail.Lease)
			f.waitFor("the heartbeat to extend the lease", func() bool { return f.lockedUntil(m.ID).Equal(want) })
			if r, err := other.DeliverDue(ctx); err != nil || r != (mail.DeliveryReport{}) {
				t.Fatalf("after %d s, the other instance: %+v, %v; want nothing done", 4*(step+1), r, err)
			}
		}
		slow.release <- nil
		if r := receive(t, done, "the delivery to end"); r.Sent != 1 {
			t.Fatalf("the slow delivery: %+v", r)
		}
		if len(slow.Sent()) != 1 || len(idle.Messages()) != 0 {
			t.Fatalf("sent %d by the slow instance and %d by the other, want 1 and 0", len(slow.Sent()), len(idle.Messages()))
		}
		if n := f.pending(); n != 0 {
			t.Fatalf("%d messages still pending", n)
		}
	})
}

// A worker that was paused past its lease, while another instance took the message over, leaves
// the new holder's lease and record alone when its own send fails, for a failure it would retry
// and for one it would give up on.
func TestOutbox_LostLeaseLeavesTheNewHolderAlone(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		failures := []error{errors.New("provider unavailable"), &mail.PermanentError{Err: errors.New("mailbox refused")}}
		for i, failure := range failures {
			paused, holder := newGate(), newGate()
			first, second := f.instance(paused), f.instance(holder)
			// Neither heartbeat runs in this test: the first instance is paused, and the second
			// keeps its lease as it is, for the comparison below.
			first.SetHeartbeat(time.Hour)
			second.SetHeartbeat(time.Hour)
			f.enqueue(first, fmt.Sprintf("user%d@example.com", i))
			firstDone := deliver(t, first)
			m := receive(t, paused.entered, "the first delivery to start")
			f.clock.Advance(11 * time.Second)
			secondDone := deliver(t, second)
			receive(t, holder.entered, "the second instance to take the message over")
			before := f.state(m.ID)
			paused.release <- failure
			receive(t, firstDone, "the paused delivery to end")
			if after := f.state(m.ID); after != before {
				t.Fatalf("after the paused worker's failure (%v) the message is\n  %s\nwhile its new holder had it as\n  %s", failure, after, before)
			}
			if r, err := f.instance(testkit.NewMemory()).DeliverDue(context.Background()); err != nil || r != (mail.DeliveryReport{}) {
				t.Fatalf("a third instance: %+v, %v; want nothing done while the second holds the message", r, err)
			}
			holder.release <- nil
			if r := receive(t, secondDone, "the second delivery to end"); r.Sent != 1 {
				t.Fatalf("the new holder's delivery: %+v", r)
			}
			if n := f.pending(); n != 0 {
				t.Fatalf("%d messages still pending", n)
			}
		}
	})
}

// A worker paused past its lease whose heartbeat runs when it wakes, at the very moment another
// instance claimed the message (so the lease it would set is the one the new holder set), takes
// nothing back: it extends only what it still holds, and then holds nothing.
func TestOutbox_LateHeartbeatTakesNothingBack(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		ctx := context.Background()
		first, second := f.instance(testkit.NewMemory()), f.instance(testkit.NewMemory())
		f.enqueue(first, "alice@example.com")
		var id, before string
		err := first.ClaimStallAndFail(ctx, func() {
			f.clock.Advance(11 * time.Second)
			if n, err := second.ClaimAndAbandon(ctx); err != nil || n != 1 {
				t.Fatalf("the second instance claimed %d, %v; want the message", n, err)
			}
			var ids []string
			if err := f.db.Model(&models.OutboxMessage{}).Pluck("id", &ids).Error; err != nil || len(ids) != 1 {
				t.Fatalf("%d messages, %v", len(ids), err)
			}
			id = ids[0]
			before = f.state(id)
		}, errors.New("provider unavailable"))
		if err != nil {
			t.Fatal(err)
		}
		if after := f.state(id); after != before {
			t.Fatalf("after the late worker's heartbeat and failure the message is\n  %s\nwhile its new holder had it as\n  %s", after, before)
		}
	})
}

// An instance that dies with webhook deliveries claimed loses none: another takes them over when
// the lease runs out and delivers each once, under the event's id, in the order they were made.
func TestOutbox_WebhooksSurviveAnInstanceCrash(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		var mu sync.Mutex
		var got []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, r.Header.Get("webhook-id")+" "+string(body))
			mu.Unlock()
		}))
		defer srv.Close()
		hooks, err := mail.NewWebhooks([]string{srv.URL}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		crashing, survivor := f.instance(newGate()), f.instance(newGate())
		crashing.SetWebhooks(hooks)
		survivor.SetWebhooks(hooks)
		for i := range 3 {
			row, err := crashing.PrepareWebhook(srv.URL, fmt.Sprintf("msg_%d", i), "user-1", []byte(fmt.Sprintf(`{"n":%d}`, i)), f.clock.Now().Add(time.Duration(i)*time.Microsecond))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.db.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
		if n, err := crashing.ClaimAndAbandon(context.Background()); err != nil || n != 3 {
			t.Fatalf("claimed %d (%v)", n, err)
		}
		if report, _ := survivor.DeliverDue(context.Background()); report != (mail.DeliveryReport{}) {
			t.Fatalf("the survivor delivered under a live lease: %+v", report)
		}
		f.clock.Advance(mail.Lease)
		if report, err := survivor.DeliverDue(context.Background()); err != nil || report.Sent != 3 {
			t.Fatalf("after the lease: %+v %v", report, err)
		}
		if want := `msg_0 {"n":0},msg_1 {"n":1},msg_2 {"n":2}`; strings.Join(got, ",") != want {
			t.Fatalf("delivered %q, want %q", strings.Join(got, ","), want)
		}
		if f.pending() != 0 {
			t.Fatalf("%d deliveries left", f.pending())
		}
	})
}

// The webhooks of one batch to one endpoint go out an account at a time, in parallel across
// accounts: while the receiver holds one account's first event, another account's event is
// delivered, and the held account's second event waits for its first (one lane per endpoint
// would deliver a receiver 50 ms away 20 events a second, however many were waiting).
func TestOutbox_WebhooksGoInParallelAcrossAccountsInOrderWithinOne(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		var mu sync.Mutex
		var got []string
		held, release := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("webhook-id")
			if id == "a1" {
				held <- struct{}{}
				<-release
			}
			mu.Lock()
			got = append(got, id)
			mu.Unlock()
		}))
		defer srv.Close()
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce()
		hooks, err := mail.NewWebhooks([]string{srv.URL}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		o := f.instance(newGate())
		o.SetWebhooks(hooks)
		for i, ev := range []struct{ id, account string }{{"a1", "alice"}, {"a2", "alice"}, {"b1", "bob"}} {
			row, err := o.PrepareWebhook(srv.URL, ev.id, ev.account, []byte(`{}`), f.clock.Now().Add(time.Duration(i)*time.Microsecond))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.db.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
		done := deliver(t, o)
		receive(t, held, "alice's first event to reach the receiver")
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			delivered := slices.Clone(got)
			mu.Unlock()
			if slices.Contains(delivered, "b1") {
				if slices.Contains(delivered, "a2") {
					t.Fatalf("alice's second event went before her first: %v", delivered)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bob's event waited for alice's (delivered %v)", delivered)
			}
			time.Sleep(5 * time.Millisecond)
		}
		releaseOnce()
		if r := <-done; r.Sent != 3 {
			t.Fatalf("report %+v", r)
		}
		if want := []string{"b1", "a1", "a2"}; !slices.Equal(got, want) {
			t.Fatalf("delivered %v, want %v", got, want)
		}
	})
}

// Parallel deliveries to one host keep their connections: 128 webhooks of 128 accounts, eight
// at a time, open about as many connections as go at once (a dial that races a connection's
// return may add one or two). (Go's default transport keeps two idle
// connections a host, so six of every eight deliveries closed theirs and the next ones dialled
// again: thousands of connections a minute under load.)
func TestOutbox_ParallelDeliveriesReuseTheirConnections(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		var opened atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(5 * time.Millisecond) // long enough for the deliveries to overlap
		}))
		srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		hooks, err := mail.NewWebhooks([]string{srv.URL}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		o := f.instance(newGate())
		o.SetWebhooks(hooks)
		const events = 128
		for i := range events {
			row, err := o.PrepareWebhook(srv.URL, fmt.Sprintf("msg_%d", i), fmt.Sprintf("user-%d", i), []byte(`{}`), f.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := f.db.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
		if r, err := o.DeliverDue(context.Background()); err != nil || r.Sent != events {
			t.Fatalf("report %+v %v", r, err)
		}
		if n := opened.Load(); n > 12 {
			t.Fatalf("%d deliveries opened %d connections; 8 go at once", events, n)
		}
	})
}

// cancelOnSend delivers every message and then stops its worker, as Close does while a send is
// under way.
type cancelOnSend struct{ stop context.CancelFunc }

func (m cancelOnSend) Send(context.Context, mail.Message) error {
	m.stop()
	return nil
}

// A message delivered while the worker is being stopped is recorded as delivered all the same:
// left pending, it would go out a second time once its lease ran out (twice by SMTP, where no
// idempotency key catches it).
func TestOutbox_ADeliveryDuringTheStopIsRecorded(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		o := f.instance(cancelOnSend{stop})
		f.enqueue(o, "a@example.com")
		if r, _ := o.DeliverDue(ctx); r.Sent != 1 {
			t.Fatalf("report %+v", r)
		}
		if n := f.pending(); n != 0 {
			t.Fatalf("%d messages still pending after their delivery: they would be sent again", n)
		}
	})
}

// A send the stop cuts off is not a failed delivery: the message keeps its claim's lease, with no
// error and no backoff recorded, for any instance to deliver once the lease runs out; nor is it
// given up when it was on its last attempt.
func TestOutbox_ASendCutOffByTheStopIsLeftToItsLease(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		mailer := newGate()
		o := f.instance(mailer)
		f.enqueue(o, "a@example.com")
		var id string
		if err := f.db.Model(&models.OutboxMessage{}).Select("id").Take(&id).Error; err != nil {
			t.Fatal(err)
		}
		// its last attempt: the claim counts the MaxAttempts-th
		if err := f.db.Model(&models.OutboxMessage{}).Where("id = ?", id).Update("attempts", mail.MaxAttempts-1).Error; err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan mail.DeliveryReport, 1)
		go func() { r, _ := o.DeliverDue(ctx); done <- r }()
		receive(t, mailer.entered, "the send to start")
		claimed := f.state(id)
		stop()
		if r := <-done; r != (mail.DeliveryReport{}) {
			t.Fatalf("the cut-off send was counted: %+v", r)
		}
		if after := f.state(id); after != claimed {
			t.Fatalf("the cut-off send was recorded:\n  %s\nafter the claim it was\n  %s", after, claimed)
		}
	})
}

// A webhook receiver that does not answer holds back no e-mail: the webhooks have a worker of
// their own, so a sign-in code queued while a webhook delivery hangs goes out at once. (One
// worker for both used to claim the next batch only once the last one was delivered, so every
// e-mail waited for the hanging delivery's 15 s timeout, or for a whole lane of them.)
func TestOutbox_ASlowWebhookReceiverHoldsBackNoEmail(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
		}))
		defer srv.Close()
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // before the server closes, which waits for the hanging request
		hooks, err := mail.NewWebhooks([]string{srv.URL}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		mailer := newGate()
		o := f.instance(mailer)
		o.SetWebhooks(hooks)
		row, err := o.PrepareWebhook(srv.URL, "msg_1", "user-1", []byte(`{"n":1}`), f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { o.Run(ctx); close(ran) }()
		defer func() { cancel(); releaseOnce(); <-ran }()
		o.Kick()
		receive(t, entered, "the webhook delivery to start")

		f.enqueue(o, "b@example.com") // a sign-in code's e-mail would be queued the same way
		o.Kick()
		select {
		case m := <-mailer.entered:
			if m.To != "b@example.com" {
				t.Fatalf("sent to %q", m.To)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the e-mail waited for the hanging webhook delivery")
		}
		mailer.release <- nil
	})
}

// In a fleet where some instances have WEBHOOK_URL and some not yet, one without it that claims a
// webhook leaves it to its lease: no failure, no error, no backoff holding it from the instances
// that can deliver it, which do as soon as the lease runs out.
func TestOutbox_AnInstanceWithoutWebhooksLeavesThemToThoseWith(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		var delivered atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { delivered.Add(1) }))
		defer srv.Close()
		hooks, err := mail.NewWebhooks([]string{srv.URL}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		with, without := f.instance(newGate()), f.instance(newGate())
		with.SetWebhooks(hooks)
		row, err := with.PrepareWebhook(srv.URL, "msg_1", "user-1", []byte(`{}`), f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		queued := f.state(row.ID)
		if r, err := without.DeliverDue(context.Background()); err != nil || r != (mail.DeliveryReport{}) {
			t.Fatalf("the instance without webhooks: %+v %v", r, err)
		}
		if state := f.state(row.ID); state != queued {
			t.Fatalf("the instance without webhooks touched the delivery:\n  %s\nqueued as\n  %s", state, queued)
		}
		if r, err := with.DeliverDue(context.Background()); err != nil || r.Sent != 1 || delivered.Load() != 1 {
			t.Fatalf("the instance with webhooks: %+v %v (%d delivered)", r, err, delivered.Load())
		}
	})
}

// A webhook queued by an instance with WEBHOOK_URL and left to one without it is retried for the
// retry time every webhook has, then given up with a record: not retried for ever (review of
// issue 17).
func TestOutbox_WebhooksWithoutWebhooksAreNotRetriedForever(t *testing.T) {
	eachDB(t, func(t *testing.T, f *fleet) {
		hooks, err := mail.NewWebhooks([]string{"https://hooks.example.com/in"}, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		queuing, plain := f.instance(newGate()), f.instance(newGate())
		queuing.SetWebhooks(hooks)
		row, err := queuing.PrepareWebhook("https://hooks.example.com/in", "msg_1", "user-1", []byte(`{"n":1}`), f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.db.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		for elapsed := time.Duration(0); elapsed <= mail.WebhookRetry+time.Hour; elapsed += time.Hour {
			if _, err := plain.DeliverDue(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(time.Hour)
		}
		if _, err := plain.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		if state := f.state(row.ID); !strings.HasPrefix(state, "status "+models.OutboxAbandoned+",") {
			t.Fatalf("after the retry time the webhook is %q, want given up", state)
		}
	})
}
