package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The outbox's statements: queueing an e-mail inside the transaction of the change that causes
// it, and the worker's claim, lease, record and prune (mail.Outbox decides when, and what the
// results are; these say how they are stored). Times are the caller's clock, as every method
// of Store takes them.

// Outbox statuses. A message is pending until it is delivered, dropped or given up; delivered and
// dropped messages are deleted, so the only other status is that of the record of a message given
// up (versions before these deletions also kept delivered messages, as "sent", and the prune of
// records removes those too). Queries on pending rows write the status and their queue as
// literals (pendingSQL, emailQueueSQL, webhookQueueSQL), not parameters, so that PostgreSQL's generic plans of prepared
// statements can use the partial indexes of each queue's pending rows (OutboxMessage's
// idx_outbox_due_email and idx_outbox_due_webhook, whose tags write the same literals).
const (
	// OutboxPending is a message waiting for delivery, or being delivered under a lease.
	OutboxPending = "pending"
	// OutboxAbandoned is the record of a message given up: no retry could deliver it.
	OutboxAbandoned = "abandoned"

	pendingSQL = "status = '" + OutboxPending + "'"
)

// OutboxHandoff takes the messages a transaction queues straight to a worker of this process once
// the transaction commits (mail.Outbox), so that delivering them costs no claim: each is written
// already leased to that worker, its one attempt counted, as a claim would have left it (all but
// those with a Supersede key: enqueueOutbox). A message whose worker goes away before it is
// delivered (a crash) is claimed by any worker once its lease runs out, as one claimed would be.
type OutboxHandoff interface {
	// HandoffLease returns the lease a message of queue queued now is to carry: until when the
	// worker holds it. ok false (the worker does not run, or has enough waiting) queues it
	// unleased, for any worker's claim.
	HandoffLease(queue OutboxQueue) (until time.Time, ok bool)
	// Handoff is given, once the transaction committed, every message it queued: those with a
	// lease (LockedUntil) are the worker's to deliver; the others wait for a claim.
	Handoff(rows []OutboxMessage)
}

// QueueMail queues m in a transaction of its own: an e-mail that goes with no other change.
func (s *Store) QueueMail(ctx context.Context, m OutboxMessage) error {
	return s.transaction(ctx, func(tx *gorm.DB) error { return enqueueOutbox(tx, &m) })
}

// SetOutboxHandoff has every transaction of the store hand the outbox messages it queues to h
// once it commits; set it before the store is used.
func (s *Store) SetOutboxHandoff(h OutboxHandoff) { s.handoff = h }

// queued is the outbox messages one transaction queued, for the hand-off after its commit.
type queued struct {
	handoff OutboxHandoff
	rows    []OutboxMessage
}

type queuedKey struct{}

// queuedIn is what the transaction tx runs in queued; nil without a hand-off.
func queuedIn(tx *gorm.DB) *queued {
	if tx.Statement == nil || tx.Statement.Context == nil {
		return nil
	}
	q, _ := tx.Statement.Context.Value(queuedKey{}).(*queued)
	return q
}

// Queue is the queue of the message: webhooks have theirs, every other kind is an e-mail.
func (m OutboxMessage) Queue() OutboxQueue {
	return OutboxQueue(m.Kind == OutboxKindWebhook)
}

// enqueueOutbox writes row inside tx, for delivery once tx commits. A row with a Supersede key
// first deletes the pending messages queued with the same key: a new code replaces the old one
// in the queue as it does in the database. row.CreatedAt is the enqueue's now. The statements go
// with execLater, so in a pipelined transaction they cost no round trip of their own; on
// PostgreSQL the delete is a data-modifying WITH of the insert, one statement instead of two (it
// works on the snapshot taken before the insert, so it never sees the row being queued). With a
// hand-off (SetOutboxHandoff) the row is written leased to this process's worker when it takes
// it, and handed to it after the commit; but a row with a Supersede key never is: leased from the
// start, it could not be superseded by the next one's DELETE, and a code replaced while it waited
// in memory (or on another instance) would go out after the live one. Such rows are claimed, and
// the claim reads what is still queued.
func enqueueOutbox(tx *gorm.DB, row *OutboxMessage) error {
	q := queuedIn(tx)
	if q != nil && row.Supersede == "" {
		if until, ok := q.handoff.HandoffLease(row.Queue()); ok {
			row.LockedUntil, row.Attempts = &until, 1
		}
	}
	var with string
	var withArgs []any
	if row.Supersede != "" {
		args := []any{row.Supersede, row.CreatedAt}
		if tx.Dialector.Name() == "postgres" {
			if err := execLater(tx, outboxPlansSQL); err != nil {
				return err
			}
			with, withArgs = "WITH superseded AS ("+supersedeSQL+") ", args
		} else if err := execLater(tx, supersedeSQL, args...); err != nil {
			return fmt.Errorf("models: superseding queued e-mail: %w", err)
		}
	}
	if err := insertWithLater(tx, with, withArgs, row, ""); err != nil {
		return fmt.Errorf("models: queueing e-mail: %w", err)
	}
	if q != nil {
		q.rows = append(q.rows, *row)
	}
	return nil
}

// outboxPlansSQL makes the statements after it in its transaction, on PostgreSQL, find outbox rows
// through the outbox's indexes, not with sequential or bitmap scans, whatever the table's
// statistics say. (In a request's transaction, what follows a code's e-mail are writes of single
// rows by their keys, which it leaves as they were.) The outbox is a queue: nearly empty whenever
// VACUUM or ANALYZE measures it, and filling with dead rows until the next. PostgreSQL plans a
// table measured at no pages with sequential scans, and a prepared statement keeps its plan until
// the table is measured again: every delivery's DELETE then read every page of the growing table
// (1,559 did in an 8 s run, at six times an index's cost). An index scan also marks the dead
// entries it passes, so the scans after it skip them; a bitmap scan does not, and a claim that
// used one walked every dead entry since the last VACUUM (3.5 ms a claim after 10 s of sign-ups).
// The settings end with the transaction.
const outboxPlansSQL = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`

// outboxBookkeepingSQL is outboxPlansSQL for the worker's claims and records of deliveries,
// whose commits also do not wait for the WAL to reach the disk (synchronous_commit off): should
// the database crash in the moment before it does (wal_writer_delay, 200 ms by default), the
// claim or the record is lost, and the message goes out again with the same id, which providers
// and webhook receivers take for the same message (the id is the idempotency key and the
// webhook-id). That is the at-least-once delivery the outbox gives anyway, and it spares a flush
// to disk, the dearest part of a small transaction, on every batch. Everything a request commits
// (a code, its e-mail, a session) still waits for its flush.
const outboxBookkeepingSQL = outboxPlansSQL + `, set_config('synchronous_commit', 'off', true)`

// bookkeeping runs fn, the worker's statements, queued with execLater or scanLater, on
// PostgreSQL after outboxBookkeepingSQL, in one round trip and one implicit transaction
// (inOneRoundTrip); on SQLite, as they come.
func (s *Store) bookkeeping(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return inOneRoundTrip(ctx, s.db, func(tx *gorm.DB) error {
		if s.postgres {
			if err := execLater(tx, outboxBookkeepingSQL); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// supersedeSQL deletes the pending messages queued under a Supersede key. A message a worker is
// sending right now is left to finish: it is already on its way. The key is never empty here;
// saying so lets the planner use the partial index of rows with a key (idx_outbox_supersede_key)
// in a generic plan too, which cannot see the parameter's value.
const supersedeSQL = `DELETE FROM outbox WHERE supersede = ? AND supersede <> '' AND ` + pendingSQL + ` AND (locked_until IS NULL OR locked_until <= ?)`

// forgetGivenUp deletes, inside tx, the records of messages to the recipients that were given up
// (delivered ones are gone already); messages still waiting are left to be delivered.
func forgetGivenUp(tx *gorm.DB, recipients []string) error {
	if err := tx.Where("recipient IN ? AND NOT "+pendingSQL, recipients).Delete(&OutboxMessage{}).Error; err != nil {
		return fmt.Errorf("models: forgetting e-mail given up: %w", err)
	}
	return nil
}

// The claim's statement. It picks the due messages in a subquery and leases them in the UPDATE
// around it; the outer condition repeats the inner one, because on PostgreSQL a row picked may be
// claimed by another worker before this one locks it, and is then left to that worker. On
// PostgreSQL, rows another worker is claiming are skipped rather than waited for (SKIP LOCKED),
// and the ids picked are collected into an array first: PostgreSQL may plan "id IN (subquery)"
// as a nested loop that runs the subquery again for every row it looks at, and each run skips
// the rows this statement has already leased and picks limit more, so the claim took every due
// message however small its limit. ARRAY(subquery) is an init plan, run once. SQLite runs the
// uncorrelated subquery once anyway, and has no row locks to skip: its writers take turns.
// Each queue has its claim, its queue written in as a literal: with a parameter a generic plan
// could not use the queue's own index, and the e-mail claim would walk past every due webhook
// (a dead receiver's backlog) to find the codes.
const (
	claimSet   = `UPDATE outbox SET locked_until = ?, attempts = attempts + 1`
	claimAgain = ` AND ` + pendingSQL + ` AND (locked_until IS NULL OR locked_until <= ?)
 RETURNING id, kind, recipient, supersede, payload, attempts, expires_at, created_at`
)

// claimDue picks up to limit due messages of queue, but those whose deletion is under way
// (passed as excluded: idArray on PostgreSQL, a JSON array on SQLite).
func claimDue(queue OutboxQueue, excluded string) string {
	return `SELECT id FROM outbox WHERE ` + pendingSQL + ` AND ` + queue.sql() + ` AND next_attempt_at <= ? AND (locked_until IS NULL OR locked_until <= ?)
  AND ` + excluded + ` ORDER BY next_attempt_at LIMIT ?`
}

// The claims' exclusion of the ids whose deletion is under way, by database.
const (
	excludedSQLite   = `id NOT IN (SELECT value FROM json_each(?))`
	excludedPostgres = `id <> ALL(CAST(? AS uuid[]))`
)

// The claims, by database and queue.
var (
	claimSQLite = map[OutboxQueue]string{
		EmailQueue:   claimSet + ` WHERE id IN (` + claimDue(EmailQueue, excludedSQLite) + `)` + claimAgain,
		WebhookQueue: claimSet + ` WHERE id IN (` + claimDue(WebhookQueue, excludedSQLite) + `)` + claimAgain,
	}
	claimPostgres = map[OutboxQueue]string{
		EmailQueue:   claimSet + ` WHERE id = ANY(ARRAY(` + claimDue(EmailQueue, excludedPostgres) + ` FOR UPDATE SKIP LOCKED))` + claimAgain,
		WebhookQueue: claimSet + ` WHERE id = ANY(ARRAY(` + claimDue(WebhookQueue, excludedPostgres) + ` FOR UPDATE SKIP LOCKED))` + claimAgain,
	}
)

// OutboxKindWebhook is the kind of an outbox row that delivers a webhook (one event to one
// endpoint); every other kind is an e-mail.
const OutboxKindWebhook = "webhook"

// OutboxQueue is one of the outbox's two queues, each claimed by a worker of its own: e-mails
// and webhooks. A webhook receiver that answers slowly, or not at all, then holds back other
// webhooks only, never a sign-in code.
type OutboxQueue bool

// The outbox's queues.
const (
	EmailQueue   OutboxQueue = false
	WebhookQueue OutboxQueue = true
)

// OutboxQueues are both queues.
var OutboxQueues = []OutboxQueue{EmailQueue, WebhookQueue}

// The queues' conditions, as literals (the partial indexes' tags on OutboxMessage repeat them).
const (
	emailQueueSQL   = "kind <> '" + OutboxKindWebhook + "'"
	webhookQueueSQL = "kind = '" + OutboxKindWebhook + "'"
)

// sql is the queue's condition on outbox rows.
func (q OutboxQueue) sql() string {
	if q == WebhookQueue {
		return webhookQueueSQL
	}
	return emailQueueSQL
}

// String names the queue, for logs and metrics.
func (q OutboxQueue) String() string {
	if q == WebhookQueue {
		return "webhook"
	}
	return "email"
}

// ClaimOutbox takes a lease until until on up to limit messages of queue due at now, the
// earliest due first, with one conditional UPDATE, so that only one worker anywhere gets each,
// and returns them with their attempts counted (the claim is one). A message is due when it is
// pending, its next attempt is at or before now and no lease on it runs past now.
//
// until fences workers off each other (mail's hold): it must be later than now, and a worker
// finds it still holds a message while the message's locked_until is the until it set.
//
// The messages sent, delivered by the worker and not yet deleted (DeleteSentOutbox), are
// deleted first, in the same round trip and implicit transaction on PostgreSQL: the claim can
// never take one of them back, whatever became of its lease meanwhile. Nor does it take the
// messages deleting names, whose deletion is under way elsewhere (a deletion held up by a hung
// database may outlive their lease, and then fail): it leaves them to that deletion, without
// waiting for the row locks it may hold.
func (s *Store) ClaimOutbox(ctx context.Context, queue OutboxQueue, now, until time.Time, limit int, sent, deleting []string) ([]OutboxMessage, error) {
	claim, excluded := claimPostgres[queue], idArray(deleting)
	if !s.postgres {
		list, err := json.Marshal(append([]string{}, deleting...)) // [] rather than null
		if err != nil {
			return nil, err
		}
		claim, excluded = claimSQLite[queue], string(list)
	}
	var batch []OutboxMessage
	err := s.bookkeeping(ctx, func(tx *gorm.DB) error {
		if len(sent) > 0 {
			if err := deleteSent(tx, sent); err != nil {
				return err
			}
		}
		return scanLater(tx, &batch, claim, until, now, now, excluded, limit, now)
	})
	if err != nil {
		return nil, fmt.Errorf("models: claiming the outbox's %s queue: %w", queue, err)
	}
	return batch, nil
}

// ExtendOutboxLease moves leases on to until: held maps each lease to the messages held under
// it. It returns the ids it extended: those still pending with their very lease. A message whose
// lease ran out and was claimed again carries another lease, and stays its new holder's. On
// PostgreSQL every lease's UPDATE goes in one round trip, as one implicit transaction: a worker
// far behind may hold a lease for each 100 ms of hand-offs.
func (s *Store) ExtendOutboxLease(ctx context.Context, held map[time.Time][]string, until time.Time) ([]string, error) {
	var kept []string
	var err error
	if s.postgres {
		rows := make([][]struct{ ID string }, len(held))
		err = s.bookkeeping(ctx, func(tx *gorm.DB) error {
			i := 0
			for lease, ids := range held {
				if err := scanLater(tx, &rows[i], extendOutboxSQL, until, idArray(ids), lease); err != nil {
					return err
				}
				i++
			}
			return nil
		})
		for _, extended := range rows {
			for _, r := range extended {
				kept = append(kept, r.ID)
			}
		}
	} else {
		for lease, ids := range held {
			var extended []string
			err = s.db.WithContext(ctx).Raw(`UPDATE outbox SET locked_until = ? WHERE id IN ? AND `+pendingSQL+` AND locked_until = ? RETURNING id`,
				until, ids, lease).Scan(&extended).Error
			if err != nil {
				break
			}
			kept = append(kept, extended...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("models: extending the lease on e-mail: %w", err)
	}
	return kept, nil
}

// The worker's statements on messages it holds, on PostgreSQL (the ids are one idArray).
const (
	extendOutboxSQL  = `UPDATE outbox SET locked_until = ? WHERE id = ANY(CAST(? AS uuid[])) AND ` + pendingSQL + ` AND locked_until = ? RETURNING id`
	releaseOutboxSQL = `UPDATE outbox SET locked_until = NULL, attempts = attempts - 1 WHERE id = ANY(CAST(? AS uuid[])) AND ` + pendingSQL + ` AND locked_until = ?`
	dropOutboxSQL    = `DELETE FROM outbox WHERE id = ANY(CAST(? AS uuid[])) AND ` + pendingSQL + ` AND locked_until = ?`
	deleteSentSQL    = `DELETE FROM outbox WHERE id = ANY(CAST(? AS uuid[]))`
)

// idArray is ids as one PostgreSQL uuid[] parameter (CAST(? AS uuid[])): an IN list is a
// different statement for every number of ids, each prepared and planned on every connection
// before its plan is cached.
func idArray(ids []string) string { return "{" + strings.Join(ids, ",") + "}" }

// ReleaseOutbox leaves the messages ids held until held, handed to a worker that stops before it
// sent them, to any worker: their lease ends, and the attempt it counted is taken back.
func (s *Store) ReleaseOutbox(ctx context.Context, ids []string, held time.Time) error {
	var err error
	if s.postgres {
		err = s.bookkeeping(ctx, func(tx *gorm.DB) error {
			return execLater(tx, releaseOutboxSQL, idArray(ids), held)
		})
	} else {
		err = s.db.WithContext(ctx).Model(&OutboxMessage{}).Where("id IN ? AND status = ? AND locked_until = ?", ids, OutboxPending, held).
			Updates(map[string]any{"locked_until": nil, "attempts": gorm.Expr("attempts - 1")}).Error
	}
	if err != nil {
		return fmt.Errorf("models: releasing e-mail: %w", err)
	}
	return nil
}

// The results of a delivery. A message sent is deleted whether or not its lease still holds: it
// went out. Any other result is written only while the message is pending under the lease held,
// the locked_until its worker set; otherwise another worker took it over when that lease ran out
// (the first was paused past it), and what becomes of it is that worker's to record.

// DeleteSentOutbox deletes the messages ids, delivered. A delivered message is not kept: until
// it is recorded its id is the provider's idempotency key for a retry after a lost answer, and
// once it is recorded nothing reads it.
//
// On PostgreSQL the ids go as one array parameter (idArray), under outboxBookkeepingSQL.
func (s *Store) DeleteSentOutbox(ctx context.Context, ids []string) error {
	if err := s.bookkeeping(ctx, func(tx *gorm.DB) error { return deleteSent(tx, ids) }); err != nil {
		return fmt.Errorf("models: recording deliveries: %w", err)
	}
	return nil
}

// deleteSent deletes the delivered messages ids in tx, queued on PostgreSQL (one array
// parameter, idArray), at once on SQLite.
func deleteSent(tx *gorm.DB, ids []string) error {
	if tx.Dialector.Name() == "postgres" {
		return execLater(tx, deleteSentSQL, idArray(ids))
	}
	return tx.Where("id IN ?", ids).Delete(&OutboxMessage{}).Error
}

// DropOutbox deletes the messages ids held until held, no longer worth sending (replaced by a
// newer code, or expired): nobody needs to know of them, so they go without a trace.
func (s *Store) DropOutbox(ctx context.Context, ids []string, held time.Time) error {
	var err error
	if s.postgres {
		err = s.bookkeeping(ctx, func(tx *gorm.DB) error {
			return execLater(tx, dropOutboxSQL, idArray(ids), held)
		})
	} else {
		err = s.db.WithContext(ctx).Where("id IN ? AND status = ? AND locked_until = ?", ids, OutboxPending, held).Delete(&OutboxMessage{}).Error
	}
	if err != nil {
		return fmt.Errorf("models: dropping e-mail: %w", err)
	}
	return nil
}

// RescheduleOutbox records a failed delivery of the message id held until held: its lease ends,
// the next attempt is at next, and reason is kept as its last error, cut to the size of the
// column.
func (s *Store) RescheduleOutbox(ctx context.Context, id string, held, next time.Time, reason string) error {
	err := s.heldOutbox(ctx, id, held).Updates(map[string]any{"next_attempt_at": next, "locked_until": nil,
		"last_error": lastError(reason)}).Error
	if err != nil {
		return fmt.Errorf("models: rescheduling e-mail: %w", err)
	}
	return nil
}

// GiveUpOutbox turns the message id held until held into the record of a message given up at
// at, for reason (kept as its last error, cut to the size of the column). The record keeps what
// an operator needs to know, and no secret: the payload goes (it may hold a live code), and so
// does the supersede key, which nothing reads once the message has left the queue.
func (s *Store) GiveUpOutbox(ctx context.Context, id string, held, at time.Time, reason string) error {
	err := s.heldOutbox(ctx, id, held).Updates(map[string]any{"status": OutboxAbandoned, "payload": []byte{}, "supersede": "",
		"locked_until": nil, "last_error": lastError(reason), "given_up_at": at}).Error
	if err != nil {
		return fmt.Errorf("models: recording e-mail given up: %w", err)
	}
	return nil
}

// GiveUpStaleWebhooks turns into records of deliveries given up, at at, the pending webhooks
// queued before cutoff that no worker holds: what an instance without WEBHOOK_URL does with the
// webhooks no instance delivered in their retry time, without claiming (and so holding back)
// any younger one. It returns how many it gave up.
func (s *Store) GiveUpStaleWebhooks(ctx context.Context, cutoff, at time.Time, reason string) (int64, error) {
	res := s.db.WithContext(ctx).Model(&OutboxMessage{}).
		Where(pendingSQL+" AND "+webhookQueueSQL+" AND created_at < ? AND (locked_until IS NULL OR locked_until <= ?)", cutoff, at).
		Updates(map[string]any{"status": OutboxAbandoned, "payload": []byte{}, "supersede": "",
			"locked_until": nil, "last_error": lastError(reason), "given_up_at": at})
	if res.Error != nil {
		return 0, fmt.Errorf("models: giving up stale webhooks: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// heldOutbox selects the message id while it is pending under the lease held.
func (s *Store) heldOutbox(ctx context.Context, id string, held time.Time) *gorm.DB {
	return s.db.WithContext(ctx).Model(&OutboxMessage{}).Where("id = ? AND status = ? AND locked_until = ?", id, OutboxPending, held)
}

// CountDueOutbox counts the pending messages whose delivery is due at now, leased or not.
func (s *Store) CountDueOutbox(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	for _, q := range OutboxQueues {
		var due int64
		err := s.db.WithContext(ctx).Model(&OutboxMessage{}).
			Where(pendingSQL+" AND "+q.sql()+" AND next_attempt_at <= ?", now).Count(&due).Error
		if err != nil {
			return 0, fmt.Errorf("models: counting the outbox's messages due: %w", err)
		}
		n += due
	}
	return n, nil
}

// OutboxBacklog is what waits in one queue of the outbox: how many messages are pending, and
// when the oldest of them was queued (zero when none is).
type OutboxBacklog struct {
	Pending int64
	Oldest  time.Time
}

// Backlog reports what waits in queue, for the metrics: a count of its pending messages and the
// oldest one's time, both over its pending messages only (its partial index). The time is read
// as a column, not as MIN(), which SQLite would answer as text.
func (s *Store) Backlog(ctx context.Context, queue OutboxQueue) (OutboxBacklog, error) {
	var b OutboxBacklog
	pending := func() *gorm.DB {
		return s.db.WithContext(ctx).Model(&OutboxMessage{}).Where(pendingSQL + " AND " + queue.sql())
	}
	if err := pending().Count(&b.Pending).Error; err != nil {
		return b, fmt.Errorf("models: counting the outbox backlog: %w", err)
	}
	var oldest []time.Time
	if err := pending().Order("created_at").Limit(1).Pluck("created_at", &oldest).Error; err != nil {
		return b, fmt.Errorf("models: reading the outbox backlog: %w", err)
	}
	if len(oldest) == 1 {
		b.Oldest = oldest[0].UTC()
	}
	return b, nil
}

// PruneGivenUpOutbox deletes at most limit records of messages given up before cutoff, and
// returns how many it deleted; the caller repeats it until fewer than limit go, so that a large
// backlog is deleted in short statements. Records without the time they were given up (an
// earlier version's, delivered ones included) go by the time they were queued. A record never
// changes, so the rows picked need no second look.
func (s *Store) PruneGivenUpOutbox(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM outbox WHERE id IN (SELECT id FROM outbox
 WHERE NOT `+pendingSQL+` AND COALESCE(given_up_at, created_at) < ? LIMIT ?)`, cutoff, limit)
	if res.Error != nil {
		return res.RowsAffected, fmt.Errorf("models: pruning the records of e-mail given up: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// lastError is s cut to the size of outbox.last_error (OutboxMessage.LastError), at most 500
// bytes and so at most 500 characters. The cut falls between characters: PostgreSQL refuses text
// that is not UTF-8, and a failure that could not be recorded would be retried for ever.
func lastError(s string) string {
	const size = 500
	if len(s) <= size {
		return s
	}
	cut := size
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
