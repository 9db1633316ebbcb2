package auth

import (
	"context"
	"fmt"

	"codeauth/models"

	"gorm.io/gorm"
)

// MarketingWording names the version of the opt-in text people agree to; it is kept with every
// grant, so the evidence says what was agreed to. Change it whenever the text changes.
const MarketingWording = "marketing-news-v1"

// ConsentEvidence describes where a consent came from.
type ConsentEvidence struct {
	// Source is the page ("/auth/sign-up") or "api".
	Source string
	Client ClientMeta
}

// GrantMarketingConsent records that the user agrees to marketing e-mail. It only ever grants:
// there is no revoke on this path, and granting twice changes nothing. The first grant is
// recorded as a ConsentEvent with the evidence, in the same transaction that sets the flag, so
// twenty parallel grants leave one flag and one event.
func (s *Service) GrantMarketingConsent(ctx context.Context, userID string, ev ConsentEvidence) error {
	now := s.now()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.ensureUserData(tx, userID); err != nil {
			return err
		}
		res := tx.Model(&models.UserData{}).Where("user_id = ? AND marketing_opt_in = ?", userID, false).
			Updates(map[string]any{"marketing_opt_in": true, "marketing_opt_in_at": now, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("auth: granting consent: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return nil // already granted
		}
		event := models.ConsentEvent{
			ID: newID(), UserID: userID, Kind: "marketing", Granted: true, Wording: MarketingWording,
			Source: cleanText(ev.Source, 200), IPAddress: cleanText(ev.Client.IPAddress, 64),
			UserAgent: cleanText(ev.Client.UserAgent, 512), CreatedAt: now,
		}
		if err := tx.Create(&event).Error; err != nil {
			return fmt.Errorf("auth: recording consent: %w", err)
		}
		s.log.InfoContext(ctx, "marketing consent granted", "user_id", userID, "source", event.Source, "wording", MarketingWording)
		return nil
	})
}
