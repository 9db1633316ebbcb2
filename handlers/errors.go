package handlers

import (
	"errors"
	"log/slog"
	"math"
	"strconv"

	"codeauth/auth"
	"codeauth/handlers/betterauth"
	"codeauth/handlers/pages"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// ErrorHandler writes the answer for an error returned by a handler or raised by the server. The
// error's status comes from the one mapping (betterauth.Answer); the body is the API's JSON under
// /api (and for the probes, and for a request whose path the server lost), and elsewhere the
// pages' own rendering (pages.RenderError) in the request's language, which locales chooses,
// with the header of the person sessions finds signed in. Unexpected errors are logged with the
// request's id and answered with a generic 500 that reveals nothing about the cause.
func ErrorHandler(log *slog.Logger, site pages.Site, locales *middleware.Locales, sessions *middleware.Sessions) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		answer, known := betterauth.Answer(err)
		switch {
		case !known:
			log.ErrorContext(c.UserContext(), "request failed", "method", c.Method(), "path", c.Path(), "error", err)
		case answer.Status == fiber.StatusServiceUnavailable:
			middleware.NoteUnavailable(c, log, err)
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		var limited *auth.RateLimitError
		if errors.As(err, &limited) {
			secs := strconv.FormatInt(int64(math.Ceil(limited.RetryAfter.Seconds())), 10)
			c.Set(betterauth.RetryAfterHeader, secs)
			c.Set(fiber.HeaderRetryAfter, secs)
		}
		if kind := middleware.KindOf(c); kind == middleware.APIPath || kind == middleware.ProbePath {
			return betterauth.WriteError(c, answer)
		}
		return pages.RenderError(c, site, locales, sessions, answer.Status, answer.Message, err)
	}
}
