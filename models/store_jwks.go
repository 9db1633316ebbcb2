package models

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// The JWT signing keys (SigningKey). auth decides when a key is made, which one signs and which
// ones the JWKS publishes; these statements only read, add and remove rows.

// SigningKeys returns every signing key, newest generation first.
func (s *Store) SigningKeys(ctx context.Context) ([]SigningKey, error) {
	var keys []SigningKey
	if err := s.db.WithContext(ctx).Order("generation DESC").Find(&keys).Error; err != nil {
		return nil, fmt.Errorf("models: reading the signing keys: %w", err)
	}
	return keys, nil
}

// AddSigningKey stores key unless a key of its generation exists already, and reports whether
// it stored it. Two instances that make the same generation at once both call it; the unique
// generation lets exactly one row in, and the other caller, told false, reads the winner's key.
func (s *Store) AddSigningKey(ctx context.Context, key SigningKey) (bool, error) {
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&key)
	if res.Error != nil {
		return false, fmt.Errorf("models: adding a signing key: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DeleteSigningKeys removes the keys with these ids: those no JWT still alive was signed with.
func (s *Store) DeleteSigningKeys(ctx context.Context, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res := s.db.WithContext(ctx).Where("id IN ?", ids).Delete(&SigningKey{})
	if res.Error != nil {
		return 0, fmt.Errorf("models: deleting signing keys: %w", res.Error)
	}
	return res.RowsAffected, nil
}
