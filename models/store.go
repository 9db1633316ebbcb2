package models

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// Store is the service's storage: every statement the service runs is a method of it, named for
// what it does (SpendAttempt, CompleteSignIn, ReadSession, ClaimOutbox …). The packages above
// declare the part they need as small interfaces of their own (auth.Store, mail.Store) and never
// see SQL, GORM, pgx or which database answers: the dialect branches, the pipelined transactions,
// the batched session reads and the prepared statements are this package's own business.
//
// Its methods are grouped by capability in files of their own (store_codes.go,
// store_sessions.go, store_outbox.go …). Times passed in are stored as given: the callers hand
// UTC truncated to the microsecond, which both databases keep exactly.
type Store struct {
	db       *gorm.DB
	postgres bool
	// sessions answers ReadSession; sessionQueries counts its queries.
	sessions       sessionReaders
	sessionQueries atomic.Int64
	// sink receives the lifecycle events of every transaction (SetEventSink); nil: none.
	sink EventSink
	// handoff takes the outbox messages of every transaction once it commits
	// (SetOutboxHandoff); nil: none.
	handoff OutboxHandoff
}

// OpenStore opens the database opts chooses (Open), brings its schema up to date (Migrate) and
// returns the storage over it; Close closes it.
func OpenStore(ctx context.Context, opts Options) (*Store, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db); err != nil {
		closeDB(db)
		return nil, fmt.Errorf("migrating: %w", err)
	}
	return NewStore(db)
}

// NewStore returns the storage over db, opened (Open) and migrated (Migrate).
func NewStore(db *gorm.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("models: a database is required")
	}
	s := &Store{db: db, postgres: db.Dialector.Name() == "postgres"}
	var err error
	if s.sessions, err = newSessionReader(db, &s.sessionQueries); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return closeDB(s.db) }

func closeDB(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ready reports whether the database can take writes now, without writing anything (see
// Ready).
func (s *Store) Ready(ctx context.Context) error { return Ready(ctx, s.db) }

// PoolStats is the state of the connection pool, for the metrics.
type PoolStats struct {
	// MaxOpen is the most connections the pool opens; Open those open now, InUse those serving
	// a statement and Idle those waiting for one.
	MaxOpen, Open, InUse, Idle int
	// WaitCount is how many times a caller waited for a connection, and WaitDuration how long in
	// all; ClosedIdle and ClosedLifetime count connections closed for idling or age.
	WaitCount                  int64
	WaitDuration               time.Duration
	ClosedIdle, ClosedLifetime int64
}

// PoolStats reads the state of the connection pool.
func (s *Store) PoolStats() PoolStats {
	db, err := s.db.DB()
	if err != nil {
		return PoolStats{}
	}
	st := db.Stats()
	return PoolStats{MaxOpen: st.MaxOpenConnections, Open: st.OpenConnections, InUse: st.InUse, Idle: st.Idle,
		WaitCount: st.WaitCount, WaitDuration: st.WaitDuration, ClosedIdle: st.MaxIdleClosed + st.MaxIdleTimeClosed,
		ClosedLifetime: st.MaxLifetimeClosed}
}

// DB is the GORM handle of the store's database, for the test harness, whose fixtures write and
// count rows from outside the service. Nothing else calls it (internal/archcheck refuses a call
// outside models and internal/): the service itself only calls the store's methods.
func (s *Store) DB() *gorm.DB { return s.db }

// Errors of the store's methods, which callers compare with errors.Is.
var (
	// ErrNotFound means the row asked for does not exist (or is not live, where the method says
	// so).
	ErrNotFound = errors.New("models: not found")
	// ErrAddressTaken means another account, live or in its deletion grace period, holds the
	// address.
	ErrAddressTaken = errors.New("models: the address belongs to another account")
	// ErrLost means a row the change depended on went or changed since it was read: a code used
	// by a parallel request, an address changed meanwhile. Nothing was changed.
	ErrLost = errors.New("models: the row changed since it was read")
	// ErrSignUpClosed means a sign-in would have created an account that may not be created.
	ErrSignUpClosed = errors.New("models: sign-up is closed for the address")
	// ErrBanned means the account is banned: it may not sign in.
	ErrBanned = errors.New("models: the account is banned")
	// ErrLastAdmin means the change would leave no admin able to act: the account is the last
	// admin whose role is in force and who is not banned.
	ErrLastAdmin = errors.New("models: the change would leave no admin")
	// ErrIsAdmin means an account is an admin, which the change may not be made to (an
	// impersonation).
	ErrIsAdmin = errors.New("models: the account is an admin")
	// ErrNoAuthority means the admin a change rests on is no longer a live admin in force
	// (banned, demoted or removed meanwhile).
	ErrNoAuthority = errors.New("models: the admin is no longer an admin in force")
	// ErrInvalidQuery means a query named a field, an operator or a value the store does not
	// search by (UserQuery): the caller's input, refused before any statement runs.
	ErrInvalidQuery = errors.New("models: invalid query")
)

// notFound is ErrNotFound for GORM's missing row, and any other error wrapped with what was
// being done.
func notFound(err error, doing string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	return fmt.Errorf("models: %s: %w", doing, err)
}
