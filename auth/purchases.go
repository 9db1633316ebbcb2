package auth

import (
	"context"

	"codeauth/models"

	"github.com/google/uuid"
)

// Purchase returns the purchase with id.
func (s *Service) Purchase(ctx context.Context, id string) (models.Purchase, error) {
	var p models.Purchase
	if uuid.Validate(id) != nil {
		return p, ErrPurchaseNotFound
	}
	p, err := s.store.Purchase(ctx, id)
	if err != nil {
		return p, notFoundAs(err, ErrPurchaseNotFound, "reading a purchase")
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
	claimed, err := s.store.ClaimPurchase(ctx, p.ID, user.ID)
	if err != nil {
		return p, err
	}
	if !claimed {
		return p, ErrPurchaseOtherEmail // linked to another account with this address before
	}
	p.UserID = &user.ID
	return p, nil
}
