package models

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// TryLock takes the lock called name across every process on the database, without waiting: ok
// is false when another holder has it. The holder calls release when done; release never fails
// to let the lock go (when unlocking fails, the connection that holds it is closed, which ends
// the lock with the session).
//
// On PostgreSQL it is a session advisory lock (pg_try_advisory_lock) held on a connection of its
// own until release; the key is the schema and the name, so deployments that share a database in
// different schemas do not block each other. SQLite serves one process, whose callers keep their
// own lock, so there it always succeeds and release does nothing.
func (s *Store) TryLock(ctx context.Context, name string) (release func() error, ok bool, err error) {
	if !s.postgres {
		return func() error { return nil }, true, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	var locked bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(hashtext(current_schema()), hashtext($1))", name).Scan(&locked); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("models: taking the lock %s: %w", name, err)
	}
	if !locked {
		conn.Close()
		return nil, false, nil
	}
	return func() error {
		// A background context: the lock must go even when the holder's context has ended.
		_, err := conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(hashtext(current_schema()), hashtext($1))", name)
		if err != nil {
			// The connection may still hold the lock: it is discarded rather than returned to
			// the pool, and closing it ends its session and the lock with it.
			conn.Raw(func(any) error { return driver.ErrBadConn })
			conn.Close()
			return fmt.Errorf("models: releasing the lock %s: %w", name, err)
		}
		return conn.Close()
	}, true, nil
}
