package middleware

import (
	"encoding/json"
	"errors"
	"net/url"
	"path"
	"strings"

	"codeauth/handlers/betterauth/credential"

	"github.com/gofiber/fiber/v2"
)

// AlwaysTrustedOrigins are trusted whatever the configuration: the shells of hybrid mobile apps
// and plain local development.
var AlwaysTrustedOrigins = []string{"capacitor://localhost", "ionic://localhost", "http://localhost"}

// The refusals of the origin checks. They say what was refused; the HTTP layer answers each
// (handlers/betterauth gives them better-auth's statuses and codes).
var (
	ErrMissingOrigin        = errors.New("middleware: missing or null origin")
	ErrInvalidOrigin        = errors.New("middleware: invalid origin")
	ErrCrossSiteNavigation  = errors.New("middleware: cross-site navigation login blocked")
	ErrInvalidCallbackURL   = errors.New("middleware: invalid callbackURL")
	ErrInvalidRedirectURL   = errors.New("middleware: invalid redirectTo")
	ErrInvalidErrorCallback = errors.New("middleware: invalid errorCallbackURL")
	ErrInvalidNewUserURL    = errors.New("middleware: invalid newUserCallbackURL")
	// ErrRedirectNotString is a redirect field of a JSON body that is not a string.
	ErrRedirectNotString = errors.New("middleware: redirect target is not a string")
)

// originPattern is one trusted origin. Web origins match exactly (scheme, host and port; the
// host without regard to case); custom-scheme origins match their scheme, their host (exactly)
// when they name one, and their path and anything below it.
type originPattern struct {
	scheme, host, path string
}

// Origins decides which origins and redirect targets are trusted.
type Origins struct {
	patterns []originPattern
}

// NewOrigins trusts baseURL's origin, AlwaysTrustedOrigins and extra (already validated by
// config).
func NewOrigins(baseURL string, extra []string) *Origins {
	o := &Origins{}
	for _, s := range append(append([]string{baseURL}, AlwaysTrustedOrigins...), extra...) {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			continue
		}
		p := originPattern{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Host)}
		if p.scheme != "http" && p.scheme != "https" {
			// The host of a custom-scheme URL is opaque: browsers keep its case, so it is compared
			// as written.
			p.host = u.Host
			p.path = strings.TrimSuffix(cleanPath(u.Path), "/")
		}
		o.patterns = append(o.patterns, p)
	}
	return o
}

// cleanPath normalises an already decoded URL path, so "a/../b" compares as what it means.
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean("/" + p)
}

// encodedSeparator reports a raw path that hides a separator or an escape in percent-encoding
// (%2f, %5c, %25): such a path decodes differently in different hands.
func encodedSeparator(rawPath string) bool {
	l := strings.ToLower(rawPath)
	return strings.Contains(l, "%2f") || strings.Contains(l, "%5c") || strings.Contains(l, "%25")
}

// Trusted reports whether the absolute URL or origin s belongs to a trusted origin.
func (o *Origins) Trusted(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\\") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.User != nil {
		return false
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	for _, p := range o.patterns {
		if p.scheme != scheme {
			continue
		}
		if scheme == "http" || scheme == "https" {
			if host != "" && host == p.host {
				return true
			}
			continue
		}
		if p.host != "" && p.host != u.Host {
			continue
		}
		if p.path == "" {
			return true
		}
		if encodedSeparator(u.EscapedPath()) {
			continue
		}
		if cp := cleanPath(u.Path); cp == p.path || strings.HasPrefix(cp, p.path+"/") {
			return true
		}
	}
	return false
}

// SafeRedirect reports whether target may be redirected to: a trusted origin, or a plain
// relative path. Relative paths must start with a single "/" followed by letters, digits and
// -._+/@ only, with an optional query of those and =&%, and have no "." or ".." segment; so
// "//evil", "/\evil", "/%2f%2fevil", "/..%2f" and "/.//evil" are all refused.
func (o *Origins) SafeRedirect(target string) bool {
	if strings.HasPrefix(target, "/") {
		return safeRelativePath(target)
	}
	return o.Trusted(target)
}

func safeRelativePath(s string) bool {
	if len(s) < 1 || s[0] != '/' || len(s) > 2048 {
		return false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	inQuery := false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._+/@", c) >= 0:
		case c == '?' && !inQuery:
			inQuery = true
		case inQuery && (c == '=' || c == '&' || c == '%'):
		default:
			return false
		}
	}
	// Browsers remove dot segments before they follow a path (RFC 3986 5.2.4), so the path they
	// go to is not the one judged above: "/.//evil.test" becomes "//evil.test", another host for
	// anything that reads it as a URL again. No page links with them, so they are refused rather
	// than resolved.
	path, _, _ := strings.Cut(s, "?")
	return !hasDotSegment(path)
}

// hasDotSegment reports whether the URL path p has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for p != "" {
		var segment string
		segment, p, _ = strings.Cut(p, "/")
		if segment == "." || segment == ".." {
			return true
		}
	}
	return false
}

// CheckOrigin returns the origin and CSRF check for state-changing requests (anything but GET,
// HEAD and OPTIONS), as better-auth does it:
//   - with a Cookie header, Origin (or Referer) must be a trusted origin: missing or "null" is
//     ErrMissingOrigin, anything else ErrInvalidOrigin. Expo clients' expo-origin header
//     stands in for a missing Origin. "Origin: null" from a same-origin page (Sec-Fetch-Site:
//     same-origin, e.g. under Referrer-Policy: no-referrer) is accepted;
//   - without cookies, a request carrying a bearer token is not checked (native apps, back ends);
//   - any other cookieless request that shows browser signs (Sec-Fetch-Site, Origin or Referer)
//     must come from a trusted origin too, which stops login CSRF and cross-site code requests, and a
//     cross-site navigation is ErrCrossSiteNavigation. Requests without any of them
//     (curl, native apps) pass.
//
// It also checks the redirect targets in the query string (callbackURL, redirectTo,
// errorCallbackURL, newUserCallbackURL) against SafeRedirect: ErrInvalidCallbackURL and
// friends. The same fields in a JSON body are checked by CheckRedirectFields.
func (o *Origins) CheckOrigin() fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := o.checkRedirects(c); err != nil {
			return err
		}
		switch c.Method() {
		case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
			return c.Next()
		}
		h := &c.Context().Request.Header
		origin := string(h.Peek(fiber.HeaderOrigin))
		if origin == "" {
			origin = string(h.Peek("Expo-Origin"))
		}
		if origin == "" {
			if ref := string(h.Peek(fiber.HeaderReferer)); ref != "" {
				if u, err := url.Parse(ref); err == nil && u.Scheme != "" && u.Host != "" {
					origin = u.Scheme + "://" + u.Host
				} else {
					origin = "null"
				}
			}
		}
		fetchSite := string(h.Peek("Sec-Fetch-Site"))
		hasCookie := len(h.Peek(fiber.HeaderCookie)) > 0
		if !hasCookie {
			if len(h.Peek(fiber.HeaderAuthorization)) > 0 {
				return c.Next()
			}
			// Browsers send Sec-Fetch-Site on every request; Node's fetch sends Sec-Fetch-Mode
			// but never Sec-Fetch-Site, so it alone marks a browser. (better-auth also treats
			// Sec-Fetch-Mode as a browser sign, which refuses Node back ends that send no Origin.)
			if fetchSite == "" && origin == "" {
				return c.Next()
			}
			if fetchSite == "cross-site" && string(h.Peek("Sec-Fetch-Mode")) == "navigate" {
				return ErrCrossSiteNavigation
			}
		}
		switch {
		case origin == "null" && fetchSite == "same-origin":
			return c.Next()
		case origin == "" || origin == "null":
			return ErrMissingOrigin
		case !o.Trusted(origin):
			return ErrInvalidOrigin
		}
		return c.Next()
	}
}

// redirectFields are the request fields that name where a browser will be sent, with the
// refusal each gets.
var redirectFields = []struct {
	name string
	err  error
}{
	{"callbackURL", ErrInvalidCallbackURL},
	{"redirectTo", ErrInvalidRedirectURL},
	{"errorCallbackURL", ErrInvalidErrorCallback},
	{"newUserCallbackURL", ErrInvalidNewUserURL},
}

// checkRedirects checks every redirect field of the query string, each occurrence. Body fields
// are checked by the handlers, on the body they parse (CheckRedirectFields): checking raw bytes
// here could be dodged with an escaped key ("callback\u0055RL").
func (o *Origins) checkRedirects(c *fiber.Ctx) error {
	args := c.Context().QueryArgs()
	for _, f := range redirectFields {
		for _, v := range args.PeekMulti(f.name) {
			if !o.SafeRedirect(string(v)) {
				return f.err
			}
		}
	}
	return nil
}

// CheckRedirectFields checks the redirect fields of a parsed JSON body (raw values by field
// name): the field's error for an unsafe target, ErrRedirectNotString for a value that is not a
// string.
func (o *Origins) CheckRedirectFields(fields map[string]json.RawMessage) error {
	for _, f := range redirectFields {
		raw, ok := fields[f.name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ErrRedirectNotString
		}
		if !o.SafeRedirect(s) {
			return f.err
		}
	}
	return nil
}

// CORS answers cross-origin requests from trusted origins: the origin is echoed with
// credentials allowed, preflights are answered, and set-auth-token and set-auth-jwt are exposed
// so browser apps can read them. Untrusted origins get no grant at all (and so cannot read any answer).
func (o *Origins) CORS() fiber.Handler {
	return func(c *fiber.Ctx) error {
		origin := c.Get(fiber.HeaderOrigin)
		c.Vary(fiber.HeaderOrigin)
		if origin == "" || !o.Trusted(origin) {
			if c.Method() == fiber.MethodOptions && c.Get(fiber.HeaderAccessControlRequestMethod) != "" {
				return c.SendStatus(fiber.StatusNoContent)
			}
			return c.Next()
		}
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
		ExposeHeader(c, credential.SetAuthTokenHeader)
		ExposeHeader(c, credential.SetAuthJWTHeader)
		if c.Method() == fiber.MethodOptions && c.Get(fiber.HeaderAccessControlRequestMethod) != "" {
			c.Set(fiber.HeaderAccessControlAllowMethods, "GET, POST, OPTIONS")
			if h := c.Get(fiber.HeaderAccessControlRequestHeaders); h != "" {
				c.Set(fiber.HeaderAccessControlAllowHeaders, h)
			}
			c.Set(fiber.HeaderAccessControlMaxAge, "600")
			c.Vary(fiber.HeaderAccessControlRequestMethod, fiber.HeaderAccessControlRequestHeaders)
			return c.SendStatus(fiber.StatusNoContent)
		}
		return c.Next()
	}
}
