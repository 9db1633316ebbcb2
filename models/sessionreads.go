package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// sessionFrom is the session query from its columns on: a session, found by the hash of its token
// through the unique index, joined to its live user. It is the one query of every protected
// request that the cookie cache cannot answer; sessionQuery asks it for one hash, and on
// PostgreSQL sessionBatchQueries for many requests at once.
const sessionFrom = ` s.id, s.user_id, s.expires_at, s.absolute_expires_at, s.ip_address, s.user_agent,
 s.created_at, s.updated_at, u.email, u.name, u.email_verified, u.created_at, u.updated_at, u.role,
 u.image, s.impersonated_by
 FROM sessions s JOIN users u ON u.id = s.user_id
 WHERE u.deleted_at IS NULL AND s.token`

// sessionQuery is the session query for one token hash, as SQLite's stmtReader prepares it.
const sessionQuery = "SELECT" + sessionFrom + " = ?"

// sessionColumns are the scan targets of the session query's columns after the hash and before
// the nullable ones (the image, the impersonator), which each database scans its own way.
func sessionColumns(sess *Session, user *User) []any {
	return []any{&sess.ID, &sess.UserID, &sess.ExpiresAt, &sess.AbsoluteExpiresAt, &sess.IPAddress, &sess.UserAgent,
		&sess.CreatedAt, &sess.UpdatedAt, &user.Email, &user.Name, &user.EmailVerified, &user.CreatedAt, &user.UpdatedAt,
		&user.Role}
}

// sessionReaders are the readers of the session of one token hash and its user (ReadSession),
// which return sql.ErrNoRows when there is none. They bypass GORM: on the hottest path, GORM's
// statement building, reflection and rendering of the SQL for its logger cost more CPU than the
// database's own work. Exactly one is set, by the database.
type sessionReaders struct {
	batch *batchReader
	stmt  *stmtReader
}

// newSessionReader picks the reader for the database, which counts its queries in queries. On
// PostgreSQL it is a batchReader, which queries through pgx itself (its statement cache prepares
// the query once per connection, and its scanning skips database/sql's conversions); elsewhere it
// is a stmtReader.
func newSessionReader(db *gorm.DB, queries *atomic.Int64) (sessionReaders, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return sessionReaders{}, err
	}
	if db.Dialector.Name() == "postgres" {
		r := &batchReader{db: sqlDB, queries: queries}
		r.timeout.Store(int64(sessionReadTimeout))
		return sessionReaders{batch: r}, nil
	}
	stmt, err := sqlDB.Prepare(sessionQuery)
	if err != nil {
		return sessionReaders{}, fmt.Errorf("models: preparing the session query: %w", err)
	}
	return sessionReaders{stmt: &stmtReader{stmt: stmt, queries: queries}}, nil
}

// stmtReader runs sessionQuery as a statement prepared once through database/sql, which
// prepares it again on each pooled connection: one query per read.
type stmtReader struct {
	stmt    *sql.Stmt
	queries *atomic.Int64
}

func (r *stmtReader) read(ctx context.Context, hash string, sess *Session, user *User) error {
	r.queries.Add(1)
	var image, impersonator sql.NullString
	if err := r.stmt.QueryRowContext(ctx, hash).Scan(append(sessionColumns(sess, user), &image, &impersonator)...); err != nil {
		return err
	}
	if image.Valid {
		user.Image = &image.String
	}
	if impersonator.Valid {
		sess.ImpersonatedBy = &impersonator.String
	}
	return nil
}

// sessionBatchQueries are the session queries for many token hashes at once, each row led by its
// hash: the one at i takes up to 1<<i hashes as that many parameters (`= $1` for one, `IN ($1, …)`
// for more), and a batch is padded to its size class by repeating its last hash, which the unique
// index on sessions.token then probes once. The fixed lists are what keeps PostgreSQL from
// planning the query on every run: with one array parameter (`= ANY($1)`) the plan of a known
// array length always looks cheaper than the prepared generic plan, so every read was planned
// again, which measured here as 135 µs of the backend's CPU for a read of one hash against 44 µs
// for `= $1`, and 170 against 75 µs for eight hashes.
var sessionBatchQueries = func() []string {
	var queries []string
	for n := 1; n < 2*sessionReadBatch; n *= 2 { // up to the least power of two >= sessionReadBatch
		params := make([]string, n)
		for i := range params {
			params[i] = "$" + strconv.Itoa(i+1)
		}
		if n == 1 {
			queries = append(queries, "SELECT s.token,"+sessionFrom+" = $1")
		} else {
			queries = append(queries, "SELECT s.token,"+sessionFrom+" IN ("+strings.Join(params, ", ")+")")
		}
	}
	return queries
}()

// sessionBatchArgs returns the query of sessionBatchQueries for hashes (1 to sessionReadBatch of
// them) and its arguments, hashes padded to the query's size class with the last hash.
func sessionBatchArgs(hashes []string) (string, []any) {
	if len(hashes) == 0 {
		panic("models: a session read batch without hashes")
	}
	class := bits.Len(uint(len(hashes) - 1)) // the least i with 1<<i >= len(hashes)
	args := make([]any, 1<<class)
	for i := range args {
		args[i] = hashes[min(i, len(hashes)-1)]
	}
	return sessionBatchQueries[class], args
}

// Bounds of the batched session reads on PostgreSQL.
const (
	// sessionReadBatch caps the hashes of one query. One query runs at a time until a full batch
	// waits: measured on 2 cores at 32 connections, one query in flight gave 22,000 bearer reads/s
	// at p99 4.1 ms, two gave 19,000 at 5.3 ms and four 16,000 at 6.2 ms, because every query in
	// flight makes the batches smaller and costs PostgreSQL a backend's wake-up and executor start.
	sessionReadBatch = 64
	// sessionReadsInFlight caps the batch queries that run at once when full batches wait.
	sessionReadsInFlight = 8
	// sessionReadQueue caps the reads waiting for a query. Past it, while the database does not
	// keep up, a read fails at once instead of adding to a line that only grows. Reads whose
	// requests stopped waiting do not count; the next query's turn drops them.
	sessionReadQueue = 4096
	// sessionReadTimeout bounds a batch query, which no single request's cancellation may stop
	// because it answers several; each request still stops waiting when its own context ends.
	sessionReadTimeout = 10 * time.Second
)

// ErrSessionReadsBusy means sessionReadQueue reads already wait for the database: it does not
// keep up, which is its unavailability for the moment (503, not 500).
var ErrSessionReadsBusy = fmt.Errorf("models: too many session reads are waiting for the database: %w", ErrUnavailable)

// sessionRead is one request's wait for its session row.
type sessionRead struct {
	hash string
	// sess and user are the request's own: the query writes the row found into them, so a read
	// allocates no copy of it. It writes them only once it has claimed the read (state), and a
	// request that stops waiting first has abandoned it, so nothing is written into them after
	// read returned.
	sess  *Session
	user  *User
	err   error // sql.ErrNoRows when the hash matches no live session
	done  chan struct{}
	state atomic.Int32 // readWaiting, then readAnswered (done is closed) or readAbandoned
	// taken means a query has it (under batchReader.mu); a read abandoned before that is
	// dropped from the queue, and no query asks for it.
	taken bool
}

// The states of a sessionRead: each moves once, from readWaiting to one of the others.
const (
	readWaiting int32 = iota
	readAnswered
	readAbandoned
)

// deliver claims p, and when it still waits writes the row into its request's sess and user, and
// wakes it. It reports whether it did.
func (p *sessionRead) deliver(sess *Session, user *User) bool {
	if !p.state.CompareAndSwap(readWaiting, readAnswered) {
		return false
	}
	defer close(p.done) // even if the copy panics: the request must wake
	p.err = errSessionNotCopied
	*p.sess, *p.user = *sess, *user
	p.err = nil
	return true
}

// errSessionNotCopied is the answer of a read whose row could not be copied to it.
var errSessionNotCopied = errors.New("models: the session row could not be handed to its request")

// fail claims p, and when it still waits wakes it with err.
func (p *sessionRead) fail(err error) {
	if p.state.CompareAndSwap(readWaiting, readAnswered) {
		p.err = err
		close(p.done)
	}
}

// batchReader answers session reads on PostgreSQL by gathering the hashes that arrive while a
// query runs into the next query, like a group commit: with no query running a read starts its
// own at once, so a lone request waits for nothing, while under load one round trip, one wake-up
// of a PostgreSQL backend and one executor start serve many requests. Another query starts
// beside the running ones only when a full batch waits.
//
// Every read is answered by a query that starts after the read arrived, so a session signed out
// before a request came is never seen by it: revocation is exactly as immediate as with one
// query per request.
type batchReader struct {
	db      *sql.DB
	queries *atomic.Int64
	timeout atomic.Int64 // of a batch query, in nanoseconds; sessionReadTimeout but in tests
	// queryHook, set only by tests, runs in place of query.
	queryHook func(ctx context.Context, hashes []string, found func(string, *Session, *User)) error

	mu       sync.Mutex
	queue    []*sessionRead
	waiting  int // reads queued and not abandoned (an abandoned one is uncounted by its own request)
	inFlight int
}

// read returns the session and user of hash; sql.ErrNoRows when there is none; or an error of
// the database, ErrSessionReadsBusy, or ctx's error when ctx ends first.
func (r *batchReader) read(ctx context.Context, hash string, sess *Session, user *User) error {
	p := &sessionRead{hash: hash, sess: sess, user: user, done: make(chan struct{})}
	r.mu.Lock()
	if r.waiting >= sessionReadQueue {
		r.mu.Unlock()
		return ErrSessionReadsBusy
	}
	r.queue = append(r.queue, p)
	r.waiting++
	var batch []*sessionRead
	if r.inFlight == 0 || r.waiting >= sessionReadBatch && r.inFlight < sessionReadsInFlight {
		if batch = r.take(); len(batch) > 0 {
			r.inFlight++
		}
	}
	r.mu.Unlock()
	if len(batch) > 0 {
		// The queries run on their own goroutine, so that this request, like every other,
		// stops waiting when its context ends.
		go r.run(batch)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		if !p.state.CompareAndSwap(readWaiting, readAbandoned) {
			// A query has claimed the read and is writing its answer, which wakes it at once.
			<-p.done
			return p.err
		}
		r.mu.Lock()
		if !p.taken {
			r.waiting--
		}
		r.mu.Unlock()
		return ctx.Err()
	}
	return p.err
}

// take removes the oldest reads, at most sessionReadBatch of those still waited for, from the
// queue, and drops the reads no one waits for any more on the way. r.mu is held.
func (r *batchReader) take() []*sessionRead {
	var batch []*sessionRead
	i := 0
	for ; i < len(r.queue) && len(batch) < sessionReadBatch; i++ {
		if p := r.queue[i]; p.state.Load() != readAbandoned {
			p.taken = true
			r.waiting--
			batch = append(batch, p)
		}
	}
	rest := copy(r.queue, r.queue[i:])
	clear(r.queue[rest:])
	r.queue = r.queue[:rest]
	return batch
}

// run answers batch, then the reads queued meanwhile, until none wait.
func (r *batchReader) run(batch []*sessionRead) {
	for len(batch) > 0 {
		r.answer(batch)
		r.mu.Lock()
		batch = r.take()
		if len(batch) == 0 {
			r.inFlight--
		}
		r.mu.Unlock()
	}
}

// answer runs one query for batch and wakes each of its reads, with an error if the query failed,
// or even panicked: a read must never hang, nor take a failure for "no session". The query
// belongs to no single request, so it takes no request's context: none's cancellation stops it,
// and none's values (its request ID, say) are attached to it.
func (r *batchReader) answer(batch []*sessionRead) {
	var err error
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("models: the session query panicked: %v", v)
		}
		// Every read not answered with its row: none, or the query's failure. A row already
		// handed out stays answered; it was read whole, by a query that began after its read.
		if err == nil {
			err = sql.ErrNoRows
		}
		for _, p := range batch {
			p.fail(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.timeout.Load()))
	defer cancel()
	byHash := make(map[string][]*sessionRead, len(batch))
	hashes := make([]string, 0, len(batch))
	for _, p := range batch {
		if byHash[p.hash] == nil {
			hashes = append(hashes, p.hash)
		}
		byHash[p.hash] = append(byHash[p.hash], p)
	}
	query := r.query
	if r.queryHook != nil {
		query = r.queryHook
	}
	err = query(ctx, hashes, func(hash string, sess *Session, user *User) {
		for _, p := range byHash[hash] {
			p.deliver(sess, user) // false for a read abandoned, or answered by a first try
		}
	})
}

// query runs a query of sessionBatchQueries on a connection of the pool through pgx and calls
// found for each row.
func (r *batchReader) query(ctx context.Context, hashes []string, found func(string, *Session, *User)) error {
	for attempt := 1; ; attempt++ {
		broken, err := r.queryOnce(ctx, hashes, found)
		// The query only reads, so it may run again. It does when it failed because its
		// connection was dead (the server ended it: a restart, a failover), which the pool only
		// learns by using it: without another try every pooled connection would cost one request
		// a 503 after the database came back. A dead connection is discarded, so the tries are
		// bounded by the pool's size; a database that is down fails at connecting, at once.
		if err == nil || !broken || attempt > poolSize || ctx.Err() != nil {
			return err
		}
	}
}

// queryOnce runs a query of sessionBatchQueries once on a connection of the pool through pgx,
// calls found for each row, and reports whether the connection is dead after a failure.
func (r *batchReader) queryOnce(ctx context.Context, hashes []string, found func(string, *Session, *User)) (broken bool, err error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	r.queries.Add(1)
	err = conn.Raw(func(driverConn any) error {
		pc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("models: unexpected PostgreSQL driver %T", driverConn)
		}
		err := r.scan(ctx, pc, hashes, found)
		if err != nil && pc.Conn().IsClosed() {
			broken = true
			// database/sql discards a connection whose use ended in ErrBadConn.
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		return err
	})
	return broken, err
}

// scan runs the query of sessionBatchQueries for hashes on pc and calls found for each row.
func (r *batchReader) scan(ctx context.Context, pc *stdlib.Conn, hashes []string, found func(string, *Session, *User)) error {
	query, args := sessionBatchArgs(hashes)
	rows, err := pc.Conn().Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		hash string
		sess Session
		user User
	)
	dest := append(append([]any{&hash}, sessionColumns(&sess, &user)...), &user.Image, &sess.ImpersonatedBy)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		found(hash, &sess, &user)
	}
	return rows.Err()
}
