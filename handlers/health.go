package handlers

import (
	"context"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
)

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
