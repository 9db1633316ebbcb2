package models

import (
	"errors"

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
	sessionReads
}

// NewStore returns the storage over db, opened (Open) and migrated (Migrate).
func NewStore(db *gorm.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("models: a database is required")
	}
	s := &Store{db: db, postgres: db.Dialector.Name() == "postgres"}
	if err := s.sessionReads.init(db); err != nil {
		return nil, err
	}
	return s, nil
}

// Postgres reports whether the store is on PostgreSQL rather than the embedded SQLite. Callers
// use it to describe the deployment (the start-up log), never to choose a statement.
func (s *Store) Postgres() bool { return s.postgres }
