package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Pipelined transactions.
//
// Most statements of a sign-in are writes whose only result is that they worked: the code, its
// e-mail, the session. Inside inTransaction such statements, handed to execLater, are not sent one at a
// time. On PostgreSQL they wait and go to the server together, in one round trip, with the next
// statement whose result is read (execNow, scanNow, or any ordinary GORM statement, which sends what
// waits first) or with the COMMIT; scanLater's rows come back with them. They still run in the
// order they were given and in one transaction, so only the number of round trips changes: a
// sign-in's transaction takes two instead of nine.
// An error of a waiting statement is reported by whatever sent it, and fails the transaction.
// On SQLite, which runs in the process, execLater runs the statement at once.

// pipeline is the state of one pipelined transaction on PostgreSQL.
type pipeline struct {
	pool      *sql.DB
	conn      *sql.Conn // taken from pool; replaced when found dead before its first answer
	translate func(error) error
	log       logger.Interface // GORM's logger, which reports slow statements
	waiting   []pendingStatement
	begun     bool  // BEGIN has been sent: the transaction must end with COMMIT or ROLLBACK
	answered  bool  // a round trip on conn succeeded: a failure after it is never sent again
	failed    error // a round trip failed: the transaction is over, whatever fn does next
}

type pendingStatement struct {
	sql  string
	vars []any
	// scan, when set, reads the statement's rows (scanLater).
	scan func(pgx.Rows) error
}

type pipelineKey struct{}

// inTransaction runs fn in a transaction, committed when fn returns nil and rolled back otherwise
// (or when fn panics). fn must use only the tx it is given, and must not start a transaction in it.
// On PostgreSQL, when the connection breaks after the COMMIT was sent, the error is
// ErrCommitUnknown: the transaction may have committed.
func inTransaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) (err error) {
	if db.Dialector.Name() != "postgres" {
		return db.WithContext(ctx).Transaction(fn)
	}
	p, tx, err := openPipeline(ctx, db, pendingStatement{sql: "BEGIN"})
	if err != nil {
		return err
	}
	defer p.release()
	committed := false
	defer func() {
		if !committed && p.begun {
			p.rollback(ctx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if len(p.waiting) == 1 && !p.begun {
		committed = true // nothing was done: there is nothing to commit
		return nil
	}
	p.waiting = append(p.waiting, pendingStatement{sql: "COMMIT"})
	tag, err := p.send(ctx)
	if err != nil {
		return err
	}
	committed = true
	if tag.String() != "COMMIT" {
		// PostgreSQL answers COMMIT with ROLLBACK when an earlier statement failed: fn went on
		// after an error it did not return.
		return errRolledBack
	}
	return nil
}

// inOneRoundTrip runs fn, whose statements must all be queued (execLater, scanLater), on
// PostgreSQL as one pipeline sent in one round trip, without BEGIN and COMMIT: PostgreSQL runs the
// statements of a pipeline up to its Sync as one implicit transaction, so they commit together,
// or not at all when one fails, and a setting made with set_config(…, true) lasts until its end.
// Elsewhere it runs fn as its statements come.
func inOneRoundTrip(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	if db.Dialector.Name() != "postgres" {
		return fn(db.WithContext(ctx))
	}
	p, tx, err := openPipeline(ctx, db)
	if err != nil {
		return err
	}
	defer p.release()
	if err := fn(tx); err != nil {
		return err
	}
	_, err = p.send(ctx)
	return err
}

// openPipeline takes a connection of db's pool (PostgreSQL) for a pipeline that starts with first,
// and returns the GORM session whose execLater and scanLater queue on it, and whose ordinary
// statements run on the pipeline's connection; p.release hands the connection back.
func openPipeline(ctx context.Context, db *gorm.DB, first ...pendingStatement) (p *pipeline, tx *gorm.DB, err error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, err
	}
	if p, err = newPipeline(ctx, sqlDB, translator(db), db.Logger); err != nil {
		return nil, nil, err
	}
	p.waiting = first
	tx = db.Session(&gorm.Session{NewDB: true, Context: context.WithValue(ctx, pipelineKey{}, p)})
	tx.Statement.ConnPool = pipelineConn{p}
	return p, tx, nil
}

// newPipeline takes a connection of pool for a pipeline.
func newPipeline(ctx context.Context, pool *sql.DB, translate func(error) error, log logger.Interface) (*pipeline, error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &pipeline{pool: pool, conn: conn, translate: translate, log: log}, nil
}

// release hands the pipeline's connection back to the pool.
func (p *pipeline) release() { p.conn.Close() }

// pipelineConn is how GORM's own statements inside a pipelined transaction reach its connection,
// whichever it is by then (see foundDead).
type pipelineConn struct{ p *pipeline }

// PrepareContext prepares query on the pipeline's connection.
func (c pipelineConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.p.conn.PrepareContext(ctx, query)
}

// ExecContext runs query on the pipeline's connection.
func (c pipelineConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.p.conn.ExecContext(ctx, query, args...)
}

// QueryContext runs query on the pipeline's connection.
func (c pipelineConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.p.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query on the pipeline's connection.
func (c pipelineConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.p.conn.QueryRowContext(ctx, query, args...)
}

// errRolledBack means the COMMIT found the transaction failed and rolled it back.
var errRolledBack = errors.New("models: the transaction failed and was rolled back")

// rollback ends a transaction that failed. A connection that cannot even roll back is closed
// rather than returned to the pool in an unknown state.
func (p *pipeline) rollback(ctx context.Context) {
	if _, err := p.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		p.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// translator is how db reports database errors: translated to GORM's (gorm.ErrDuplicatedKey…)
// when db is configured to.
func translator(db *gorm.DB) func(error) error {
	if t, ok := db.Dialector.(gorm.ErrorTranslator); ok && db.Config.TranslateError {
		return t.Translate
	}
	return func(err error) error { return err }
}

// alone runs one written statement on PostgreSQL outside any transaction as a pipeline of its
// own, autocommitted, through pgx without GORM or database/sql; ran is false where it does not
// apply (SQLite, or inside a GORM transaction, which the statement must join).
func alone(tx *gorm.DB, query string, args []any, scan func(pgx.Rows) error) (n int64, ran bool, err error) {
	sqlDB, ok := tx.Statement.ConnPool.(*sql.DB)
	if !ok || tx.Dialector.Name() != "postgres" {
		return 0, false, nil
	}
	ctx := tx.Statement.Context
	p, err := newPipeline(ctx, sqlDB, translator(tx), tx.Logger)
	if err != nil {
		return 0, true, err
	}
	defer p.release()
	if err := p.add(query, args, scan); err != nil {
		return 0, true, err
	}
	n, err = p.flush(ctx)
	return n, true, err
}

// pipelineOf is tx's pipeline, or nil outside a pipelined transaction.
func pipelineOf(tx *gorm.DB) *pipeline {
	if tx.Statement == nil || tx.Statement.Context == nil {
		return nil
	}
	p, _ := tx.Statement.Context.Value(pipelineKey{}).(*pipeline)
	return p
}

// Statements are written out in SQL, with ? for each argument, so that on PostgreSQL they are
// queued as written: having GORM build them costs more than the database takes to run most of
// them. An argument is a single value (GORM's expansion of a slice for IN does not apply), and
// writing dialect-neutral SQL is the caller's part.

// execLater runs a statement when the transaction next talks to the database, or at once outside a
// pipelined transaction (and on SQLite; on PostgreSQL outside any transaction, see alone). Use
// it for statements whose only result is success; their errors fail the transaction.
func execLater(tx *gorm.DB, query string, args ...any) error {
	if err := checkWritten(query, args); err != nil {
		return err
	}
	p := pipelineOf(tx)
	if p == nil {
		if _, ran, err := alone(tx, query, args, nil); ran {
			return err
		}
		return tx.Exec(query, args...).Error
	}
	return p.add(query, args, nil)
}

// execNow runs a statement, with every statement waiting before it in the same round trip, and
// returns the rows it affected.
func execNow(tx *gorm.DB, query string, args ...any) (int64, error) {
	if err := checkWritten(query, args); err != nil {
		return 0, err
	}
	p := pipelineOf(tx)
	if p == nil {
		if n, ran, err := alone(tx, query, args, nil); ran {
			return n, err
		}
		q := tx.Exec(query, args...)
		return q.RowsAffected, q.Error
	}
	if err := p.add(query, args, nil); err != nil {
		return 0, err
	}
	return p.flush(tx.Statement.Context)
}

// insertLater is execLater for the INSERT of row, a pointer to a model, with every column of the
// model's table, followed by suffix (an ON CONFLICT clause, or "").
func insertLater(tx *gorm.DB, row any, suffix string) error {
	return insertWithLater(tx, "", nil, row, suffix)
}

// insertWithLater is insertLater with a WITH clause before the INSERT (with, whose arguments are
// withArgs): on PostgreSQL a data-modifying WITH makes two writes one statement.
func insertWithLater(tx *gorm.DB, with string, withArgs []any, row any, suffix string) error {
	ins, err := insertOf(tx, row)
	if err != nil {
		return err
	}
	values, err := ins.values(tx, row)
	if err != nil {
		return err
	}
	if with != "" {
		values = append(withArgs, values...)
	}
	return execLater(tx, with+ins.sql+suffix, values...)
}

// scanLater is execLater for a statement that returns rows (a SELECT, or a write with RETURNING):
// they are scanned into dest when the statement is sent, each column into the field of its name
// (email_verified into EmailVerified; on PostgreSQL pgx matches names without GORM's tags, so a
// field renamed with a column tag needs its column named after it with AS).
// dest must not be read before the transaction has next talked to the database (execNow, an ordinary
// statement, or the commit); outside a pipelined transaction it is filled at once.
func scanLater[T any](tx *gorm.DB, dest *[]T, query string, args ...any) error {
	if err := checkWritten(query, args); err != nil {
		return err
	}
	scan := func(rows pgx.Rows) error {
		found, err := pgx.CollectRows(rows, pgx.RowToStructByNameLax[T])
		*dest = found
		return err
	}
	p := pipelineOf(tx)
	if p == nil {
		if _, ran, err := alone(tx, query, args, scan); ran {
			return err
		}
		return scanRows(tx.Raw(query, args...), dest)
	}
	return p.add(query, args, scan)
}

// scanRows runs q and scans every row it returns into dest. It is GORM's Scan without the
// rendering of the statement with its arguments that Scan does for its logger on every call,
// which costs more than the rest of a small query.
func scanRows[T any](q *gorm.DB, dest *[]T) error {
	*dest = nil
	rows, err := q.Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	// ScanRows reads the row Next moved to, and every row after it into a slice.
	if rows.Next() {
		if err := q.ScanRows(rows, dest); err != nil {
			return err
		}
	}
	// A statement can fail while its rows are read (SQLite reports a write's conflict there);
	// AddError translates the error as GORM does its own.
	return q.AddError(rows.Err())
}

// scanNow runs a statement, with every statement waiting before it in the same round trip, and
// scans the rows it returns into dest (as scanLater). Outside a pipelined transaction it is
// GORM's Scan into a slice, without Scan's cost (scanRows).
func scanNow[T any](tx *gorm.DB, dest *[]T, query string, args ...any) error {
	if err := scanLater(tx, dest, query, args...); err != nil {
		return err
	}
	if p := pipelineOf(tx); p != nil {
		_, err := p.flush(tx.Statement.Context)
		return err
	}
	return nil
}

// add queues a statement, with scan to read its rows (nil for none).
func (p *pipeline) add(query string, args []any, scan func(pgx.Rows) error) error {
	w := parse(query)
	p.waiting = append(p.waiting, pendingStatement{sql: w.numbered, vars: args, scan: scan})
	return nil
}

// written is what parse learns of a written statement.
type written struct {
	numbered string // with PostgreSQL's $1, $2, … for the ? placeholders
	params   int
	err      error
}

// writtenSQL caches parse: a service writes a few dozen statements, each used over and over.
var writtenSQL sync.Map

// parse numbers the ? placeholders of query. A ? inside quotes is refused: GORM would take it
// for a placeholder on SQLite, PostgreSQL for text, so the statement would mean two things.
func parse(query string) written {
	if w, ok := writtenSQL.Load(query); ok {
		return w.(written)
	}
	var b strings.Builder
	w, quote := written{}, byte(0)
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '?' {
				w.err = fmt.Errorf("models: a ? inside quotes in a written statement: %.60s", query)
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			w.params++
			b.WriteString("$" + strconv.Itoa(w.params))
			continue
		}
		b.WriteByte(c)
	}
	w.numbered = b.String()
	writtenSQL.Store(query, w)
	return w
}

// checkWritten refuses a written statement that the two databases would read differently, or
// that has not one argument for each placeholder. A list among the arguments ([]byte is a value)
// is one: GORM would expand it for IN on SQLite, and PostgreSQL would get an array.
func checkWritten(query string, args []any) error {
	w := parse(query)
	if w.err != nil {
		return w.err
	}
	if w.params != len(args) {
		return fmt.Errorf("models: %d arguments for %d placeholders in a written statement: %.60s", len(args), w.params, query)
	}
	for _, a := range args {
		if v := reflect.ValueOf(a); v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8 {
			return fmt.Errorf("models: a list argument (%T) in a written statement", a)
		}
	}
	return nil
}

// flush sends every waiting statement in one round trip and returns the rows the last affected.
// The first error stops the rest: PostgreSQL skips them and the transaction is failed.
func (p *pipeline) flush(ctx context.Context) (int64, error) {
	tag, err := p.send(ctx)
	return tag.RowsAffected(), err
}

// send sends every waiting statement in one round trip and returns the last one's command tag.
func (p *pipeline) send(ctx context.Context) (pgconn.CommandTag, error) {
	waiting := p.waiting
	p.waiting = nil
	if p.failed != nil {
		// fn went on after a failure it did not return. Sent on another connection, what
		// follows would run outside the transaction that failed, each statement on its own.
		return pgconn.CommandTag{}, p.failed
	}
	if len(waiting) == 0 {
		return pgconn.CommandTag{}, nil
	}
	if waiting[0].sql == "BEGIN" {
		p.begun = true
	}
	var (
		last     pgconn.CommandTag
		answered int
		closed   bool
		err      error
	)
	begin := time.Now()
	// Slow round trips are reported as GORM's are; errors go back to the caller, who logs them.
	defer func() {
		p.log.Trace(ctx, begin, func() (string, int64) {
			statements := make([]string, len(waiting))
			for i, st := range waiting {
				statements[i] = st.sql
			}
			return strings.Join(statements, "; "), last.RowsAffected()
		}, nil)
	}()
	for tries := 1; ; tries++ {
		last, answered, closed, err = p.roundTrip(ctx, waiting)
		if err == nil || p.answered || tries > poolSize || ctx.Err() != nil || !foundDead(err, waiting, answered, closed) {
			break
		}
		// Nothing of it ran, or nothing can have committed: it goes again, whole, on another
		// connection. A dead connection is discarded, so the tries are bounded by the pool.
		p.conn.Raw(func(any) error { return driver.ErrBadConn })
		next, cerr := p.pool.Conn(ctx)
		if cerr != nil {
			p.failed = p.translate(cerr)
			return pgconn.CommandTag{}, p.failed
		}
		p.conn = next
	}
	if err != nil {
		if waiting[len(waiting)-1].sql == "COMMIT" && commitMayHaveRun(err) {
			p.failed = fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		} else {
			p.failed = p.translate(err)
		}
		return pgconn.CommandTag{}, p.failed
	}
	p.answered = true
	return last, nil
}

// roundTrip sends the statements waiting in one batch on p's connection and reads their
// answers: the last one's command tag, how many statements were answered, and whether the
// connection is closed after a failure.
func (p *pipeline) roundTrip(ctx context.Context, waiting []pendingStatement) (last pgconn.CommandTag, answered int, closed bool, err error) {
	err = p.conn.Raw(func(driverConn any) error {
		pc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("models: unexpected PostgreSQL driver %T", driverConn)
		}
		batch := &pgx.Batch{}
		for _, st := range waiting {
			batch.Queue(st.sql, st.vars...)
		}
		results := pc.Conn().SendBatch(ctx, batch)
		for _, st := range waiting {
			tag, err := receive(results, st)
			if err != nil {
				results.Close()
				closed = pc.Conn().IsClosed()
				return err
			}
			last = tag
			answered++
		}
		err := results.Close()
		closed = err != nil && pc.Conn().IsClosed()
		return err
	})
	return last, answered, closed, err
}

// foundDead reports whether the failure of the first round trip on a connection from the pool,
// which closed the connection before any statement was answered, means the connection was dead
// before it was used (as every pooled connection is after a restart or a failover, until the
// pool tries it), so that the round trip may go again, whole, on another: nothing was sent (or
// only pgx's preparation of it, notSent); or the server had ended the session (it answers in
// order, so none of the statements ran, a COMMIT among them included); or the round trip was a
// transaction's first and held no COMMIT, so nothing of it can have committed. The service
// learns of a dead connection only by using it; without this, each connection in the pool would
// cost a request a 503 after the database came back.
func foundDead(err error, waiting []pendingStatement, answered int, closed bool) bool {
	if !closed || answered > 0 {
		return false // a statement's ERROR, which leaves the connection well, or one that ran
	}
	return notSent(err) || sessionEnded(err) ||
		(waiting[0].sql == "BEGIN" && waiting[len(waiting)-1].sql != "COMMIT")
}

// notSent reports whether err means no statement of a round trip reached the server: the
// connection failed before anything was written, or while pgx was still preparing the batch
// (its Parse and Describe round trip, which runs nothing, for statements it has not seen on
// this connection).
func notSent(err error) bool {
	return pgconn.SafeToRetry(err) || errors.As(err, new(pgx.ErrPreprocessingBatch))
}

// sessionEnded reports whether err is the server ending the session from its side as FATAL,
// class 57P (terminated by an administrator, as in a fast shutdown, a restart or a failover; an
// idle session's timeout…), which PostgreSQL sends when it next checks for interrupts, so never
// between a commit and its answer. An immediate shutdown or another backend's crash ends the
// session with a WARNING at any point instead, a commit's included, and pgx reports the closed
// connection that follows: that is not taken for a session ended before its statements ran.
func sessionEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.EqualFold(pgErr.Severity, "FATAL") && strings.HasPrefix(pgErr.Code, "57P")
}

// commitMayHaveRun reports whether a round trip that ended with COMMIT failed in a way that
// leaves open whether the server committed: the connection broke after the statements were
// sent (the answer to the COMMIT may be what was lost), or the server ended the session (a
// FATAL error). An ERROR from a statement aborts the transaction, so the COMMIT cannot have run;
// nor can it when nothing was sent.
func commitMayHaveRun(err error) bool {
	if notSent(err) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.EqualFold(pgErr.Severity, "FATAL") || strings.EqualFold(pgErr.Severity, "PANIC")
	}
	return true
}

// receive reads the result of the statement st of a batch, scanning its rows if it asks to.
func receive(results pgx.BatchResults, st pendingStatement) (pgconn.CommandTag, error) {
	if st.scan == nil {
		return results.Exec()
	}
	rows, err := results.Query()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	err = st.scan(rows) // reads every row and closes rows
	if err == nil {
		err = rows.Err()
	}
	return rows.CommandTag(), err
}

// sendNow sends, inside a pipelined transaction, the statements waiting in tx, so that an error of
// theirs is reported as what they did (doing), not by whichever statement comes next; elsewhere
// they have run already and it does nothing. It costs no round trip: the next statement would
// have sent them first, in one of its own.
func sendNow(tx *gorm.DB, doing string) error {
	p := pipelineOf(tx)
	if p == nil || len(p.waiting) == 0 {
		return nil
	}
	if _, err := p.flush(tx.Statement.Context); err != nil {
		return fmt.Errorf("models: %s: %w", doing, err)
	}
	return nil
}

// sendWaiting is a GORM callback that runs before every statement: inside a pipelined
// transaction, what waits is sent first, so the statement sees it.
func sendWaiting(db *gorm.DB) {
	if db.DryRun || db.Error != nil {
		return
	}
	p := pipelineOf(db)
	if p == nil || len(p.waiting) == 0 {
		return
	}
	if _, err := p.flush(db.Statement.Context); err != nil {
		db.AddError(err)
	}
}

// registerPipelineCallbacks makes every kind of GORM statement send what waits first.
func registerPipelineCallbacks(db *gorm.DB) error {
	cb := db.Callback()
	errs := []error{
		cb.Create().Before("*").Register("models:send_waiting", sendWaiting),
		cb.Query().Before("*").Register("models:send_waiting", sendWaiting),
		cb.Update().Before("*").Register("models:send_waiting", sendWaiting),
		cb.Delete().Before("*").Register("models:send_waiting", sendWaiting),
		cb.Row().Before("*").Register("models:send_waiting", sendWaiting),
		cb.Raw().Before("*").Register("models:send_waiting", sendWaiting),
	}
	return errors.Join(errs...)
}
