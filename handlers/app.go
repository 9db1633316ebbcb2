// Package handlers assembles the HTTP application over the auth domain: the JSON API
// (handlers/betterauth), the HTML pages (handlers/pages), the health probes and the static
// assets, the middleware around them, and the one error handler that answers what they return.
// Each audience is its own package; what they share is here or in middleware.
package handlers

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/handlers/betterauth"
	"codeauth/handlers/betterauth/credential"
	"codeauth/handlers/pages"
	"codeauth/i18n"
	"codeauth/middleware"
	"codeauth/static"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/compress"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"go.opentelemetry.io/otel/trace"
)

// BodyLimit is the largest request body accepted; larger ones get 413.
const BodyLimit = 16 * 1024

// Deps are what the HTTP layer needs.
type Deps struct {
	Auth *auth.Service
	// Secret is AUTH_SECRET, which signs the session tokens (credential.Signer). Required.
	Secret []byte
	// BaseURL is the service's public origin (AUTH_URL); it is always trusted.
	BaseURL string
	// TrustedOrigins and TrustedProxies come from AUTH_TRUSTED_ORIGINS and AUTH_TRUSTED_PROXIES.
	TrustedOrigins []string
	TrustedProxies []netip.Prefix
	// NoProxy is AUTH_TRUSTED_PROXIES=none: clients connect directly, and the connection's address
	// is theirs whatever the forwarding headers say.
	NoProxy bool
	// RateStore holds the per-IP counters; nil means a bounded in-memory store.
	RateStore middleware.RateStore
	// Now is the clock of the per-IP windows; nil means time.Now.
	Now func() time.Time
	// CookiePrefix and Secure shape the session cookies (AUTH_COOKIE_PREFIX, https AUTH_URL).
	CookiePrefix string
	Secure       bool
	// SiteName names the service on its pages (SITE_NAME).
	SiteName string
	// PrivacyURL and TermsURL are the operator's policies, linked from every page's footer when
	// set (SITE_PRIVACY_URL, SITE_TERMS_URL).
	PrivacyURL, TermsURL string
	// DefaultLocale is the language of pages and e-mails when neither the language switch nor
	// the browser chooses one the service speaks (AUTH_DEFAULT_LOCALE); "" or a language it
	// does not speak is English.
	DefaultLocale string
	// Ready reports whether the service can serve: the database takes writes (models.Ready).
	Ready  func(context.Context) error
	Logger *slog.Logger
	// Observer, when set, is told of every answered request and every per-IP refusal: the
	// Prometheus metrics.
	Observer middleware.Observer
	// Tracer, when set, makes an OpenTelemetry span of every request (middleware.Tracing).
	Tracer trace.TracerProvider
}

// NewApp builds the Fiber application with every route and middleware. Tests drive the same
// application the binary serves. It panics without Deps.Secret: no session could be signed.
func NewApp(d Deps) *fiber.App {
	if len(d.Secret) == 0 {
		panic("handlers: Deps.Secret (AUTH_SECRET) is required to sign session tokens")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	siteName := d.SiteName
	if siteName == "" {
		siteName = "codeauth"
	}
	def, ok := i18n.Lookup(d.DefaultLocale)
	if !ok {
		def = i18n.English()
	}
	locales := middleware.NewLocales(def, d.CookiePrefix, d.Secure)
	sessions := middleware.NewSessions(d.Auth, credential.NewSigner(d.Secret), d.CookiePrefix, d.Secure)
	site := pages.Site{Name: siteName, PrivacyURL: d.PrivacyURL, TermsURL: d.TermsURL}
	errorHandler := ErrorHandler(log, site, locales, sessions)
	ips := middleware.NewIPResolver(d.TrustedProxies, d.NoProxy, log)
	accessLog := middleware.NewAccessLog(log, errorHandler, d.Observer, ips)
	// What the HTTP server refuses before the middleware chain runs (a body over BodyLimit, a
	// malformed request, headers too large, an unknown method) reaches Fiber's ErrorHandler with
	// a context no middleware has seen: it gets a request id, an access-log line and the security
	// headers here, from the same places as every other answer.
	serverErrors := func(c *fiber.Ctx, err error) error {
		return accessLog.Refused(c, func() error {
			middleware.SetSecurityHeaders(c, d.Secure)
			return errorHandler(c, err)
		})
	}
	app := fiber.New(fiber.Config{
		AppName:               "codeauth",
		BodyLimit:             BodyLimit,
		ReadBufferSize:        8192,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          10 * time.Second,
		IdleTimeout:           60 * time.Second,
		DisableStartupMessage: true,
		// No route accepts multipart bodies; never parse them.
		DisablePreParseMultipartForm: true,
		ErrorHandler:                 serverErrors,
	})
	middleware.HookServer(app)

	origins := middleware.NewOrigins(d.BaseURL, d.TrustedOrigins)
	store := d.RateStore
	if store == nil {
		store = middleware.NewMemoryRateStore(middleware.DefaultMaxRateKeys)
	}
	limiter := middleware.NewRateLimiter(store, d.Now, d.Observer)
	api := betterauth.New(betterauth.Deps{Auth: d.Auth, Sessions: sessions, Origins: origins, Locales: locales})
	pageSet := pages.New(pages.Deps{Auth: d.Auth, Sessions: sessions, Origins: origins, Locales: locales, Site: site, Logger: log})
	health := &healthAPI{ready: d.Ready, log: log}
	guard := middleware.NewPageGuard(sessions)

	if d.Tracer != nil {
		// Outermost: the span covers the whole request, and sees the status the access log's
		// handler sends.
		app.Use(middleware.Tracing(d.Tracer))
	}
	app.Use(accessLog.Handler())
	app.Use(ips.Handler())
	app.Use(recover.New())
	app.Use(middleware.SecurityHeaders(d.Secure))
	// Early, but after the access log and the headers, so a refusal is logged and looks like
	// every other answer.
	app.Use(middleware.Framing(betterauth.ErrFraming))
	app.Use(func(c *fiber.Ctx) error {
		// Compressed request bodies are refused: decompressing them would let a few hundred
		// bytes on the wire expand far past BodyLimit. No client of this API compresses.
		if ce := c.Get(fiber.HeaderContentEncoding); ce != "" && !strings.EqualFold(ce, "identity") {
			return betterauth.ErrContentEncoding
		}
		return c.Next()
	})
	app.Use(origins.CORS())
	app.Use(origins.CheckOrigin())

	app.Get("/healthz", health.alive)
	app.Get("/readyz", health.readyz)
	app.Get("/static/:name", serveStatic)

	api.Mount(app, limiter)

	// Pages. HTML is compressed (the API's small JSON answers are not worth it); every page is
	// private unless public by path or declared public where pages.Mount registers it.
	app.Use(compress.New(compress.Config{
		Level: compress.LevelBestSpeed,
		Next: func(c *fiber.Ctx) bool {
			kind := middleware.KindOf(c)
			return kind == middleware.APIPath || kind == middleware.StaticPath
		},
	}))
	app.Use(guard.Handler())
	app.Use(pages.RequireForms)
	pageSet.Mount(app, limiter, guard)

	// Unmatched paths fall through to Fiber's own 404 (or 405 when another method matches),
	// which ErrorHandler answers in JSON under /api and as a page elsewhere.
	return app
}

// serveStatic serves an embedded asset, precompressed, with a one-year immutable lifetime when
// the request names its current hash.
func serveStatic(c *fiber.Ctx) error {
	a := static.Get(c.Params("name"))
	if a == nil {
		return fiber.ErrNotFound
	}
	etag := `"` + a.Hash + `"`
	c.Set(fiber.HeaderETag, etag)
	c.Vary(fiber.HeaderAcceptEncoding)
	if c.Query("v") == a.Hash {
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	}
	if c.Get(fiber.HeaderIfNoneMatch) == etag {
		return c.SendStatus(fiber.StatusNotModified)
	}
	body, encoding := a.Pick(c.Get(fiber.HeaderAcceptEncoding))
	if encoding != "" {
		c.Set(fiber.HeaderContentEncoding, encoding)
	}
	c.Set(fiber.HeaderContentType, a.ContentType)
	return c.Send(body)
}
