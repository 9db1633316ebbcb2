package models

import "time"

// Numbered is a written statement as parse numbers it for PostgreSQL, or why it is refused.
func Numbered(query string) (string, error) {
	w := parse(query)
	return w.numbered, w.err
}

// SessionReadQueue is how many session reads may wait for the database on PostgreSQL.
const SessionReadQueue = sessionReadQueue

// SessionReadBatch is the most hashes one batch query of the session reads asks for.
const SessionReadBatch = sessionReadBatch

// SessionReadsInFlight is the most batch queries of the session reads that run at once.
const SessionReadsInFlight = sessionReadsInFlight

// ErrSessionReadsBusy is the error of a session read past SessionReadQueue.
var ErrSessionReadsBusy = errSessionReadsBusy

// SetSessionReadTimeout bounds each batch query of the session reads on PostgreSQL to d; it
// reports false on SQLite, whose reads are not batched.
func (s *Store) SetSessionReadTimeout(d time.Duration) bool {
	if s.batch != nil {
		s.batch.timeout.Store(int64(d))
	}
	return s.batch != nil
}
