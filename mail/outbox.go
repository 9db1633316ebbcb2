package mail

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"codeauth/lograte"
	"codeauth/models"

	"github.com/google/uuid"
)

// Store is the storage the outbox needs, models.Store's outbox statements: the worker's claim,
// lease and record, and what the service's jobs and tests ask of the queue. Messages are queued
// by the store's transactions themselves (Prepare gives them the row), inside the change that
// causes them.
type Store interface {
	// ClaimOutbox leases until until at most limit messages of queue due at now, each to one
	// worker only, after deleting the messages sent (delivered, not yet deleted) in the same
	// round trip, and leaving alone those deleting names (their deletion is under way).
	ClaimOutbox(ctx context.Context, queue models.OutboxQueue, now, until time.Time, limit int, sent, deleting []string) ([]models.OutboxMessage, error)
	// ExtendOutboxLease moves the leases held (each lease, with the ids held under it) on to
	// until, on the messages each is still on, and returns those.
	ExtendOutboxLease(ctx context.Context, held map[time.Time][]string, until time.Time) ([]string, error)
	// DeleteSentOutbox deletes messages delivered.
	DeleteSentOutbox(ctx context.Context, ids []string) error
	// ReleaseOutbox ends the lease held on messages handed to a worker that stops before it
	// sent them, taking back the attempt it counted.
	ReleaseOutbox(ctx context.Context, ids []string, held time.Time) error
	// DropOutbox deletes messages no longer worth sending, while the lease held is on them.
	DropOutbox(ctx context.Context, ids []string, held time.Time) error
	// RescheduleOutbox records a failed delivery to be retried at next, while the lease held is
	// on the message.
	RescheduleOutbox(ctx context.Context, id string, held, next time.Time, reason string) error
	// GiveUpStaleWebhooks gives up, at at, the pending webhooks queued before cutoff that no
	// worker holds.
	GiveUpStaleWebhooks(ctx context.Context, cutoff, at time.Time, reason string) (int64, error)
	// GiveUpOutbox turns a message into the record of one given up at at, while the lease held
	// is on it.
	GiveUpOutbox(ctx context.Context, id string, held, at time.Time, reason string) error
	// CountDueOutbox counts the pending messages due at now.
	CountDueOutbox(ctx context.Context, now time.Time) (int64, error)
	// PruneGivenUpOutbox deletes at most limit records of messages given up before cutoff.
	PruneGivenUpOutbox(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// Delivery policy of the outbox.
const (
	// MaxAttempts is how many deliveries a message gets before it is given up.
	MaxAttempts = 20
	// lease is how long a claim, and then each heartbeat, lets a worker own the messages it is
	// delivering. A worker that dies releases them by letting the lease run out, so it is short:
	// another instance takes such a message over within lease. A worker that is alive extends
	// it every heartbeat while it delivers, so a slow send keeps it however long it takes. Leases
	// are compared across instances, whose clocks must agree to well within it (NTP does).
	lease = 10 * time.Second
	// heartbeat is how often, in real time, a delivery still under way extends its lease: three
	// times per lease, so one late or failed beat (a slow database) does not lose it.
	heartbeat = lease / 3
	// sendTimeout bounds one hand-over to the provider. It may exceed lease: heartbeats keep
	// the message leased meanwhile.
	sendTimeout = 20 * time.Second
	// pollInterval is how often each worker looks for due messages queued by other instances, or
	// due for a retry, or queued without a kick (most webhooks), when nothing wakes it.
	pollInterval = time.Second
	// webhookIdlePoll is how often the webhook worker of an instance without WEBHOOK_URL looks
	// at the queue: only to give up webhooks no instance delivered in their retry time (another
	// instance's, or from before WEBHOOK_URL was removed), which is no hurry.
	webhookIdlePoll = 10 * time.Minute
	// recordTimeout bounds the recording of a batch's results, which goes on when the worker is
	// stopped.
	recordTimeout = 5 * time.Second
	// batchSize is how many messages one claim takes.
	batchSize = 50
	// kickLinger is how long a worker waits after being woken before it delivers, so that the
	// messages of a busy moment share one batch, and one record of its results, instead of one
	// each. It is added once to the delivery time of a message queued while the worker was idle.
	kickLinger = 5 * time.Millisecond
	// maxHanded is how many messages of a queue may wait in this process for its worker
	// (HandoffLease); past it, new ones are queued unleased, for a claim.
	maxHanded = 1000
	// recordLinger is how long a worker keeps the ids of messages it delivered before it
	// deletes them (a timer of their own, whatever the worker is doing meanwhile), so that the
	// deliveries of a busy moment are recorded by one statement instead of one a batch; its next
	// claim deletes them sooner, in the claim's own round trip, so that no claim can take one
	// back. Meanwhile their lease keeps them from any other worker: when the heartbeats of a
	// batch stop, at least lease less one heartbeat of it is left. A stop, or DeliverDue, deletes
	// them at once. A crash in between sends them again after their lease, under the same id
	// (the provider's idempotency key, the webhook-id), as a crash before the record always did.
	recordLinger = 100 * time.Millisecond
	// maxUnrecorded is how many delivered ids a worker keeps so before it deletes them at once.
	maxUnrecorded = 500
)

// Backoff is the wait before delivery attempt n+1 after n failures: 10 s, 20 s, 40 s … up to
// 15 minutes.
func Backoff(attempts int) time.Duration {
	d := 5 * time.Second * time.Duration(math.Pow(2, float64(min(attempts, 10))))
	return min(d, 15*time.Minute)
}

// Outbox is the durable queue of outgoing e-mail and webhooks. A message (the row Prepare or
// PrepareWebhook returns) is written in the caller's transaction, so it exists exactly when the
// change that causes it commits; a worker (one for e-mail, one for webhooks: models.OutboxQueue)
// delivers it afterwards, retrying with exponential backoff, so the HTTP answer never waits on
// the provider and a provider outage loses nothing. Every delivery is under an atomic lease, so
// any number of instances can run workers on one database without sending a message twice: a
// message is written leased to the worker of the process that queued it and handed to it after
// the commit (Handoff), or claimed (a retry, a message that supersedes others, one of an instance
// that died).
type Outbox struct {
	store   Store
	mailer  Mailer
	compose Composer
	aead    cipher.AEAD
	now     func() time.Time
	log     *slog.Logger
	// kick wakes the e-mail queue's worker, kickHooks the webhook queue's.
	kick, kickHooks chan struct{}
	// hooks delivers the webhook rows (SetWebhooks); nil without WEBHOOK_URL.
	hooks *Webhooks
	// refusedKeyRetry is how long a message keeps being retried, attempts not counted, while the
	// provider refuses the service's credentials (CredentialsError).
	refusedKeyRetry time.Duration
	// beat is how often a delivery extends its lease: heartbeat, but in tests.
	beat time.Duration
	// linger is how long delivered messages wait for their deletion: recordLinger, but in tests.
	linger time.Duration
	// totals counts the outcomes of every delivery since the start, by queue (Totals).
	totals struct {
		sync.Mutex
		byQueue map[models.OutboxQueue]DeliveryReport
	}
	// running is set while Run runs: only then are messages handed to the workers.
	running atomic.Bool
	// handed is what waits in this process for each queue's worker (Handoff), oldest first.
	handed struct {
		sync.Mutex
		byQueue map[models.OutboxQueue][]models.OutboxMessage
	}
	// claimWanted asks a queue's worker for a claim at its next pass: messages were queued
	// unleased (Kick, a code's e-mail, which is never leased at queueing, or a hand-off
	// refused).
	claimWanted map[models.OutboxQueue]*atomic.Bool
	// delivered holds, by queue, the ids of messages sent and not yet deleted (recordLinger).
	delivered struct {
		sync.Mutex
		byQueue map[models.OutboxQueue]*unrecorded
	}
	// flushWarned keeps the timer's deletions saying the database is unavailable to once a
	// lograte.Repeat, as the workers say it.
	flushWarned lograte.Limit
}

// unrecorded is the ids of a queue's messages sent and not yet deleted, those whose deletion is
// under way, and whether the timer that deletes them is set.
type unrecorded struct {
	ids []string
	// deleting counts, by id, the deletions under way that hold it (the timer's, a stop's, a
	// claim's). A claim leaves those out: a deletion held up by a hung database may outlive the
	// message's lease, and then fail (its ids are kept again, for the next deletion).
	deleting map[string]int
	// settled is closed when the last deletion under way ends (nil while none is).
	settled chan struct{}
	armed   bool
}

// Totals counts what this outbox's deliveries of the queues given (all when none is) have done
// since the start, for the metrics.
func (o *Outbox) Totals(queues ...models.OutboxQueue) DeliveryReport {
	if len(queues) == 0 {
		queues = models.OutboxQueues
	}
	o.totals.Lock()
	defer o.totals.Unlock()
	var r DeliveryReport
	for _, q := range queues {
		r.add(o.totals.byQueue[q])
	}
	return r
}

// NewOutbox returns an outbox on store delivering through mailer the drafts it renders with
// compose; key (32 bytes) seals the stored drafts. While the provider refuses the service's
// credentials, a message is retried for refusedKeyRetry, however many attempts that takes: that
// is the operator's to fix.
func NewOutbox(store Store, mailer Mailer, compose Composer, key []byte, refusedKeyRetry time.Duration, now func() time.Time, log *slog.Logger) (*Outbox, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	o := &Outbox{store: store, mailer: mailer, compose: compose, aead: aead, now: now, log: log, kick: make(chan struct{}, 1), kickHooks: make(chan struct{}, 1), refusedKeyRetry: refusedKeyRetry, beat: heartbeat, linger: recordLinger}
	o.claimWanted = map[models.OutboxQueue]*atomic.Bool{models.EmailQueue: {}, models.WebhookQueue: {}}
	o.handed.byQueue = map[models.OutboxQueue][]models.OutboxMessage{}
	o.delivered.byQueue = map[models.OutboxQueue]*unrecorded{models.EmailQueue: {deleting: map[string]int{}}, models.WebhookQueue: {deleting: map[string]int{}}}
	return o, nil
}

func (o *Outbox) clock() time.Time { return o.now().UTC().Truncate(time.Microsecond) }

// EnqueueOptions qualify a queued message.
type EnqueueOptions struct {
	// ExpiresAt, when set, is when the message stops being worth sending (a code's expiry).
	ExpiresAt *time.Time
	// Supersede, when set, drops pending messages queued with the same key: a new code replaces
	// the old one in the queue as it does in the database.
	Supersede string
	// Withhold queues the message like any other but has the worker drop it where it would hand
	// it to the mailer. A request that must not reveal which way it went (an address change to an
	// address another account holds) then does the work of one that sends, in the request and
	// in the worker after it. Its row cannot be told apart without the key: the mark is in what
	// the payload is sealed with (withheldData), which also keeps a worker of an earlier version,
	// which knows no such mark, from opening it and sending it: that worker gives it up unsent.
	Withhold bool
}

// Prepare seals d and returns the row that queues it, due now, for the store to write in the
// transaction of the change that causes it, so an e-mail exists exactly when that change commits
// (and, with opts.Supersede, replaces the pending messages of its key there); the store hands it
// to the worker after the commit (Handoff). The draft is stored sealed, and rendered when it is
// delivered.
func (o *Outbox) Prepare(d Draft, opts EnqueueOptions) (models.OutboxMessage, error) {
	now := o.clock()
	id := newRowID()
	sealed, err := o.seal(id, d, opts.Withhold)
	if err != nil {
		return models.OutboxMessage{}, fmt.Errorf("mail: sealing %s: %w", d.Kind, err)
	}
	return models.OutboxMessage{
		ID: id, Kind: string(d.Kind), Recipient: d.To, Supersede: opts.Supersede, Payload: sealed,
		Status: models.OutboxPending, NextAttemptAt: now, ExpiresAt: opts.ExpiresAt, CreatedAt: now,
	}, nil
}

// Kick wakes the workers to claim what was queued without a hand-off (written by hand): the
// webhook queue's only when this instance delivers webhooks (without them it has nothing to
// send, and an empty claim per kick would be wasted).
func (o *Outbox) Kick() {
	o.claimWanted[models.EmailQueue].Store(true)
	wake(o.kick)
	if o.hooks != nil {
		o.claimWanted[models.WebhookQueue].Store(true)
		wake(o.kickHooks)
	}
}

// kickOf is the channel that wakes queue's worker.
func (o *Outbox) kickOf(queue models.OutboxQueue) chan struct{} {
	if queue == models.WebhookQueue {
		return o.kickHooks
	}
	return o.kick
}

// handoffGrain is what the leases of handed messages are rounded down to, so that the messages of
// a busy moment share one lease, and a heartbeat or a release of them is one statement, not one
// each. The fence holds (see hold): a claim still sets a later lease than any a message had.
const handoffGrain = 100 * time.Millisecond

// HandoffLease is models.OutboxHandoff's: while the workers run, a message queued now is leased to
// this process's worker of its queue, for lease (less than handoffGrain), unless maxHanded wait
// for it already. Webhooks are leased only on an instance that delivers them.
func (o *Outbox) HandoffLease(queue models.OutboxQueue) (time.Time, bool) {
	if !o.running.Load() || (queue == models.WebhookQueue && o.hooks == nil) {
		return time.Time{}, false
	}
	o.handed.Lock()
	waiting := len(o.handed.byQueue[queue])
	o.handed.Unlock()
	if waiting >= maxHanded {
		return time.Time{}, false
	}
	return o.clock().Add(lease).Truncate(handoffGrain), true
}

// Handoff is models.OutboxHandoff's: the messages a transaction queued, once it committed. Those
// it leased to this process wait for their worker, which is woken; for the others, a claim is
// asked for. Messages handed after the workers stopped are released at once, for any instance.
func (o *Outbox) Handoff(rows []models.OutboxMessage) {
	o.handed.Lock()
	var late []models.OutboxMessage
	for _, row := range rows {
		q := row.Queue()
		switch {
		case q == models.WebhookQueue && o.hooks == nil:
			continue // the instances with WEBHOOK_URL claim it
		case row.LockedUntil == nil:
			o.claimWanted[q].Store(true)
		case !o.running.Load():
			late = append(late, row)
		default:
			o.handed.byQueue[q] = append(o.handed.byQueue[q], row)
		}
		wake(o.kickOf(q))
	}
	o.handed.Unlock()
	if len(late) > 0 {
		o.release(context.Background(), late)
	}
}

// takeHanded takes up to batchSize of the messages handed to queue's worker, oldest first: the
// batch, with the lease it holds on them, and apart from it those taken late, with less than two
// heartbeats of their lease left (a worker far behind), which renew must extend before they may
// be sent. So a handed message has the margin of a claimed one: its first beat comes at once
// (keepLeased), and should that fail, the second still comes a beat before the lease ends.
func (o *Outbox) takeHanded(queue models.OutboxQueue) (batch []models.OutboxMessage, h hold, late []models.OutboxMessage) {
	now := o.clock()
	o.handed.Lock()
	defer o.handed.Unlock()
	waiting := o.handed.byQueue[queue]
	if len(waiting) == 0 {
		return nil, hold{}, nil
	}
	h = hold{until: map[string]time.Time{}}
	taken := 0
	for _, row := range waiting {
		if taken == batchSize {
			break
		}
		taken++
		if !o.sendable(*row.LockedUntil, now) {
			late = append(late, row)
			continue
		}
		batch = append(batch, row)
		h.until[row.ID] = *row.LockedUntil
	}
	o.handed.byQueue[queue] = slices.Delete(waiting, 0, taken)
	return batch, h, late
}

// sendable reports whether a message leased until until may be sent at now: with two heartbeats
// of its lease left, one beat may fail and the next still come before the lease ends.
func (o *Outbox) sendable(until, now time.Time) bool { return until.Sub(now) >= 2*o.beat }

// renew extends at once the lease on late, handed messages taken with less than two heartbeats
// of it left, and adds those it extended to batch and its hold h. The others are not sent by
// this worker: when the database could not be reached they are left to their lease, to be
// claimed once it ends, without racing this worker; when their lease ended and another worker
// claimed them, they are that worker's.
func (o *Outbox) renew(ctx context.Context, batch []models.OutboxMessage, h hold, late []models.OutboxMessage) ([]models.OutboxMessage, hold) {
	old := hold{until: make(map[string]time.Time, len(late))}
	for _, row := range late {
		old.until[row.ID] = *row.LockedUntil
	}
	renewed := o.extend(ctx, old)
	now := o.clock()
	for _, row := range late {
		if until, ok := renewed.holds(row.ID); ok && o.sendable(until, now) {
			row.LockedUntil = &until
			batch = append(batch, row)
			h.until[row.ID] = until
		}
	}
	return batch, h
}

// release leaves rows, handed to this process's workers and not sent, to any worker
// (ReleaseOutbox), so that another instance delivers them without waiting for their lease.
func (o *Outbox) release(ctx context.Context, rows []models.OutboxMessage) {
	h := hold{until: map[string]time.Time{}}
	for _, row := range rows {
		h.until[row.ID] = *row.LockedUntil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	for held, ids := range h.byLease() {
		if err := o.store.ReleaseOutbox(ctx, ids, held); err != nil {
			o.log.WarnContext(ctx, "outbox: releasing messages handed to a worker that stopped; their lease will run out", "count", len(ids), "error", err)
		}
	}
}

// wake signals kick without waiting: a kick already waiting covers this one.
func wake(kick chan struct{}) {
	select {
	case kick <- struct{}{}:
	default:
	}
}

// Run delivers due messages until ctx ends, with a worker for each queue (models.OutboxQueue),
// each delivering what is handed to it (Handoff) as it comes, and claiming the rest when kicked
// and every pollInterval. When it ends, what was handed and not sent is released.
func (o *Outbox) Run(ctx context.Context) {
	o.running.Store(true)
	defer func() {
		o.running.Store(false)
		o.handed.Lock()
		var left []models.OutboxMessage
		for q, rows := range o.handed.byQueue {
			left = append(left, rows...)
			o.handed.byQueue[q] = nil
		}
		o.handed.Unlock()
		if len(left) > 0 {
			o.release(ctx, left)
		}
	}()
	var wg sync.WaitGroup
	for queue, kick := range map[models.OutboxQueue]chan struct{}{models.EmailQueue: o.kick, models.WebhookQueue: o.kickHooks} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.work(ctx, queue, kick)
		}()
	}
	wg.Wait()
}

// work delivers the due messages of queue until ctx ends, waking when kicked and every
// pollInterval (webhookIdlePoll for webhooks on an instance without them).
func (o *Outbox) work(ctx context.Context, queue models.OutboxQueue, kick chan struct{}) {
	poll := pollInterval
	if queue == models.WebhookQueue && o.hooks == nil {
		poll = webhookIdlePoll
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	// What was delivered and not yet deleted is deleted at a stop, also when ctx has ended: after
	// the deletion under way, if any (the timer's), which may fail and keep its ids again, and
	// before the service closes the store; the timer may have started another meanwhile.
	defer func() {
		o.awaitDeletions(queue)
		err := o.flushDelivered(ctx, queue)
		o.awaitDeletions(queue)
		if err != nil {
			o.log.ErrorContext(ctx, "outbox: recording deliveries at a stop", "queue", queue.String(), "error", err)
		}
	}()
	claim := true // the first pass claims what waits from before the start
	var outage outageLog
	for {
		// A kick that came while the last pass was running asked for what the pass below will
		// see anyway: forget it, so it does not cost an empty pass afterwards.
		select {
		case <-kick:
		default:
		}
		// One handed batch a pass, then the claim if one is asked for or due: a stream of
		// handed messages never holds back a code's e-mail, a retry, or a dead instance's
		// messages by more than a batch.
		more, err := o.deliverHandedBatch(ctx, queue)
		select {
		case <-ticker.C:
			claim = true
		default:
		}
		claimed := false
		if o.claimWanted[queue].Swap(false) || claim {
			claimed = true
			if _, cerr := o.deliverDue(ctx, queue); err == nil {
				err = cerr
			}
		}
		switch {
		case err != nil && models.Unavailable(err) && ctx.Err() == nil:
			outage.failed(ctx, o.log, queue, time.Now(), err)
		case err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)):
			o.log.ErrorContext(ctx, "outbox: delivering", "queue", queue.String(), "error", err)
		case claimed:
			// A claim went to the database and came back: a pass with nothing to claim or
			// deliver may not have asked it anything.
			outage.ended(ctx, o.log, queue, time.Now())
		}
		claim = false
		if ctx.Err() != nil {
			return
		}
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(kickLinger):
			}
		case <-ticker.C:
			claim = true
		}
	}
}

// DeliveryReport counts what one pass of DeliverDue did: messages delivered, failed (to be
// retried), given up, dropped unsent (replaced by a newer code, or expired), and withheld
// (EnqueueOptions.Withhold).
type DeliveryReport struct {
	Sent, Failed, Abandoned, Dropped, Withheld int
}

// sendParallelism is how many messages of a batch are handed to the mailer at once.
const sendParallelism = 8

// newHTTPTransport is the HTTP transport of the outbox's deliveries (the provider's API, the
// webhook endpoints): Go's default (proxies from the environment, its timeouts), keeping an idle
// connection for each delivery a worker may have in flight to one host. The default keeps two,
// so six of eight parallel deliveries would close their connections and the next ones dial and
// handshake again.
func newHTTPTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = sendParallelism
	return t
}

// DeliverDue delivers every message that is due when it starts (but those another worker has
// claimed), once each, the e-mails and then the webhooks, and reports what happened.
func (o *Outbox) DeliverDue(ctx context.Context) (DeliveryReport, error) {
	var report DeliveryReport
	for _, queue := range []models.OutboxQueue{models.EmailQueue, models.WebhookQueue} {
		pass, err := o.deliverDue(ctx, queue)
		report.add(pass)
		// What this pass or the worker delivered and keeps is deleted before DeliverDue
		// returns, also after an error or a stop, as record would have (a deletion already under
		// way, the timer's, is left to end on its own).
		if err = errors.Join(err, o.flushDelivered(ctx, queue)); err != nil {
			return report, err
		}
	}
	return report, nil
}

// deliverDue delivers every message of queue that is due when it starts (but those another
// worker has claimed), once each, and reports what happened. Messages are claimed a batch at a
// time with one atomic UPDATE, sent in parallel, and their results recorded together, so a busy
// queue costs a few statements per batch, not per message.
func (o *Outbox) deliverDue(ctx context.Context, queue models.OutboxQueue) (DeliveryReport, error) {
	var report DeliveryReport
	if queue == models.WebhookQueue && o.hooks == nil {
		// Nothing to deliver here: the instances with WEBHOOK_URL deliver the webhooks. Claiming
		// them would only hold them back (a lease and an attempt each); what is left is to give
		// up those no instance delivered in their retry time.
		n, err := o.store.GiveUpStaleWebhooks(ctx, o.clock().Add(-WebhookRetry), o.clock(), noWebhooksReason)
		if n > 0 {
			o.log.ErrorContext(ctx, "outbox: gave up webhooks no instance with WEBHOOK_URL delivered in their retry time", "count", n)
		}
		report.Abandoned = int(n)
		o.count(queue, report)
		return report, err
	}
	for ctx.Err() == nil {
		batch, held, err := o.claim(ctx, queue)
		if err != nil {
			return report, err
		}
		if len(batch) == 0 {
			return report, nil
		}
		pass, err := o.deliverBatch(ctx, queue, batch, held)
		report.add(pass)
		if err != nil {
			return report, err
		}
		if len(batch) < batchSize {
			// A short batch took every message that was due when it was claimed, but those
			// another worker holds; what was queued since was handed over, or waits for the next
			// poll (pollInterval).
			return report, nil
		}
	}
	return report, ctx.Err()
}

// deliverHandedBatch delivers one batch of what was handed to queue's worker (Handoff), and
// reports whether it took one (more may wait).
func (o *Outbox) deliverHandedBatch(ctx context.Context, queue models.OutboxQueue) (bool, error) {
	batch, held, late := o.takeHanded(queue)
	if len(late) > 0 {
		batch, held = o.renew(ctx, batch, held, late)
	}
	if len(batch) == 0 {
		return len(late) > 0, nil
	}
	_, err := o.deliverBatch(ctx, queue, batch, held)
	return true, err
}

// deliverBatch delivers batch, held under the lease held, and records the results: the messages
// are sent in parallel (lanes), the lease kept up meanwhile, and the results written together.
func (o *Outbox) deliverBatch(ctx context.Context, queue models.OutboxQueue, batch []models.OutboxMessage, held hold) (DeliveryReport, error) {
	// The lease is kept up until the results are recorded, also after a stop.
	stopBeating := o.keepLeased(context.WithoutCancel(ctx), held)
	outcomes := make([]outcome, len(batch))
	errs := make([]error, len(batch))
	dropSuperseded(batch, outcomes, errs)
	hooks := o.openWebhooks(ctx, batch, outcomes, errs)
	sem := make(chan struct{}, sendParallelism)
	var wg sync.WaitGroup
	for _, lane := range lanes(batch, hooks, outcomes) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, i := range lane {
				if ctx.Err() != nil {
					return // stopping: the rest is left to its lease
				}
				outcomes[i], errs[i] = o.send(ctx, batch[i], hooks[i])
			}
		}()
	}
	wg.Wait()
	// What was delivered is recorded even when the worker is being stopped (Close cancels
	// ctx, and with it the sends still in flight): unrecorded, it would go out again once the
	// lease ran out. A send the stop cut off is no failure: it is left to its lease, for any
	// instance to deliver.
	if ctx.Err() != nil {
		for i := range outcomes {
			// A failure or a give-up (a message on its last attempt) the stop caused.
			if (outcomes[i] == outcomeFailed || outcomes[i] == outcomeAbandoned) && errors.Is(errs[i], context.Canceled) {
				outcomes[i] = 0
			}
		}
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	err := o.record(recordCtx, queue, batch, outcomes, errs, stopBeating())
	cancel()
	if err != nil {
		return DeliveryReport{}, err
	}
	var pass DeliveryReport
	for _, oc := range outcomes {
		pass.count(oc)
	}
	o.count(queue, pass)
	return pass, nil
}

// count adds what a pass over queue did to the totals (Totals).
func (o *Outbox) count(queue models.OutboxQueue, pass DeliveryReport) {
	o.totals.Lock()
	defer o.totals.Unlock()
	if o.totals.byQueue == nil {
		o.totals.byQueue = map[models.OutboxQueue]DeliveryReport{}
	}
	t := o.totals.byQueue[queue]
	t.add(pass)
	o.totals.byQueue[queue] = t
}

// lanes splits the messages of batch still to send (no outcome yet) into lanes, each sent in
// order while the lanes go in parallel (sendParallelism at once): an e-mail is a lane of its
// own; the webhooks about one account to one endpoint share one (hooks are their opened
// payloads), oldest event first, so an endpoint hears of an account's changes in the order they
// were made (while it answers: a delivery retried later arrives after the ones that succeeded
// meanwhile), and of different accounts' changes at once: one lane per endpoint would let a
// receiver 50 ms away take 20 events a second from an instance, however many it had to send.
// Rows queued before lanes per account (no account in their payload) share one lane per
// endpoint.
func lanes(batch []models.OutboxMessage, hooks []*webhookPayload, outcomes []outcome) [][]int {
	var out [][]int
	byKey := map[string]int{}
	for i, row := range batch {
		if outcomes[i] != 0 {
			continue
		}
		if row.Kind != string(KindWebhook) {
			out = append(out, []int{i})
			continue
		}
		key := hooks[i].Endpoint + "\x00" + hooks[i].Account
		lane, ok := byKey[key]
		if !ok {
			lane = len(out)
			byKey[key] = lane
			out = append(out, nil)
		}
		out[lane] = append(out[lane], i)
	}
	for _, lane := range byKey {
		slices.SortStableFunc(out[lane], func(a, b int) int { return batch[a].CreatedAt.Compare(batch[b].CreatedAt) })
	}
	return out
}

// count adds one outcome.
func (r *DeliveryReport) count(oc outcome) {
	switch oc {
	case outcomeSent:
		r.Sent++
	case outcomeFailed:
		r.Failed++
	case outcomeAbandoned:
		r.Abandoned++
	case outcomeDropped:
		r.Dropped++
	case outcomeWithheld:
		r.Withheld++
	}
}

// add adds another report's counts.
func (r *DeliveryReport) add(o DeliveryReport) {
	r.Sent += o.Sent
	r.Failed += o.Failed
	r.Abandoned += o.Abandoned
	r.Dropped += o.Dropped
	r.Withheld += o.Withheld
}

// errSuperseded is why a message a newer one replaced is dropped before it goes out.
var errSuperseded = errors.New("superseded")

// dropSuperseded marks every message of batch that a newer message of the same batch supersedes
// as dropped, so that of several codes for one address claimed together only the live one is
// sent, and the last code a person receives is always the one that works. (Messages that
// supersede are never handed over, models.enqueueOutbox: they are claimed.)
func dropSuperseded(batch []models.OutboxMessage, outcomes []outcome, errs []error) {
	newest := map[string]int{}
	for i, row := range batch {
		if row.Supersede == "" {
			continue
		}
		j, seen := newest[row.Supersede]
		switch {
		case !seen:
			newest[row.Supersede] = i
		case row.CreatedAt.After(batch[j].CreatedAt):
			outcomes[j], errs[j] = outcomeDropped, errSuperseded
			newest[row.Supersede] = i
		default:
			outcomes[i], errs[i] = outcomeDropped, errSuperseded
		}
	}
}

type outcome int

const (
	outcomeSent outcome = iota + 1
	outcomeFailed
	// outcomeAbandoned is a message given up: no retry can deliver it. Its record stays a while,
	// for operators.
	outcomeAbandoned
	// outcomeDropped is a message no longer worth sending (a newer code replaced it, or it
	// expired): nobody needs to know of it, so it goes without a trace.
	outcomeDropped
	// outcomeWithheld is a message queued to be withheld (EnqueueOptions.Withhold), opened and
	// rendered but not handed over; it is recorded exactly as a sent one, in the same statement.
	outcomeWithheld
)

// hold is a worker's lease on the messages of a batch it claimed or was handed: for each message
// it still holds, the locked_until it set on it (the same for a whole claim; a hand-off's
// messages each carry their own). The value fences workers off each other: a claim takes only
// messages whose lease ended by its now, and sets now+lease, later than any lease the message
// had before. So a worker that finds its own value on a message it holds still holds it, and one
// whose lease ran out while it was paused (and the message was claimed again) finds another value
// there and leaves the message to its new holder. A heartbeat keeps only the ids it extended: the
// value it sets may equal one a new holder set at the same instant on a message it lost. (Times
// are stored to the microsecond on both databases, as clock gives them, so they compare exactly.)
type hold struct {
	until map[string]time.Time
}

// holding is the hold on ids, all until until.
func holding(ids []string, until time.Time) hold {
	h := hold{until: make(map[string]time.Time, len(ids))}
	for _, id := range ids {
		h.until[id] = until
	}
	return h
}

// holds reports whether h still holds the message id, and until when.
func (h hold) holds(id string) (time.Time, bool) {
	until, ok := h.until[id]
	return until, ok
}

// byLease groups the messages h holds by their lease, for the statements that name one.
func (h hold) byLease() map[time.Time][]string {
	out := map[time.Time][]string{}
	for id, until := range h.until {
		out[until] = append(out[until], id)
	}
	return out
}

// claim takes a lease on up to batchSize due messages with one statement (ClaimOutbox), so that
// only one worker anywhere gets each.
func (o *Outbox) claim(ctx context.Context, queue models.OutboxQueue) ([]models.OutboxMessage, hold, error) {
	now := o.clock()
	// What this worker delivered and keeps is deleted in the claim's round trip, before it, and
	// what it is deleting meanwhile is left out of it: the claim can never take one of those
	// back, however long the worker has kept it or its deletion has waited.
	sent, deleting := o.takeDelivered(queue)
	batch, err := o.store.ClaimOutbox(ctx, queue, now, now.Add(lease), batchSize, sent, deleting)
	o.deletedDelivered(queue, sent, err == nil)
	if err != nil {
		return nil, hold{}, err
	}
	ids := make([]string, len(batch))
	for i, row := range batch {
		ids[i] = row.ID
	}
	return batch, holding(ids, now.Add(lease)), nil
}

// keepLeased extends the lease h every beat while the batch is delivered, until the returned
// function is called, which returns the lease as it then stands. A batch delivered within a beat
// costs a timer that never fires; a longer one, one UPDATE per beat (per lease it holds). The
// first beat comes as early as the lease of h that began earliest is old (a handed message may be
// taken with up to a beat of its lease gone, takeHanded): then as many beats fit before that
// lease ends as before a claimed one's, and one failed beat never loses a message.
func (o *Outbox) keepLeased(ctx context.Context, h hold) (stop func() hold) {
	var mu sync.Mutex
	stopped := false
	var timer *time.Timer
	first := o.beat
	for _, until := range h.until {
		age := lease - until.Sub(o.clock())
		first = min(first, max(0, o.beat-age))
	}
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(first, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		h = o.extend(ctx, h)
		timer.Reset(o.beat)
	})
	return func() hold {
		// Waits for a heartbeat under way, whose result is the lease now held.
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
		return h
	}
}

// extend moves the lease h on to now+lease, on the messages it still holds, with one call for
// all its leases, and returns the lease held afterwards. When it cannot reach the database the
// lease stays as it was, to be extended at the next beat if it has not run out by then.
func (o *Outbox) extend(ctx context.Context, h hold) hold {
	until := o.clock().Add(lease)
	kept, err := o.store.ExtendOutboxLease(ctx, h.byLease(), until)
	next := hold{until: make(map[string]time.Time, len(h.until))}
	if err != nil {
		if ctx.Err() == nil {
			o.log.WarnContext(ctx, "outbox: extending the lease of a delivery under way", "error", err)
		}
		maps.Copy(next.until, h.until)
		return next
	}
	for _, id := range kept {
		next.until[id] = until
	}
	return next
}

// newRowID is the id of a new outbox row.
func newRowID() string { return uuid.NewString() }

// send hands one claimed message to the mailer, or a webhook to its endpoint.
func (o *Outbox) send(ctx context.Context, row models.OutboxMessage, hook *webhookPayload) (outcome, error) {
	if row.Kind == string(KindWebhook) {
		return o.sendWebhook(ctx, row, hook)
	}
	if row.ExpiresAt != nil && !o.clock().Before(*row.ExpiresAt) {
		return outcomeDropped, errors.New("expired before it could be delivered")
	}
	m, withheld, err := o.open(row)
	if err != nil {
		// No retry can change a payload: it was sealed under another AUTH_SECRET, or its draft
		// does not fit the templates of this version. Someone has to look.
		o.log.ErrorContext(ctx, "outbox: giving up on a message that cannot be opened or rendered", "kind", row.Kind, "id", row.ID, "error", err)
		return outcomeAbandoned, fmt.Errorf("unreadable: %w", err)
	}
	if withheld {
		// Opened and rendered like any other; only the hand-over is left out (Withhold).
		return outcomeWithheld, nil
	}
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err = o.mailer.Send(sendCtx, m)
	cancel()
	if err == nil {
		return outcomeSent, nil
	}
	var permanent *PermanentError
	var credentials *CredentialsError
	refusedKey := errors.As(err, &credentials)
	if errors.As(err, &permanent) || (!refusedKey && row.Attempts >= MaxAttempts) ||
		(refusedKey && !o.clock().Before(row.CreatedAt.Add(o.refusedKeyRetry))) {
		o.log.ErrorContext(ctx, "outbox: giving up on a message", "kind", row.Kind, "id", row.ID, "attempts", row.Attempts, "error", err)
		return outcomeAbandoned, err
	}
	level := slog.LevelWarn
	if refusedKey {
		level = slog.LevelError
	}
	o.log.Log(ctx, level, "outbox: delivery failed, will retry", "kind", row.Kind, "id", row.ID, "attempts", row.Attempts, "error", err)
	return outcomeFailed, err
}

// record writes the results of a batch delivered under the lease h: the sent ones are kept to be
// deleted with those of the batches after it (keepDelivered), the dropped ones deleted in one
// statement, the others updated each with their reason and,
// for failures, the time of the next attempt. A message sent is deleted whether or not h still
// holds it: it went out. Any other result is only recorded while h holds the message; otherwise
// another worker took it over when h ran out (this one was paused past it), and what becomes of
// it is that worker's to record.
//
// A delivered message is deleted, not kept: until it is recorded its id is the provider's
// idempotency key for a retry after a lost answer, and once it is recorded nothing reads it.
// A message given up keeps a record, for operators (GiveUpOutbox says what it keeps).
func (o *Outbox) record(ctx context.Context, queue models.OutboxQueue, batch []models.OutboxMessage, outcomes []outcome, errs []error, h hold) error {
	// What went out is kept for its deletion with the next batches' (keepDelivered: by a timer
	// within recordLinger, or by the next claim), and deleted at once past maxUnrecorded ids.
	var sent []string
	for i, row := range batch {
		if outcomes[i] == outcomeSent || outcomes[i] == outcomeWithheld {
			sent = append(sent, row.ID)
		}
	}
	var deleteErr error
	if len(sent) > 0 && o.keepDelivered(queue, sent) {
		// Failed, they are kept for the next deletion; the other results are recorded anyway.
		deleteErr = o.flushDelivered(ctx, queue)
	}
	dropped := hold{until: map[string]time.Time{}}
	for i, row := range batch {
		if outcomes[i] == outcomeSent || outcomes[i] == outcomeWithheld {
			continue
		}
		held, ok := h.holds(row.ID)
		if !ok {
			o.log.WarnContext(ctx, "outbox: the lease of a message ran out while it was being delivered; another worker has it", "kind", row.Kind, "id", row.ID)
			continue
		}
		switch outcomes[i] {
		case outcomeDropped:
			dropped.until[row.ID] = held
		case outcomeAbandoned:
			if err := o.store.GiveUpOutbox(ctx, row.ID, held, o.clock(), errs[i].Error()); err != nil {
				return errors.Join(deleteErr, err)
			}
		case outcomeFailed:
			wait := Backoff(row.Attempts)
			if row.Kind == string(KindWebhook) {
				wait = WebhookBackoff(row.Attempts)
			}
			next := o.clock().Add(wait)
			if err := o.store.RescheduleOutbox(ctx, row.ID, held, next, errs[i].Error()); err != nil {
				return errors.Join(deleteErr, err)
			}
		}
	}
	for held, ids := range dropped.byLease() {
		if err := o.store.DropOutbox(ctx, ids, held); err != nil {
			return errors.Join(deleteErr, err)
		}
	}
	return deleteErr
}

// keepDelivered keeps the ids of queue's messages just sent for their deletion, setting the
// timer that deletes them recordLinger later (flushLater) unless it is set, and reports whether
// as many are kept as must be deleted at once (maxUnrecorded).
func (o *Outbox) keepDelivered(queue models.OutboxQueue, ids []string) bool {
	o.delivered.Lock()
	defer o.delivered.Unlock()
	u := o.delivered.byQueue[queue]
	u.ids = append(u.ids, ids...)
	o.armLocked(queue, u, o.linger)
	return len(u.ids) >= maxUnrecorded
}

// armLocked sets the timer that deletes what queue's worker keeps after wait, unless it is set.
// o.delivered is held.
func (o *Outbox) armLocked(queue models.OutboxQueue, u *unrecorded, wait time.Duration) {
	if !u.armed {
		u.armed = true
		time.AfterFunc(wait, func() { o.flushLater(queue) })
	}
}

// outageLog is what a worker has said of the database being unavailable: as the requests do, a
// warning with the cause, but once when it begins and then once each lograte.Repeat, not at every
// pass, and a line when the worker's claim gets through again. Its times are the machine's (a
// clock set back by more than lograte.Repeat during an outage makes the next pass warn at once).
type outageLog struct {
	since  time.Time
	said   lograte.Limit
	passes int
}

// failed notes a pass of queue's worker that failed at now because the database is unavailable.
func (l *outageLog) failed(ctx context.Context, log *slog.Logger, queue models.OutboxQueue, now time.Time, err error) {
	l.passes++
	if l.since.IsZero() {
		l.since = now
	}
	if !l.said.Allow(now) {
		return
	}
	log.WarnContext(ctx, "outbox: database unavailable, delivery waits", "queue", queue.String(),
		"since", l.since, "failed_passes", l.passes, "error", err)
}

// ended notes a pass of queue's worker that got through at now, saying so after an outage.
func (l *outageLog) ended(ctx context.Context, log *slog.Logger, queue models.OutboxQueue, now time.Time) {
	if l.since.IsZero() {
		return
	}
	log.InfoContext(ctx, "outbox: database available again, delivery resumes", "queue", queue.String(),
		"unavailable_for", now.Sub(l.since).Round(time.Millisecond), "failed_passes", l.passes)
	l.since, l.passes = time.Time{}, 0
	l.said.Reset()
}

// flushLater is keepDelivered's timer: it deletes what queue's worker keeps (a failed deletion
// puts them back, and sets the timer again while the outbox runs).
func (o *Outbox) flushLater(queue models.OutboxQueue) {
	o.delivered.Lock()
	o.delivered.byQueue[queue].armed = false
	o.delivered.Unlock()
	err := o.flushDelivered(context.Background(), queue)
	switch {
	case err == nil:
	case models.Unavailable(err):
		// Tried again every linger while the outage lasts; said once per lograte.Repeat, a warning
		// like the workers' own about it.
		if o.flushWarned.Allow(time.Now()) {
			o.log.Warn("outbox: database unavailable, recording deliveries waits", "queue", queue.String(), "error", err)
		}
	default:
		o.log.Error("outbox: recording deliveries", "queue", queue.String(), "error", err)
	}
}

// takeDelivered takes the ids queue's worker keeps, for a deletion, and notes them as being
// deleted until deletedDelivered: ids are those, and deleting those with every other id a
// deletion under way holds.
func (o *Outbox) takeDelivered(queue models.OutboxQueue) (ids, deleting []string) {
	o.delivered.Lock()
	defer o.delivered.Unlock()
	u := o.delivered.byQueue[queue]
	ids = u.ids
	u.ids = nil
	if len(ids) > 0 && u.settled == nil {
		u.settled = make(chan struct{})
	}
	for _, id := range ids {
		u.deleting[id]++
	}
	return ids, slices.Collect(maps.Keys(u.deleting))
}

// deletedDelivered ends the deletion of ids that takeDelivered took. Those of a failed deletion
// are kept again, ahead of any kept meanwhile, and while the outbox runs the timer is set again
// for them.
func (o *Outbox) deletedDelivered(queue models.OutboxQueue, ids []string, ok bool) {
	if len(ids) == 0 {
		return
	}
	o.delivered.Lock()
	defer o.delivered.Unlock()
	u := o.delivered.byQueue[queue]
	for _, id := range ids {
		if u.deleting[id]--; u.deleting[id] <= 0 {
			delete(u.deleting, id)
		}
	}
	if len(u.deleting) == 0 && u.settled != nil {
		close(u.settled)
		u.settled = nil
	}
	if ok {
		return
	}
	u.ids = append(slices.Clone(ids), u.ids...)
	if o.running.Load() {
		o.armLocked(queue, u, max(o.linger, pollInterval)) // the database is failing: no hurry
	}
}

// awaitDeletions waits, at most recordTimeout, for the deletions of queue's delivered messages
// under way to end (each is bounded by recordTimeout).
func (o *Outbox) awaitDeletions(queue models.OutboxQueue) {
	o.delivered.Lock()
	settled := o.delivered.byQueue[queue].settled
	o.delivered.Unlock()
	if settled == nil {
		return
	}
	wait := time.NewTimer(recordTimeout)
	defer wait.Stop()
	select {
	case <-settled:
	case <-wait.C:
	}
}

// flushDelivered deletes the messages of queue kept by keepDelivered, now, within recordTimeout
// and also when ctx has ended (a stop: what went out must not go out again). Ids whose deletion
// fails are kept for the next.
func (o *Outbox) flushDelivered(ctx context.Context, queue models.OutboxQueue) error {
	ids, _ := o.takeDelivered(queue)
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	err := o.store.DeleteSentOutbox(ctx, ids)
	o.deletedDelivered(queue, ids, err == nil)
	return err
}

// seal encrypts v's JSON as the payload of the message id, which it is bound to.
func (o *Outbox) seal(id string, v any, withheld bool) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sealed := make([]byte, o.aead.NonceSize(), o.aead.NonceSize()+len(plain)+o.aead.Overhead())
	if _, err := rand.Read(sealed); err != nil {
		return nil, err
	}
	return o.aead.Seal(sealed, sealed, plain, sealedWith(id, withheld)), nil
}

// withheldData is added to the message id in what a withheld payload is sealed with
// (EnqueueOptions.Withhold).
const withheldData = "\x00withheld"

// sealedWith is the additional data a payload of the message id is sealed with: the id, which
// binds the payload to its row, and for a withheld message the mark.
func sealedWith(id string, withheld bool) []byte {
	if withheld {
		return []byte(id + withheldData)
	}
	return []byte(id)
}

// unseal decrypts a claimed row's payload; withheld reports one sealed with
// EnqueueOptions.Withhold.
func (o *Outbox) unseal(row models.OutboxMessage) (plain []byte, withheld bool, err error) {
	ns := o.aead.NonceSize()
	if len(row.Payload) < ns+o.aead.Overhead() {
		return nil, false, errors.New("payload too short")
	}
	nonce, sealed := row.Payload[:ns], row.Payload[ns:]
	plain, err = o.aead.Open(nil, nonce, sealed, sealedWith(row.ID, false))
	if err != nil {
		if plain, err = o.aead.Open(nil, nonce, sealed, sealedWith(row.ID, true)); err != nil {
			return nil, false, err
		}
		withheld = true
	}
	return plain, withheld, nil
}

// openSealed decrypts a claimed row's payload into v.
func (o *Outbox) openSealed(row models.OutboxMessage, v any) error {
	plain, _, err := o.unseal(row)
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

// open decrypts a claimed message's payload and renders it; withheld reports a draft queued with
// EnqueueOptions.Withhold.
func (o *Outbox) open(row models.OutboxMessage) (m Message, withheld bool, err error) {
	plain, withheld, err := o.unseal(row)
	if err != nil {
		return Message{}, false, err
	}
	var stored storedDraft
	if err := json.Unmarshal(plain, &stored); err != nil {
		return Message{}, false, err
	}
	m = Message{Kind: stored.Kind, To: stored.To, Subject: stored.Subject, Text: stored.Text, HTML: stored.HTML, Code: stored.Code, Link: stored.Link}
	if stored.HTML == "" {
		if m, err = o.compose.Render(stored.Draft); err != nil {
			return Message{}, false, err
		}
	}
	m.ID = row.ID
	return m, withheld, nil
}

// storedDraft reads a payload: a Draft, or a whole Message as versions before drafts stored
// them, which is sent as it was rendered then. The reverse does not hold: a worker of
// such a version reads a draft as a message without subject or body, so every instance of a
// deployment moves to drafts together.
type storedDraft struct {
	Draft
	Subject, Text, HTML string
}

// Due counts the pending messages whose delivery is due, claimed by a worker or not.
func (o *Outbox) Due(ctx context.Context) (int64, error) {
	return o.store.CountDueOutbox(ctx, o.clock())
}

// PruneGivenUp deletes at most limit records of messages given up before cutoff, and returns
// how many it deleted; the caller repeats it until fewer than limit go, so that a large backlog
// is deleted in short statements (PruneGivenUpOutbox).
func (o *Outbox) PruneGivenUp(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return o.store.PruneGivenUpOutbox(ctx, cutoff, limit)
}
