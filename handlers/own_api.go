package handlers

import (
	"context"
	"log/slog"
	"time"

	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// ownAPI serves the service's own protected routes under /api.
type ownAPI struct {
	auth *auth.Service
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

// readyz is GET /readyz: the database answers, so requests can be served.
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
