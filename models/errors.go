package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable marks an error as the database's unavailability (Unavailable); ErrCommitUnknown
// matches it.
var ErrUnavailable = errors.New("models: the database is unavailable")

// ErrCommitUnknown means a transaction's COMMIT was sent but its answer never came: the
// connection broke, and the transaction may or may not have committed. The caller must find out
// from the data itself before it tells anyone either way.
var ErrCommitUnknown = &unavailableError{err: errors.New("models: the database did not confirm the commit")}

// unavailableError marks an error as the database's unavailability (errors.Is ErrUnavailable)
// while keeping the cause for the log.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unavailable reports whether err means the database cannot serve the request now, through no
// fault of the request: it cannot be reached or the connection broke (refused, reset, closed,
// timed out), it is shutting down, starting up or out of connections, it is read-only (a
// standby, or default_transaction_read_only), or, for the embedded SQLite database, it is locked
// past the busy timeout, read-only, full or failing to read or write its file. Such a request
// may succeed if tried again in a moment, so it is answered 503 with Retry-After, never 500.
// Errors of the request itself (a constraint, a bad statement) are not unavailability.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code) || strings.EqualFold(pgErr.Severity, "FATAL") || strings.EqualFold(pgErr.Severity, "PANIC")
	}
	var sqliteErr interface{ Code() int }
	if errors.As(err, &sqliteErr) {
		switch sqliteErr.Code() & 0xff {
		case sqliteBusy, sqliteLocked, sqliteNoMem, sqliteReadOnly, sqliteIOErr, sqliteFull, sqliteCantOpen:
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return true
	}
	// database/sql reports a closed pool (the process is stopping) only by this message, and pgx a
	// connection it has already closed by "conn closed".
	msg := err.Error()
	return strings.Contains(msg, "sql: database is closed") || strings.Contains(msg, "conn closed")
}

// unavailableCode reports the PostgreSQL error codes of a server that cannot serve now: class
// 08 (connection exception), 53 (insufficient resources: disk full, out of memory, too many
// connections), 57P01-57P05 (terminated by an administrator, crash shutdown, cannot connect now,
// database dropped, idle session timeout), 57014 (a statement timeout), 25006 (a read-only
// transaction: a standby, or a server or role set read-only), and the transient refusals of
// concurrent work, after which the transaction rolled back and may be tried again: 55P03 (a lock
// not had within lock_timeout, as while a migration holds a table), 40P01 (a deadlock, the other
// party an operator's session or a job) and 40001 (a serialization failure).
func unavailableCode(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57P"):
		return true
	}
	switch code {
	case "57014", "25006", "55P03", "40P01", "40001":
		return true
	}
	return false
}

// SQLite's primary result codes that mean the file cannot be used now.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteNoMem    = 7
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)
