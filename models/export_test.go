package models

import (
	"time"

	"gorm.io/gorm"
)

// The pipelined transaction and its statements, for the external tests of pipeline_test.go.
var (
	Transaction = inTransaction
	Later       = execLater
	Now         = execNow
	LaterInsert = insertLater
)

// LaterScan is scanLater, for the external tests.
func LaterScan[T any](tx *gorm.DB, dest *[]T, query string, args ...any) error {
	return scanLater(tx, dest, query, args...)
}

// NowScan is scanNow, for the external tests.
func NowScan[T any](tx *gorm.DB, dest *[]T, query string, args ...any) error {
	return scanNow(tx, dest, query, args...)
}

// Numbered is a written statement as parse numbers it for PostgreSQL, or why it is refused.
func Numbered(query string) (string, error) {
	w := parse(query)
	return w.numbered, w.err
}

// SetSessionReadTimeout bounds each batch query of the session reads on PostgreSQL to d (10 s
// unless set); it reports false on SQLite, whose reads are not batched. Tests shorten it.
func (s *Store) SetSessionReadTimeout(d time.Duration) bool {
	if b := s.sessions.batch; b != nil {
		b.timeout.Store(int64(d))
		return true
	}
	return false
}
