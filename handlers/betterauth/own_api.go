package betterauth

import (
	"context"
	"net/url"

	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// The service's own routes under /api, beside better-auth's.

// marketingConsent is POST /api/marketing-consent: the call itself is the consent. It records
// where it came from as evidence: the page it was sent from (a trusted Referer's path) or "api".
// Withdrawing is its own route, as easy as this one.
func (h *API) marketingConsent(c *fiber.Ctx) error {
	return h.changeConsent(c, h.auth.GrantMarketingConsent)
}

// withdrawMarketingConsent is POST /api/marketing-consent/withdraw: the consent ends, recorded
// with the same evidence as a grant.
func (h *API) withdrawMarketingConsent(c *fiber.Ctx) error {
	return h.changeConsent(c, h.auth.WithdrawMarketingConsent)
}

func (h *API) changeConsent(c *fiber.Ctx, change func(context.Context, string, auth.ConsentEvidence) error) error {
	if err := h.body.read(c, emptyRequest{}); err != nil {
		return err
	}
	ev := auth.ConsentEvidence{Source: "api", Client: auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)}}
	if ref, err := url.Parse(c.Get(fiber.HeaderReferer)); err == nil && ref.Host != "" && h.origins.Trusted(ref.Scheme+"://"+ref.Host) {
		ev.Source = ref.Path
		if ref.Host == string(c.Request().Header.Host()) {
			// From this service's own pages, which showed the opt-in's words in the request's
			// language. Another site or an app shows words of its own, in a language the
			// service cannot know.
			ev.Locale = h.locales.Of(c).Code()
		}
	}
	st := middleware.Current(c)
	err := change(c.UserContext(), st.User.ID, ev)
	if err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// me is GET /api/me: the caller's account and preferences.
func (h *API) me(c *fiber.Ctx) error {
	st := middleware.Current(c)
	prefs, err := h.auth.Preferences(c.UserContext(), st.User.ID)
	if err != nil {
		return err
	}
	return c.JSON(meResponse{
		User:        toUserJSON(st.User),
		Preferences: preferencesJSON{MarketingOptIn: prefs.MarketingOptIn, IsTrialEligible: prefs.IsTrialEligible},
	})
}

// deleteAccount is POST /api/account/delete: the account is deleted with a grace period, every
// session ends, and signing in before the answer's deleteAt restores it. The session must have
// signed in within auth.FreshAge (else 400 SESSION_EXPIRED: sign in again).
func (h *API) deleteAccount(c *fiber.Ctx) error {
	if err := h.body.read(c, emptyRequest{}); err != nil {
		return err
	}
	at, err := h.auth.DeleteAccount(c.UserContext(), middleware.Current(c))
	if err != nil {
		return err
	}
	h.sessions.Clear(c)
	return c.JSON(deleteAccountResponse{DeleteAt: isoTime(at), Success: true})
}
