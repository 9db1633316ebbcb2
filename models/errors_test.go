package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// Catalogue R1, #107: what counts as the database being unavailable (a 503) and what is a failure
// of the request or a bug (a 500), from the PostgreSQL codes and from real errors of both drivers.
func TestUnavailable(t *testing.T) {
	pg := func(severity, code string) error {
		return fmt.Errorf("auth: reading: %w", &pgconn.PgError{Severity: severity, Code: code})
	}
	unavailable := map[string]error{
		"admin shutdown (a restart)":     pg("FATAL", "57P01"),
		"crash shutdown":                 pg("FATAL", "57P02"),
		"starting up":                    pg("FATAL", "57P03"),
		"connection failure":             pg("FATAL", "08006"),
		"too many connections":           pg("FATAL", "53300"),
		"disk full":                      pg("ERROR", "53100"),
		"read-only transaction":          pg("ERROR", "25006"),
		"statement timeout":              pg("ERROR", "57014"),
		"lock timeout":                   pg("ERROR", "55P03"),
		"deadlock":                       pg("ERROR", "40P01"),
		"serialization failure":          pg("ERROR", "40001"),
		"any other fatal":                pg("FATAL", "XX000"),
		"commit unknown":                 fmt.Errorf("x: %w", ErrCommitUnknown),
		"bad connection":                 driver.ErrBadConn,
		"connection done":                sql.ErrConnDone,
		"unexpected EOF":                 fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
		"deadline":                       context.DeadlineExceeded,
		"pool closed (process stopping)": errors.New("sql: database is closed"),
	}
	for name, err := range unavailable {
		if !Unavailable(err) {
			t.Errorf("%s (%v): not unavailable", name, err)
		}
	}
	for name, err := range map[string]error{
		"unique violation":  pg("ERROR", "23505"),
		"undefined table":   pg("ERROR", "42P01"),
		"not found":         gorm.ErrRecordNotFound,
		"duplicated key":    gorm.ErrDuplicatedKey,
		"anything else":     errors.New("rendering: template"),
		"nothing":           nil,
		"a request's field": fmt.Errorf("auth: %w", errors.New("invalid email")),
	} {
		if Unavailable(err) {
			t.Errorf("%s (%v): unavailable", name, err)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrCommitUnknown), ErrUnavailable) {
		t.Error("ErrCommitUnknown does not match ErrUnavailable")
	}

	// A server that refuses connections, for real.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pgx.Connect(ctx, "postgres://x@"+addr+"/x?sslmode=disable"); !Unavailable(err) {
		t.Errorf("connection refused (%v): not unavailable", err)
	}
}

// The embedded database's own failures, for real: locked past the busy timeout and read-only are
// unavailability; a constraint is not.
func TestUnavailable_SQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := Open(ctx, Options{SQLitePath: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	insert := func(db *gorm.DB) error {
		return db.Exec("INSERT INTO auth_throttle (key, count, reset_at, updated_at) VALUES ('k', 1, ?, ?)", time.Now(), time.Now()).Error
	}
	if err := insert(db); err != nil {
		t.Fatal(err)
	}
	if err := insert(db); Unavailable(err) || err == nil {
		t.Errorf("a unique violation (%v) counts as unavailable", err)
	}

	// Another connection holds the write lock; this one does not wait.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "DELETE FROM auth_throttle"); !Unavailable(err) {
		t.Errorf("a locked database (%v): not unavailable", err)
	}
	conn.ExecContext(ctx, "ROLLBACK")

	if err := db.Exec("PRAGMA query_only = 1").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("DELETE FROM auth_throttle").Error; !Unavailable(err) {
		t.Errorf("a read-only database (%v): not unavailable", err)
	}
	if err := Ready(ctx, db); !Unavailable(err) {
		t.Errorf("Ready on a read-only database: %v", err)
	}
}

// A round trip that ended with COMMIT leaves the outcome open exactly when the connection broke
// after sending, or the server ended the session; an ERROR or a failure before sending does not.
func TestCommitMayHaveRun(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection lost reading the answers", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"fatal from the server", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"error of a statement", &pgconn.PgError{Severity: "ERROR", Code: "23505"}, false},
		{"nothing sent", safeToRetry{}, false},
	} {
		if got := commitMayHaveRun(c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// safeToRetry is an error pgconn would report for a request it never sent.
type safeToRetry struct{}

func (safeToRetry) Error() string     { return "dial failed before sending" }
func (safeToRetry) SafeToRetry() bool { return true }
