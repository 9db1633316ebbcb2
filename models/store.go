package models

import (
	"context"
	"errors"
	"fmt"

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
}

// NewStore returns the storage over db, opened (Open) and migrated (Migrate).
func NewStore(db *gorm.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("models: a database is required")
	}
	return &Store{db: db, postgres: db.Dialector.Name() == "postgres"}, nil
}

// Postgres reports whether the store is on PostgreSQL rather than the embedded SQLite. Callers
// use it to describe the deployment (the start-up log), never to choose a statement.
func (s *Store) Postgres() bool { return s.postgres }

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
)

// notFound is ErrNotFound for GORM's missing row, and any other error wrapped with what was
// being done.
func notFound(err error, doing string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	return fmt.Errorf("models: %s: %w", doing, err)
}

// transaction runs fn in a transaction of the store: pipelined on PostgreSQL (Transaction), so
// the writes that wait go to the server together with the next read or the COMMIT.
func (s *Store) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return Transaction(ctx, s.db, fn)
}
