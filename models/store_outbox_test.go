package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The outbox's statements, on both databases (forEachStore). mail's tests drive the worker over
// them; these pin what each statement does to the rows, including the rows it must leave alone.

// outboxNow is the cases' now: a time both databases store exactly (UTC, to the microsecond).
var outboxNow = time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)

// pendingMessage is a message due at next, with every column the claim returns filled in.
func pendingMessage(next time.Time) OutboxMessage {
	expires := next.Add(time.Hour)
	return OutboxMessage{ID: uuid.NewString(), Kind: "welcome", Recipient: "a@example.com", Payload: []byte{1, 2, 3},
		Status: OutboxPending, NextAttemptAt: next, ExpiresAt: &expires, CreatedAt: next.Add(-time.Minute)}
}

// leased is m under a lease until until.
func leased(m OutboxMessage, until time.Time) OutboxMessage {
	m.LockedUntil = &until
	return m
}

// givenUp is m as the record of a message given up at at (nil: an earlier version's record,
// which has no such time).
func givenUp(m OutboxMessage, status string, at *time.Time) OutboxMessage {
	m.Status, m.Payload, m.Supersede, m.GivenUpAt, m.LastError = status, []byte{}, "", at, "refused"
	return m
}

// putOutbox writes rows as they are.
func putOutbox(t *testing.T, s *Store, rows ...OutboxMessage) {
	t.Helper()
	if err := s.db.Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
}

// describeOutbox is every column of m, times in UTC, so that two states compare as strings.
func describeOutbox(m OutboxMessage) string {
	at := func(t *time.Time) string {
		if t == nil {
			return "null"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s kind=%s to=%s supersede=%q payload=%x status=%s attempts=%d next=%s locked=%s expires=%s error=%q created=%s given_up=%s",
		m.ID, m.Kind, m.Recipient, m.Supersede, m.Payload, m.Status, m.Attempts, at(&m.NextAttemptAt), at(m.LockedUntil),
		at(m.ExpiresAt), m.LastError, at(&m.CreatedAt), at(m.GivenUpAt))
}

// storedOutbox is the stored state of every message, by id.
func storedOutbox(t *testing.T, s *Store) map[string]string {
	t.Helper()
	var rows []OutboxMessage
	if err := s.db.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.ID] = describeOutbox(r)
	}
	return out
}

// expectOutbox fails unless the stored messages are exactly want.
func expectOutbox(t *testing.T, s *Store, want ...OutboxMessage) {
	t.Helper()
	got := storedOutbox(t, s)
	for _, w := range want {
		if g, ok := got[w.ID]; !ok {
			t.Errorf("message gone, want\n  %s", describeOutbox(w))
		} else if g != describeOutbox(w) {
			t.Errorf("message is\n  %s\nwant\n  %s", g, describeOutbox(w))
		}
		delete(got, w.ID)
	}
	for _, g := range got {
		t.Errorf("message left, want it gone:\n  %s", g)
	}
}

// outboxIDs are the ids of rows, sorted.
func outboxIDs(rows []OutboxMessage) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

// A claim takes, the earliest due first, at most its limit of the messages that are pending, due
// and not leased past now (a lease that ends at now has ended), leases them until its until,
// counts the attempt, and returns each with what its delivery needs. It leaves every other
// message as it was.
func TestClaimOutbox_TakesDueUnleasedPendingMessagesUpToTheLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		first := pendingMessage(outboxNow.Add(-4 * time.Minute))
		first.Supersede, first.Attempts = "code:a@example.com", 2
		leaseEnded := leased(pendingMessage(outboxNow.Add(-3*time.Minute)), outboxNow.Add(-time.Second))
		leaseEndsNow := leased(pendingMessage(outboxNow.Add(-2*time.Minute)), outboxNow)
		last := pendingMessage(outboxNow)
		last.ExpiresAt = nil
		notYet := pendingMessage(outboxNow.Add(time.Microsecond))
		held := leased(pendingMessage(outboxNow.Add(-10*time.Minute)), outboxNow.Add(time.Microsecond))
		abandoned := givenUp(pendingMessage(outboxNow.Add(-10*time.Minute)), OutboxAbandoned, &outboxNow)
		sent := givenUp(pendingMessage(outboxNow.Add(-10*time.Minute)), "sent", nil) // an earlier version's record
		putOutbox(t, s, first, leaseEnded, leaseEndsNow, last, notYet, held, abandoned, sent)

		until := outboxNow.Add(10 * time.Second)
		batch, err := s.ClaimOutbox(ctx, EmailQueue, outboxNow, until, 3, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []OutboxMessage{first, leaseEnded, leaseEndsNow}
		if got := outboxIDs(batch); !slices.Equal(got, outboxIDs(want)) {
			t.Fatalf("claimed %q, want the three earliest due %q", got, outboxIDs(want))
		}
		for i := range want {
			want[i].Attempts++
			want[i].LockedUntil = &until
		}
		// The claim returns what a delivery reads, as stored; it leaves out the columns the
		// worker does not read.
		for _, got := range batch {
			w := want[slices.IndexFunc(want, func(m OutboxMessage) bool { return m.ID == got.ID })]
			w.Status, w.NextAttemptAt, w.LockedUntil = "", time.Time{}, nil
			if describeOutbox(got) != describeOutbox(w) {
				t.Errorf("claimed\n  %s\nwant\n  %s", describeOutbox(got), describeOutbox(w))
			}
		}

		again, err := s.ClaimOutbox(ctx, EmailQueue, outboxNow, until, 3, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := outboxIDs(again); !slices.Equal(got, []string{last.ID}) {
			t.Fatalf("the second claim took %q, want only the one due message left, %s", got, last.ID)
		}
		last.Attempts++
		last.LockedUntil = &until
		if none, err := s.ClaimOutbox(ctx, EmailQueue, outboxNow, until, 3, nil, nil); err != nil || len(none) != 0 {
			t.Fatalf("a third claim took %d messages, %v; want none", len(none), err)
		}
		expectOutbox(t, s, append(want, last, notYet, held, abandoned, sent)...)
	})
}

// The two queues are claimed apart: a claim of the e-mails takes no webhook delivery, and a
// claim of the webhooks no e-mail, however early due.
func TestClaimOutbox_TakesOneQueueOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		email := pendingMessage(outboxNow.Add(-time.Minute))
		hook := pendingMessage(outboxNow.Add(-2 * time.Minute))
		hook.Kind, hook.Recipient = OutboxKindWebhook, "hooks.example.com"
		putOutbox(t, s, email, hook)
		until := outboxNow.Add(10 * time.Second)
		for _, c := range []struct {
			queue OutboxQueue
			want  OutboxMessage
		}{{EmailQueue, email}, {WebhookQueue, hook}} {
			batch, err := s.ClaimOutbox(ctx, c.queue, outboxNow, until, 10, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := outboxIDs(batch); !slices.Equal(got, []string{c.want.ID}) {
				t.Fatalf("queue %v claimed %q, want only %s (%s)", c.queue, got, c.want.ID, c.want.Kind)
			}
		}
	})
}

// However many workers claim at once, each from its own connections, no message is claimed
// twice, and every due message is claimed.
func TestClaimOutbox_NoTwoClaimsTakeTheSameMessage(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, another func() *Store) {
		const messages, workers, limit = 200, 4, 7
		rows := make([]OutboxMessage, messages)
		for i := range rows {
			rows[i] = pendingMessage(outboxNow.Add(-time.Duration(i%10) * time.Second))
		}
		putOutbox(t, s, rows...)
		var mu sync.Mutex
		claimed := map[string]int{}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			w := another()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					batch, err := w.ClaimOutbox(context.Background(), EmailQueue, outboxNow, outboxNow.Add(10*time.Second), limit, nil, nil)
					if err != nil {
						errs <- err
						return
					}
					if len(batch) > limit {
						errs <- fmt.Errorf("a claim took %d messages, over its limit of %d", len(batch), limit)
					}
					if len(batch) == 0 {
						return
					}
					mu.Lock()
					for _, m := range batch {
						claimed[m.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(claimed) != messages {
			t.Fatalf("%d messages claimed, want all %d", len(claimed), messages)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Fatalf("message %s claimed %d times", id, n)
			}
		}
		var twice int64
		if err := s.db.Model(&OutboxMessage{}).Where("attempts <> 1").Count(&twice).Error; err != nil || twice != 0 {
			t.Fatalf("%d messages counted other than one attempt, %v", twice, err)
		}
	})
}

// On PostgreSQL a claim passes over a message another transaction has locked (a claim under
// way) instead of waiting for it, and takes the others.
func TestClaimOutbox_SkipsLockedMessagesOnPostgres(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, another func() *Store) {
		if !s.postgres {
			t.Skip("SQLite has no row locks: its writers take turns")
		}
		ctx := context.Background()
		locked, free := pendingMessage(outboxNow.Add(-time.Minute)), pendingMessage(outboxNow)
		putOutbox(t, s, locked, free)
		tx := another().db.Begin()
		t.Cleanup(func() { tx.Rollback() })
		var got []string
		if err := tx.Raw("SELECT id FROM outbox WHERE id = ? FOR UPDATE", locked.ID).Scan(&got).Error; err != nil || len(got) != 1 {
			t.Fatalf("locking: %q, %v", got, err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, deadlock)
		defer cancel()
		batch, err := s.ClaimOutbox(waitCtx, EmailQueue, outboxNow, outboxNow.Add(10*time.Second), 10, nil, nil)
		if err != nil {
			t.Fatalf("the claim waited for the locked message: %v", err)
		}
		if got := outboxIDs(batch); !slices.Equal(got, []string{free.ID}) {
			t.Fatalf("claimed %q, want only the unlocked %s", got, free.ID)
		}
		if err := tx.Rollback().Error; err != nil {
			t.Fatal(err)
		}
		batch, err = s.ClaimOutbox(ctx, EmailQueue, outboxNow, outboxNow.Add(10*time.Second), 10, nil, nil)
		if got := outboxIDs(batch); err != nil || !slices.Equal(got, []string{locked.ID}) {
			t.Fatalf("once unlocked, claimed %q, %v; want %s", got, err, locked.ID)
		}
	})
}

// A lease is extended only on the messages still pending under it: one whose lease ran out and
// was claimed again carries its new holder's lease, and one recorded as given up has none; both
// are left alone, and only the ids extended come back.
func TestExtendOutboxLease_ExtendsOnlyWhatIsStillHeld(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		held := outboxNow.Add(10 * time.Second)
		mine := leased(pendingMessage(outboxNow), held)
		taken := leased(pendingMessage(outboxNow), held.Add(time.Second)) // claimed again, by another worker
		recorded := givenUp(pendingMessage(outboxNow), OutboxAbandoned, &outboxNow)
		recorded.LockedUntil = nil
		putOutbox(t, s, mine, taken, recorded)

		until := held.Add(3 * time.Second)
		kept, err := s.ExtendOutboxLease(ctx, map[time.Time][]string{held: {mine.ID, taken.ID, recorded.ID}}, until)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(kept, []string{mine.ID}) {
			t.Fatalf("extended %q, want only %s", kept, mine.ID)
		}
		mine.LockedUntil = &until
		expectOutbox(t, s, mine, taken, recorded)
		// The old lease is no longer this worker's to extend.
		if kept, err := s.ExtendOutboxLease(ctx, map[time.Time][]string{held: {mine.ID}}, until.Add(time.Second)); err != nil || len(kept) != 0 {
			t.Fatalf("extending a lease already moved on: %q, %v; want nothing", kept, err)
		}
		expectOutbox(t, s, mine, taken, recorded)
	})
}

// roundTrips is a GORM logger that keeps what each pipelined round trip sent.
type roundTrips struct {
	logger.Interface
	sent []string
}

// Trace keeps the statements of one round trip.
func (r *roundTrips) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	r.sent = append(r.sent, sql)
}

// A worker far behind holds several leases (one for each 100 ms of hand-offs): one call extends
// each on the messages still under it, and leaves a message whose lease was named wrong.
func TestExtendOutboxLease_ExtendsSeveralLeasesAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		first, second := outboxNow.Add(2*time.Second), outboxNow.Add(2100*time.Millisecond)
		a := leased(pendingMessage(outboxNow), first)
		b := leased(pendingMessage(outboxNow), second)
		other := leased(pendingMessage(outboxNow), second)
		putOutbox(t, s, a, b, other)
		until := outboxNow.Add(10 * time.Second)
		trips := &roundTrips{Interface: s.db.Logger}
		s.db.Logger = trips
		kept, err := s.ExtendOutboxLease(context.Background(), map[time.Time][]string{first: {a.ID, other.ID}, second: {b.ID}}, until)
		s.db.Logger = trips.Interface
		if err != nil {
			t.Fatal(err)
		}
		if s.postgres && (len(trips.sent) != 1 || strings.Count(trips.sent[0], "UPDATE outbox") != 2) {
			t.Fatalf("round trips %q; want both leases' UPDATEs in one", trips.sent)
		}
		slices.Sort(kept)
		want := []string{a.ID, b.ID}
		slices.Sort(want)
		if !slices.Equal(kept, want) {
			t.Fatalf("extended %q, want %q", kept, want)
		}
		a.LockedUntil, b.LockedUntil = &until, &until
		expectOutbox(t, s, a, b, other)
	})
}

// The results of a delivery: a message sent is deleted whether or not the lease still holds it;
// a dropped, failed or given-up one is recorded only while it is pending under the worker's
// lease, and otherwise left as its new holder has it.
func TestRecordOutbox_WritesResultsUnderTheLeaseOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		// The lost messages' new holder has a lease that outlasts the case.
		held, other := outboxNow.Add(10*time.Second), outboxNow.Add(time.Hour)
		mk := func(until time.Time) OutboxMessage {
			m := leased(pendingMessage(outboxNow.Add(-time.Minute)), until)
			m.Supersede, m.Attempts = "code:a@example.com", 3
			return m
		}
		sent, sentLost := mk(held), mk(other)
		dropped, droppedLost := mk(held), mk(other)
		failed, failedLost := mk(held), mk(other)
		abandoned, abandonedLost := mk(held), mk(other)
		putOutbox(t, s, sent, sentLost, dropped, droppedLost, failed, failedLost, abandoned, abandonedLost)

		if err := s.DeleteSentOutbox(ctx, []string{sent.ID, sentLost.ID}); err != nil {
			t.Fatal(err)
		}
		if err := s.DropOutbox(ctx, []string{dropped.ID, droppedLost.ID}, held); err != nil {
			t.Fatal(err)
		}
		next := outboxNow.Add(40 * time.Second)
		// 601 bytes, of which the column keeps 500, which would end inside an "é": PostgreSQL
		// refuses text that is not UTF-8, so the cut falls before it.
		long := "a" + strings.Repeat("é", 300)
		for _, id := range []string{failed.ID, failedLost.ID} {
			if err := s.RescheduleOutbox(ctx, id, held, next, long); err != nil {
				t.Fatal(err)
			}
		}
		at := outboxNow.Add(2 * time.Second)
		for _, id := range []string{abandoned.ID, abandonedLost.ID} {
			if err := s.GiveUpOutbox(ctx, id, held, at, "mailbox refused"); err != nil {
				t.Fatal(err)
			}
		}

		failed.NextAttemptAt, failed.LockedUntil, failed.LastError = next, nil, long[:499]
		abandoned.Status, abandoned.Payload, abandoned.Supersede, abandoned.LockedUntil = OutboxAbandoned, []byte{}, "", nil
		abandoned.LastError, abandoned.GivenUpAt = "mailbox refused", &at
		expectOutbox(t, s, droppedLost, failed, failedLost, abandoned, abandonedLost)

		// A message rescheduled is due again at its next attempt, not before.
		if batch, err := s.ClaimOutbox(ctx, EmailQueue, next.Add(-time.Microsecond), next.Add(10*time.Second), 10, nil, nil); err != nil || len(batch) != 0 {
			t.Fatalf("before its next attempt: claimed %d, %v", len(batch), err)
		}
		if batch, err := s.ClaimOutbox(ctx, EmailQueue, next, next.Add(10*time.Second), 10, nil, nil); err != nil || !slices.Equal(outboxIDs(batch), []string{failed.ID}) {
			t.Fatalf("at its next attempt: claimed %q, %v; want %s", outboxIDs(batch), err, failed.ID)
		}
	})
}

// The due count counts pending messages due now, leased or not, and nothing else.
func TestCountDueOutbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		putOutbox(t, s, pendingMessage(outboxNow.Add(-time.Minute)), pendingMessage(outboxNow), leased(pendingMessage(outboxNow), outboxNow.Add(time.Second)),
			pendingMessage(outboxNow.Add(time.Microsecond)), givenUp(pendingMessage(outboxNow.Add(-time.Minute)), OutboxAbandoned, &outboxNow))
		if n, err := s.CountDueOutbox(context.Background(), outboxNow); err != nil || n != 3 {
			t.Fatalf("%d due, %v; want 3", n, err)
		}
	})
}

// Queueing a message with a supersede key first deletes the pending messages of that key no
// worker holds (a lease that ends at the new message's time has ended): a message being sent is
// left to finish, and records, other keys and messages without a key are left alone. A message
// without a key deletes nothing. Both go through the pipelined transaction.
func TestEnqueueOutbox_SupersedesOnlyPendingUnleasedMessagesOfItsKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		const key = "code:a@example.com"
		keyed := func(k string, m OutboxMessage) OutboxMessage {
			m.Supersede = k
			return m
		}
		queued := keyed(key, pendingMessage(outboxNow.Add(-time.Minute)))
		leaseEnded := keyed(key, leased(pendingMessage(outboxNow.Add(-time.Minute)), outboxNow.Add(-time.Second)))
		leaseEndsNow := keyed(key, leased(pendingMessage(outboxNow.Add(-time.Minute)), outboxNow))
		sending := keyed(key, leased(pendingMessage(outboxNow.Add(-time.Minute)), outboxNow.Add(time.Microsecond)))
		record := givenUp(pendingMessage(outboxNow.Add(-time.Minute)), OutboxAbandoned, &outboxNow)
		record.Supersede = key // no version writes this, but the delete must not rely on it
		otherKey := keyed("code:b@example.com", pendingMessage(outboxNow.Add(-time.Minute)))
		noKey := pendingMessage(outboxNow.Add(-time.Minute))
		putOutbox(t, s, queued, leaseEnded, leaseEndsNow, sending, record, otherKey, noKey)

		newer := keyed(key, pendingMessage(outboxNow))
		newer.CreatedAt = outboxNow
		plain := pendingMessage(outboxNow)
		plain.CreatedAt = outboxNow
		err := Transaction(ctx, s.db, func(tx *gorm.DB) error {
			if err := enqueueOutbox(tx, &newer); err != nil {
				return err
			}
			return enqueueOutbox(tx, &plain)
		})
		if err != nil {
			t.Fatal(err)
		}
		expectOutbox(t, s, sending, record, otherKey, noKey, newer, plain)
	})
}

// The prune deletes the records of messages given up before the cutoff (an earlier version's
// records, which have no such time, by when they were queued), at most its limit at a time and
// reporting how many; pending messages, however old, and records given up since stay.
func TestPruneGivenUpOutbox_DeletesOldRecordsInBoundedBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		ctx := context.Background()
		cutoff := outboxNow.Add(-30 * time.Minute)
		ago := func(d time.Duration) *time.Time { at := outboxNow.Add(-d); return &at }
		record := func(status string, givenUpAt *time.Time, created time.Time) OutboxMessage {
			m := givenUp(pendingMessage(created), status, givenUpAt)
			m.CreatedAt = created
			return m
		}
		old := []OutboxMessage{
			record(OutboxAbandoned, ago(3*time.Hour), outboxNow.Add(-4*time.Hour)),
			record(OutboxAbandoned, ago(2*time.Hour), outboxNow.Add(-4*time.Hour)),
			record(OutboxAbandoned, ago(31*time.Minute), outboxNow.Add(-4*time.Hour)),
			record("sent", nil, outboxNow.Add(-5*time.Hour)),
			record(OutboxAbandoned, nil, outboxNow.Add(-5*time.Hour)),
		}
		recent := []OutboxMessage{
			record(OutboxAbandoned, ago(10*time.Minute), outboxNow.Add(-4*time.Hour)), // queued long ago, given up since
			record(OutboxAbandoned, &cutoff, outboxNow.Add(-4*time.Hour)),             // at the cutoff, not before it
			record("sent", nil, outboxNow.Add(-10*time.Minute)),
			pendingMessage(outboxNow.Add(-10 * time.Hour)), // pending
		}
		recent[3].CreatedAt = outboxNow.Add(-10 * time.Hour)
		putOutbox(t, s, append(old, recent...)...)

		var got []int64
		for {
			n, err := s.PruneGivenUpOutbox(ctx, cutoff, 2)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
			if n < 2 {
				break
			}
		}
		if !slices.Equal(got, []int64{2, 2, 1}) {
			t.Fatalf("the prune deleted %v, want batches of at most 2: [2 2 1]", got)
		}
		expectOutbox(t, s, recent...)
	})
}

// Forgetting the recipients of purged accounts deletes the records of their messages given up,
// an earlier version's included, and no one else's; their messages still pending stay, to be
// delivered.
func TestForgetGivenUp_DeletesOnlyTheRecipientsRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		to := func(addr string, m OutboxMessage) OutboxMessage {
			m.Recipient = addr
			return m
		}
		pendingA := to("a@example.com", pendingMessage(outboxNow))
		otherRecord := to("c@example.com", givenUp(pendingMessage(outboxNow), OutboxAbandoned, &outboxNow))
		putOutbox(t, s, pendingA, otherRecord,
			to("a@example.com", givenUp(pendingMessage(outboxNow), OutboxAbandoned, &outboxNow)),
			to("a@example.com", givenUp(pendingMessage(outboxNow), "sent", nil)),
			to("b@example.com", givenUp(pendingMessage(outboxNow), OutboxAbandoned, &outboxNow)))
		err := Transaction(context.Background(), s.db, func(tx *gorm.DB) error {
			return forgetGivenUp(tx, []string{"a@example.com", "b@example.com"})
		})
		if err != nil {
			t.Fatal(err)
		}
		expectOutbox(t, s, pendingA, otherRecord)
	})
}

// The outbox is a queue, nearly empty whenever VACUUM measures it. Measured so, PostgreSQL plans
// its statements with sequential scans, and prepared statements keep those plans while the table
// fills with dead rows: every delivery's DELETE read the whole table. The worker's statements
// (in its transactions, bookkeeping) and a code's superseding (after enqueueOutbox's settings, in
// the request's transaction) find their rows through the indexes whatever the statistics say
// (outboxPlansSQL). Each is planned in the transaction that runs it, as PostgreSQL would plan it
// there, on a table measured empty. SQLite has no such statistics.
func TestOutbox_StatementsUseIndexesOnATableMeasuredEmpty(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		if !s.postgres {
			t.Skip("SQLite plans from its indexes, not from measured statistics")
		}
		ctx := context.Background()
		if err := s.db.Exec("VACUUM ANALYZE outbox").Error; err != nil {
			t.Fatal(err)
		}
		ids, at := idArray([]string{uuid.NewString(), uuid.NewString()}), outboxNow
		explained := func(run func(ctx context.Context, fn func(tx *gorm.DB) error) error, before func(tx *gorm.DB) error, query string, args ...any) string {
			t.Helper()
			var plan []struct {
				QueryPlan string `db:"QUERY PLAN"`
			}
			err := run(ctx, func(tx *gorm.DB) error {
				if err := before(tx); err != nil {
					return err
				}
				return scanLater(tx, &plan, "EXPLAIN "+query, args...)
			})
			if err != nil {
				t.Fatalf("%.60s: %v", query, err)
			}
			var lines []string
			for _, p := range plan {
				lines = append(lines, p.QueryPlan)
			}
			return strings.Join(lines, "\n")
		}
		nothing := func(*gorm.DB) error { return nil }
		plans := map[string]string{
			"the e-mail claim":    explained(s.bookkeeping, nothing, claimPostgres[EmailQueue], at, at, at, ids, 50, at),
			"the webhook claim":   explained(s.bookkeeping, nothing, claimPostgres[WebhookQueue], at, at, at, ids, 50, at),
			"a lease's extension": explained(s.bookkeeping, nothing, extendOutboxSQL, at, ids, at),
			"a release":           explained(s.bookkeeping, nothing, releaseOutboxSQL, ids, at),
			"a drop":              explained(s.bookkeeping, nothing, dropOutboxSQL, ids, at),
			"a delivery's record": explained(s.bookkeeping, nothing, deleteSentSQL, ids),
			// What a code's e-mail leaves set for the supersede of the next one (the one it ran
			// itself is a data-modifying WITH of its insert, planned the same way).
			"a code's superseding": explained(s.transaction, func(tx *gorm.DB) error {
				m := pendingMessage(outboxNow)
				m.Supersede = "sign-in-code:a@example.com"
				return enqueueOutbox(tx, &m)
			}, supersedeSQL, "sign-in-code:a@example.com", at),
		}
		for what, plan := range plans {
			if strings.Contains(plan, "Seq Scan on outbox") || strings.Contains(plan, "Bitmap") || !strings.Contains(plan, "Index Scan") {
				t.Errorf("%s is planned\n%s\nwant index scans only", what, plan)
			}
		}
	})
}

// The worker's claims and records commit without waiting for the disk (a crash at worst sends a
// message again, under the same id); what a request commits still waits.
func TestOutbox_OnlyTheWorkersCommitsSkipTheFlush(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		if !s.postgres {
			t.Skip("SQLite has no such setting")
		}
		setting := func(run func(ctx context.Context, fn func(tx *gorm.DB) error) error) string {
			t.Helper()
			var got []struct{ Value string }
			err := run(context.Background(), func(tx *gorm.DB) error {
				return scanLater(tx, &got, "SELECT current_setting('synchronous_commit') AS value")
			})
			if err != nil || len(got) != 1 {
				t.Fatalf("%v, %v", got, err)
			}
			return got[0].Value
		}
		if got := setting(s.bookkeeping); got != "off" {
			t.Fatalf("the worker's transactions: synchronous_commit %s", got)
		}
		var server string
		if err := s.db.Raw("SHOW synchronous_commit").Scan(&server).Error; err != nil {
			t.Fatal(err)
		}
		if got := setting(s.transaction); got != server {
			t.Fatalf("a request's transaction: synchronous_commit %s; want the server's %s", got, server)
		}
	})
}
