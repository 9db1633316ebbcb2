package models

import "gorm.io/gorm"

// EnqueueOutbox writes row (as mail.Outbox's Prepare returned it) inside tx: see enqueueOutbox.
//
// Temporary: issue 14 removes it once auth's transactions are store methods, which call
// enqueueOutbox themselves.
func EnqueueOutbox(tx *gorm.DB, row OutboxMessage) error {
	return enqueueOutbox(tx, &row)
}

// ForgetGivenUp deletes, inside tx, the records of messages to the recipients that were given up:
// see forgetGivenUp.
//
// Temporary: issue 14 removes it once auth's transactions are store methods, which call
// forgetGivenUp themselves.
func ForgetGivenUp(tx *gorm.DB, recipients []string) error {
	return forgetGivenUp(tx, recipients)
}
