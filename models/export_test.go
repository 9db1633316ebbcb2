package models

import "gorm.io/gorm"

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
