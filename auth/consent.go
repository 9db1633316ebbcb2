package auth

import (
	"context"

	"codeauth/models"
)

// profileStore is the storage of an account's own data (preferences, consent, purchases,
// profile): models.Store implements it.
type profileStore interface {
	GrantConsent(ctx context.Context, defaults models.UserData, event models.ConsentEvent) (bool, error)
	Purchase(ctx context.Context, id string) (models.Purchase, error)
	ClaimPurchase(ctx context.Context, id, userID string) (bool, error)
	UpdateUser(ctx context.Context, id string, c models.UserChanges) (models.User, error)
}

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
	event := models.ConsentEvent{
		ID: newID(), UserID: userID, Kind: "marketing", Granted: true, Wording: MarketingWording,
		Source: cleanText(ev.Source, 200), IPAddress: cleanText(ev.Client.IPAddress, 64),
		UserAgent: cleanText(ev.Client.UserAgent, 512), CreatedAt: now,
	}
	granted, err := s.store.GrantConsent(ctx, s.defaultUserData(userID), event)
	if err != nil {
		return err
	}
	if granted {
		s.log.InfoContext(ctx, "marketing consent granted", "user_id", userID, "source", event.Source, "wording", MarketingWording)
	}
	return nil
}
