package auth

import (
	"context"

	"codeauth/models"
)

// profileStore is the storage of an account's own data (preferences, consent, purchases,
// profile): models.Store implements it.
type profileStore interface {
	SetConsent(ctx context.Context, defaults models.UserData, event models.ConsentEvent) (bool, error)
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
	// Locale is the language the opt-in's words were shown in, when they were the pages' own
	// (a code of the i18n files); "" when an app showed words of its own.
	Locale string
	Client ClientMeta
}

// wording names the words agreed to: MarketingWording, and the language they were shown in
// when it is known ("marketing-news-v1/de"), each language's text being a translation of that
// version.
func (ev ConsentEvidence) wording() string {
	if ev.Locale == "" {
		return MarketingWording
	}
	return MarketingWording + "/" + ev.Locale
}

// GrantMarketingConsent records that the user agrees to marketing e-mail; granting twice
// changes nothing. Each grant is recorded as a ConsentEvent with the evidence, in the same
// transaction that sets the flag, so twenty parallel grants leave one flag and one event.
func (s *Service) GrantMarketingConsent(ctx context.Context, userID string, ev ConsentEvidence) error {
	return s.setMarketingConsent(ctx, userID, ev, true)
}

// WithdrawMarketingConsent records that the user no longer agrees to marketing e-mail, as easily
// as it was given (GDPR Art. 7(3)), with the same evidence as a grant; withdrawing consent not
// given changes nothing.
func (s *Service) WithdrawMarketingConsent(ctx context.Context, userID string, ev ConsentEvidence) error {
	return s.setMarketingConsent(ctx, userID, ev, false)
}

func (s *Service) setMarketingConsent(ctx context.Context, userID string, ev ConsentEvidence, granted bool) error {
	if src := RequestFrom(ctx); src != nil && src.Impersonator() != "" {
		// Consent is the person's own: an admin acting as the account cannot give or
		// withdraw it, and its evidence would say the person did.
		return ErrImpersonated
	}
	now := s.now()
	event := models.ConsentEvent{
		ID: newID(), UserID: userID, Kind: "marketing", Granted: granted, Wording: ev.wording(),
		Source: cleanText(ev.Source, 200), IPAddress: cleanText(ev.Client.IPAddress, 64),
		UserAgent: cleanText(ev.Client.UserAgent, 512), CreatedAt: now,
	}
	changed, err := s.store.SetConsent(ctx, s.defaultUserData(userID), event)
	if err != nil {
		return err
	}
	if changed {
		what := "marketing consent withdrawn"
		if granted {
			what = "marketing consent granted"
		}
		s.log.InfoContext(ctx, what, "user_id", userID, "source", event.Source, "wording", event.Wording)
		action := AuditConsentWithdrawn
		if granted {
			action = AuditConsentGranted
		}
		s.record(ctx, action, userID, userID, map[string]any{"kind": "marketing", "source": event.Source, "wording": event.Wording})
	}
	return nil
}
