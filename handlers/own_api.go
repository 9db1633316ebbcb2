package handlers

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// ownAPI serves the service's own protected routes under /api.
type ownAPI struct {
	auth    *auth.Service
	origins *middleware.Origins
}

// marketingConsent is POST /api/marketing-consent: the call itself is the consent. It only grants
// (there is no revoke here), and records where it came from as evidence: the page it was sent
// from (a trusted Referer's path) or "api".
func (h *ownAPI) marketingConsent(c *fiber.Ctx) error {
	if _, err := (bodyReader{origins: h.origins}).read(c); err != nil {
		return err
	}
	source := "api"
	if ref, err := url.Parse(c.Get(fiber.HeaderReferer)); err == nil && ref.Host != "" && h.origins.Trusted(ref.Scheme+"://"+ref.Host) {
		source = ref.Path
	}
	st := middleware.Current(c)
	err := h.auth.GrantMarketingConsent(c.UserContext(), st.User.ID, auth.ConsentEvidence{
		Source: source, Client: auth.ClientMeta{IPAddress: middleware.ClientIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)},
	})
	if err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// me is GET /api/me: the caller's account and preferences.
func (h *ownAPI) me(c *fiber.Ctx) error {
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

// healthAPI serves the probes of orchestrators and load balancers.
type healthAPI struct {
	ready func(context.Context) error
	log   *slog.Logger
}

// alive is GET /healthz: the process is up and serving HTTP.
func (h *healthAPI) alive(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz is GET /readyz: the database takes writes (Deps.Ready), so requests can be served.
func (h *healthAPI) readyz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	if h.ready != nil {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		if err := h.ready(ctx); err != nil {
			h.log.WarnContext(c.UserContext(), "not ready", "error", err)
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable"})
		}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// deleteAccount is POST /api/account/delete: the account is deleted with a grace period, every
// session ends, and signing in before the answer's deleteAt restores it. The session must have
// signed in within auth.FreshAge (else 403 SESSION_NOT_FRESH: sign in again).
func (h *ownAPI) deleteAccount(c *fiber.Ctx, sessions *middleware.Sessions) error {
	if _, err := (bodyReader{origins: h.origins}).read(c); err != nil {
		return err
	}
	at, err := h.auth.DeleteAccount(c.UserContext(), middleware.Current(c))
	if err != nil {
		return err
	}
	sessions.Clear(c)
	return c.JSON(fiber.Map{"success": true, "deleteAt": isoTime(at)})
}
