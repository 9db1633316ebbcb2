package auth

import (
	"context"
	"errors"
	"fmt"

	"codeauth/models"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Errors of purchase claims.
var (
	// ErrPurchaseNotFound means no purchase has that id.
	ErrPurchaseNotFound = errors.New("auth: purchase not found")
	// ErrPurchaseOtherEmail means the purchase was made with another address than the account's.
	ErrPurchaseOtherEmail = errors.New("auth: purchase made with another e-mail address")
)

// Purchase returns the purchase with id.
func (s *Service) Purchase(ctx context.Context, id string) (models.Purchase, error) {
	var p models.Purchase
	if uuid.Validate(id) != nil {
		return p, ErrPurchaseNotFound
	}
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return p, ErrPurchaseNotFound
	}
	if err != nil {
		return p, fmt.Errorf("auth: reading a purchase: %w", err)
	}
	return p, nil
}

// ClaimPurchase links a guest purchase to the user. Only the account with the purchase's e-mail
// address can claim it (having just proved that address with a code), so a leaked checkout link
// gives nobody else the purchase. Claiming one's own purchase again is a no-op.
func (s *Service) ClaimPurchase(ctx context.Context, user models.User, purchaseID string) (models.Purchase, error) {
	p, err := s.Purchase(ctx, purchaseID)
	if err != nil {
		return p, err
	}
	if email, err := NormalizeEmail(p.Email); err != nil || email != user.Email {
		return p, ErrPurchaseOtherEmail
	}
	res := s.db.WithContext(ctx).Model(&models.Purchase{}).
		Where("id = ? AND (user_id IS NULL OR user_id = ?)", p.ID, user.ID).Update("user_id", user.ID)
	if res.Error != nil {
		return p, fmt.Errorf("auth: claiming a purchase: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return p, ErrPurchaseOtherEmail // linked to another account with this address before
	}
	p.UserID = &user.ID
	return p, nil
}
