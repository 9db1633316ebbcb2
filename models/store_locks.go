package models

import (
	"context"
	"database/sql"
	"fmt"
)

// TryLock takes the lock called name across every process on the database, without waiting: ok
// is false when another holder has it. The holder calls release when done; release never fails
// to let the lock go (when ending the transaction fails, its connection is closed, which ends the
// transaction and the lock with it).
//
// On PostgreSQL it is a transaction advisory lock (pg_try_advisory_xact_lock) in a transaction of
// its own, kept open, idle, until release: a transaction keeps its server connection even through
// a pooler in transaction mode (PgBouncer), where a session lock would stay behind on a server
// connection that other clients then share. The transaction writes nothing, and it ends on a
// statement without parameters, which pgx sends by the simple query protocol: after the lock's
// own statement (the extended protocol, for its parameter) the unnamed portal stayed open in the
// transaction, and the backend kept that statement's xmin with it (its backend_xmin, which
// TestTryLockHoldsBackNoCleanup reads), holding back the cleanup of every table for as long as
// the job ran (during a first prune of a large backlog the outbox's dead rows piled up and each
// delivery's claim read thousands of them). A simple query closes that portal, and in READ
// COMMITTED leaves no snapshot behind, so the lock holds back no vacuum. That statement also
// turns off idle_in_transaction_session_timeout for this transaction, which a server setting
// would otherwise let end the lock in the middle of a long job (a pooler's own idle-transaction
// timeout, PgBouncer's idle_transaction_timeout, must be longer than the longest job). The key is the
// schema and the name, so deployments that share a database in different schemas do not block
// each other. SQLite serves one process, whose callers keep their own lock, so there it always
// succeeds and release does nothing.
func (s *Store) TryLock(ctx context.Context, name string) (release func() error, ok bool, err error) {
	if !s.postgres {
		return func() error { return nil }, true, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	// Not bound to ctx: the transaction must outlive the call until release.
	tx, err := sqlDB.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	var locked bool
	if err := tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock(hashtext(current_schema()), hashtext($1))", name).Scan(&locked); err != nil {
		tx.Rollback()
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	if !locked {
		tx.Rollback()
		return nil, false, nil
	}
	// No parameters: the simple protocol, which closes the lock statement's portal (see above).
	if _, err := tx.ExecContext(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		tx.Rollback()
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	return func() error {
		// Ending the transaction ends the lock. database/sql closes the connection when the
		// rollback fails, which ends the transaction on the server.
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("models: releasing the lock %s: %w", name, err)
		}
		return nil
	}, true, nil
}
