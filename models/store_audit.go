package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The audit log (AuditEvent): written with the change it records where the change is one
// transaction of the store (a sign-in), else right after it; read by admins; pruned after its
// retention.

// RecordAudit stores events.
func (s *Store) RecordAudit(ctx context.Context, events ...AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	if err := s.db.WithContext(ctx).Create(&events).Error; err != nil {
		return fmt.Errorf("models: recording audit events: %w", err)
	}
	return nil
}

// AuditQuery asks for a page of the audit log, newest first: the events of SubjectID (any
// account when ""), of Action (any when ""), Limit of them from Offset.
type AuditQuery struct {
	SubjectID string
	Action    string
	Limit     int
	Offset    int
}

// AuditLog returns the page q asks for and how many events match in all.
func (s *Store) AuditLog(ctx context.Context, q AuditQuery) ([]AuditEvent, int64, error) {
	where := func() *gorm.DB {
		db := s.db.WithContext(ctx).Model(&AuditEvent{})
		if q.SubjectID != "" {
			db = db.Where("subject_id = ?", q.SubjectID)
		}
		if q.Action != "" {
			db = db.Where("action = ?", q.Action)
		}
		return db
	}
	var total int64
	if err := where().Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("models: counting audit events: %w", err)
	}
	var events []AuditEvent
	if err := where().Order("at DESC").Order("id").Limit(q.Limit).Offset(q.Offset).Find(&events).Error; err != nil {
		return nil, 0, fmt.Errorf("models: reading the audit log: %w", err)
	}
	for i := range events {
		events[i].At = events[i].At.UTC()
	}
	return events, total, nil
}

// PruneAudit deletes at most limit audit events recorded at or before cutoff.
func (s *Store) PruneAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return s.prune(ctx, `DELETE FROM audit_events
 WHERE id IN (SELECT id FROM audit_events WHERE at <= ? LIMIT ?) AND at <= ?`, cutoff, limit)
}
