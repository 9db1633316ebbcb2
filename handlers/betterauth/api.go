// Package betterauth is the JSON API under /api: better-auth's email-OTP API under /api/auth, wire
// compatible with better-auth's clients, and the service's own routes beside it, in the same
// format. It owns that format: the JSON shapes (wire.go), the strict body reader (body.go) and
// one typed request per route (requests.go), the error codes and messages with the one mapping
// from errors to them (errors.go), and, in the credential package, the cookie and header names
// and the signed token format. The handlers parse, call auth, and shape answers; the rules live
// in auth.
package betterauth

import (
	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// Deps are what the JSON API needs.
type Deps struct {
	Auth     *auth.Service
	Sessions *middleware.Sessions
	Origins  *middleware.Origins
	// Locales chooses the language of the e-mails a request sends before an account exists (a
	// sign-in code, the welcome e-mail); the API's own messages stay English.
	Locales *middleware.Locales
}

// API serves the JSON API.
type API struct {
	auth     *auth.Service
	sessions *middleware.Sessions
	origins  *middleware.Origins
	locales  *middleware.Locales
	body     bodyReader
}

// New returns the JSON API.
func New(d Deps) *API {
	return &API{auth: d.Auth, sessions: d.Sessions, origins: d.Origins, locales: d.Locales, body: bodyReader{origins: d.Origins}}
}

// Mount registers the API's routes under /api, each with its per-IP limits.
func (h *API) Mount(app *fiber.App, limiter *middleware.RateLimiter) {
	api := app.Group("/api", func(c *fiber.Ctx) error {
		// Answers here are about one person; no cache may keep them.
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Next()
	}, limiter.Limit(middleware.RuleDefault))
	signedIn := h.sessions.Require(middleware.Options{}, errUnauthorized)
	fromDB := h.sessions.Require(middleware.Options{FromDatabase: true}, errUnauthorized)
	sendLimit, signInLimit := limiter.Limit(middleware.RuleSendCode), limiter.Limit(middleware.RuleSignIn)

	ba := api.Group("/auth")
	ba.Post("/email-otp/send-verification-otp", sendLimit, h.sendVerificationOTP)
	ba.Post("/sign-in/email-otp", signInLimit, h.signInEmailOTP)
	ba.Get("/get-session", h.getSession)
	ba.Post("/get-session", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderAllow, "GET, HEAD")
		return errGetSessionByPost
	})
	ba.Post("/sign-out", h.signOut)
	ba.Post("/update-user", fromDB, h.updateUser)
	ba.Get("/ok", h.ok)
	ba.Post("/email-otp/request-email-change", sendLimit, fromDB, h.requestEmailChange)
	ba.Post("/email-otp/change-email", signInLimit, fromDB, h.changeEmailWithCode)
	ba.Post("/change-email", sendLimit, fromDB, h.changeEmail)
	ba.Get("/verify-email", signInLimit, h.verifyEmail)
	ba.Get("/list-sessions", fromDB, h.listSessions)
	ba.Post("/revoke-session", fromDB, h.revokeSession)
	ba.Post("/revoke-sessions", fromDB, h.revokeSessions)
	ba.Post("/revoke-other-sessions", fromDB, h.revokeOtherSessions)
	ba.Post("/delete-user", fromDB, h.deleteUser)
	ba.Get("/list-accounts", fromDB, h.listAccounts)
	ba.Get("/token", fromDB, h.token)
	ba.Get("/jwks", h.jwks)
	h.mountAdmin(ba, fromDB)

	api.Get("/openapi.json", openAPIDocument)
	api.Get("/me", signedIn, h.me)
	api.Post("/marketing-consent", fromDB, h.marketingConsent)
	api.Post("/marketing-consent/withdraw", fromDB, h.withdrawMarketingConsent)
	api.Post("/account/delete", fromDB, h.deleteAccount)
}
