package middleware

import (
	"net/url"
	"strings"
	"sync"

	"codeauth/auth"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
)

// SignInPath is where people without a session are sent.
const SignInPath = "/auth/sign-in"

// Public pages by path (the product's rules): these prefixes and exact paths, plus every route
// declared with the public layout.
var (
	publicPrefixes = []string{"/auth", "/ai", "/blog", "/checkout", "/docs", "/templates"}
	publicExact    = []string{"/", "/contact", "/roadmap", "/changelog"}
)

// PageGuard makes pages private by default: a request for any page that is not public, without a
// session, is sent to the sign-in page with a redirect back to where it was going.
type PageGuard struct {
	sessions *Sessions
	declared map[string]bool
	// pages are the app's page routes a GET opens, as path segments (":id" stands for any one),
	// read from the router at the first request that needs them, when every route is mounted.
	pages     [][]string
	pagesOnce sync.Once
}

// NewPageGuard returns a guard that reads sessions through s.
func NewPageGuard(s *Sessions) *PageGuard {
	return &PageGuard{sessions: s, declared: map[string]bool{}}
}

// DeclarePublic records a route rendered with the public layout as public. Routes are declared
// when they are registered, so the decision comes from the route, not from guessing.
func (g *PageGuard) DeclarePublic(path string) { g.declared[normalizePagePath(path)] = true }

// normalizePagePath matches paths the way the router does (ASCII case folded with the router's
// own function, trailing slashes ignored), so "/ACCOUNT/" gets the same decision as "/account".
func normalizePagePath(p string) string {
	return trimTrailingSlashes(utils.ToLower(p))
}

func underAny(p string, prefixes []string) bool {
	for _, prefix := range prefixes {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// IsPublic reports whether the page at path may be seen without a session.
func (g *PageGuard) IsPublic(path string) bool {
	p := normalizePagePath(path)
	if underAny(p, publicPrefixes) || g.declared[p] {
		return true
	}
	for _, e := range publicExact {
		if p == e {
			return true
		}
	}
	return false
}

// Handler sends requests for private pages without a session to the sign-in page. htmx requests
// get 401 with HX-Redirect, so the whole page moves instead of a sign-in form being swapped into
// a fragment.
func (g *PageGuard) Handler() fiber.Handler {
	return func(c *fiber.Ctx) error {
		// The API answers 401 by itself; assets and probes are open.
		if KindOf(c) != PagePath || g.IsPublic(c.Path()) {
			return c.Next()
		}
		st, err := g.sessions.Resolve(c, Options{})
		if err != nil {
			return err
		}
		if st != nil {
			return c.Next()
		}
		target := SignInURL(g.returnPath(c))
		if c.Get("HX-Request") == "true" {
			c.Set("HX-Redirect", target)
			return c.SendStatus(fiber.StatusUnauthorized)
		}
		return c.Redirect(target, fiber.StatusSeeOther)
	}
}

// returnPath is where a request for a private page goes back to once its sender has signed in:
// the page itself for a GET or HEAD; for a form's POST, whose path is an action answered only to
// a POST, the page the form was sent from, when the browser said so (a Referer of this host) and
// it is a page a GET opens (a form refused without JavaScript is answered at its action's path,
// which the next form sent from it names as its Referer); else nowhere in particular (the
// sign-in page's default).
func (g *PageGuard) returnPath(c *fiber.Ctx) string {
	if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
		return string(c.Request().URI().RequestURI())
	}
	ref, err := url.Parse(c.Get(fiber.HeaderReferer))
	if err != nil || ref.Host == "" || ref.Host != string(c.Request().Host()) || !g.isPage(c.App(), ref.Path) {
		return ""
	}
	return ref.RequestURI()
}

// isPage reports whether a GET of path reaches one of app's page routes, matched as the router
// matches (ASCII case folded, trailing slashes ignored).
func (g *PageGuard) isPage(app *fiber.App, path string) bool {
	g.pagesOnce.Do(func() {
		for _, r := range app.GetRoutes(true) {
			if r.Method == fiber.MethodGet && KindOfPath(r.Path) == PagePath {
				g.pages = append(g.pages, pathSegments(r.Path))
			}
		}
	})
	segments := pathSegments(path)
	for _, route := range g.pages {
		if segmentsMatch(route, segments) {
			return true
		}
	}
	return false
}

// pathSegments splits a path, case folded and without its trailing slashes, at its slashes.
func pathSegments(path string) []string {
	return strings.Split(normalizePagePath(path), "/")
}

// segmentsMatch reports whether the segments of a path fit a route's: equal, or any one that is
// not empty for a parameter (":id").
func segmentsMatch(route, path []string) bool {
	if len(route) != len(path) {
		return false
	}
	for i, seg := range route {
		if strings.HasPrefix(seg, ":") && path[i] != "" {
			continue
		}
		if seg != path[i] {
			return false
		}
	}
	return true
}

// SignInURL is the sign-in page with a redirect back to next, when next is a plain relative path
// (anything else is dropped).
func SignInURL(next string) string {
	if next == "" || next == "/" || !safeRelativePath(next) {
		return SignInPath
	}
	return SignInPath + "?redirect=" + url.QueryEscape(next)
}

// ReauthParam is the query parameter that asks the sign-in page to sign in again even though a
// session exists: a session too old for a sensitive change (auth.FreshAge) is replaced by a new
// one.
const ReauthParam = "reauth"

// ReauthURL is the sign-in page asking to sign in again, then to go back to next (a plain
// relative path).
func ReauthURL(next string) string {
	q := url.Values{ReauthParam: {"1"}}
	if next = SafeNext(next); next != "" {
		q.Set("redirect", next)
	}
	return SignInPath + "?" + q.Encode()
}

// SafeNext returns next when it is a plain relative path a page may redirect to, else "".
func SafeNext(next string) string {
	if safeRelativePath(next) {
		return next
	}
	return ""
}

// contentSecurityPolicy allows the pages' own scripts, styles and images only: no inline
// scripts, no eval, no framing, forms posting only to this origin.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// apiSecurityPolicy is for JSON answers, which are never to be rendered or framed.
const apiSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"

// SecurityHeaders sets the browser security headers (SetSecurityHeaders) on every answer that
// passes through the middleware chain.
func SecurityHeaders(secure bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		SetSecurityHeaders(c, secure)
		return c.Next()
	}
}

// SetSecurityHeaders sets the browser security headers for c's kind of path: a strict
// Content-Security-Policy, no framing, no MIME sniffing, a referrer policy (no-referrer on the
// e-mail link landing pages, whose URLs carry a token), and HSTS over https. Pages are never
// cached. It is the one list of them: the middleware chain sets them with SecurityHeaders, and
// the answers to what the HTTP server refuses before the chain runs set them here.
func SetSecurityHeaders(c *fiber.Ctx, secure bool) {
	h := &c.Response().Header
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if secure {
		h.Set(fiber.HeaderStrictTransportSecurity, "max-age=31536000; includeSubDomains")
	}
	switch KindOf(c) {
	case APIPath:
		h.Set(fiber.HeaderContentSecurityPolicy, apiSecurityPolicy)
	case StaticPath:
	default:
		policy := contentSecurityPolicy
		if secure {
			policy += "; upgrade-insecure-requests"
		}
		h.Set(fiber.HeaderContentSecurityPolicy, policy)
		h.Set(fiber.HeaderXFrameOptions, "DENY")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		h.Set(fiber.HeaderCacheControl, "no-store")
		if p := c.Path(); isPagePath(p, "/auth/verify-email") || isPagePath(p, "/auth/restore-email") || isPagePath(p, auth.SignInLinkPath) {
			// These URLs carry a link token: it must not leak to anyone the page links to.
			h.Set(fiber.HeaderReferrerPolicy, "no-referrer")
		} else {
			h.Set(fiber.HeaderReferrerPolicy, "strict-origin-when-cross-origin")
		}
	}
}
