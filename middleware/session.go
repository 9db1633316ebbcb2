package middleware

import (
	"net/url"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/handlers/betterauth/credential"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Sessions finds the caller's session from the request and writes session cookies, in
// better-auth's format (handlers/betterauth/credential): the token cookie holds the signed token
// and the data cookie the sealed cookie cache. It owns the cookies' attributes: HttpOnly,
// SameSite=Lax, Path=/, and Secure over https.
type Sessions struct {
	auth        *auth.Service
	signer      *credential.Signer
	tokenCookie string
	dataCookie  string
	adminCookie string
	// browserCookie marks the browser a code was asked from (the sign-in link).
	browserCookie string
	secure        bool
}

// NewSessions returns the session middleware for the cookie prefix, signing tokens with signer;
// secure is true when the service is served over https.
func NewSessions(svc *auth.Service, signer *credential.Signer, cookiePrefix string, secure bool) *Sessions {
	token, data := credential.CookieNames(cookiePrefix, secure)
	return &Sessions{auth: svc, signer: signer, tokenCookie: token, dataCookie: data,
		adminCookie: credential.AdminCookieName(cookiePrefix, secure), browserCookie: credential.BrowserCookieName(cookiePrefix, secure),
		secure: secure}
}

// CookieSent reports whether the request carried a session cookie, which marks a browser.
func (m *Sessions) CookieSent(c *fiber.Ctx) bool {
	return len(c.Context().Request.Header.Cookie(m.tokenCookie)) > 0
}

// Credential is the session token a request presented.
type Credential struct {
	// Token is the raw token, its signature checked: the bearer token when there is a valid one,
	// else the session cookie's.
	Token string
	// FromCookie is true when Token came from the session cookie.
	FromCookie bool
	// CookieToken is the session cookie's token, when the cookie verified.
	CookieToken string
	// CookieInvalid reports a session cookie this service did not sign.
	CookieInvalid bool
}

// Credential extracts the session token: a bearer token in Authorization first (the signed
// set-auth-token value or the raw token; the scheme is case-insensitive and surrounding spaces are
// ignored), then the session cookie. A bearer token that does not verify is ignored, as
// better-auth does, and the cookie is tried. A request with more than one Authorization header is
// ambiguous and is treated as carrying no credential at all.
func (m *Sessions) Credential(c *fiber.Ctx) Credential {
	var cred Credential
	if cookie := c.Context().Request.Header.Cookie(m.tokenCookie); len(cookie) > 0 {
		if token, ok := m.signer.Verify(string(cookie)); ok {
			cred.CookieToken = token
		} else {
			cred.CookieInvalid = true
		}
	}
	auths := c.Context().Request.Header.PeekAll(fiber.HeaderAuthorization)
	if len(auths) > 1 {
		return cred
	}
	if len(auths) == 1 {
		v := strings.TrimSpace(string(auths[0]))
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			if token, ok := m.signer.Bearer(strings.TrimSpace(v[7:])); ok {
				cred.Token = token
				return cred
			}
		}
	}
	cred.Token, cred.FromCookie = cred.CookieToken, cred.CookieToken != ""
	return cred
}

// Options say how strictly a request's session is checked.
type Options struct {
	// FromDatabase ignores the cookie cache: routes that change the account use it.
	FromDatabase bool
	// NoRefresh leaves the session's expiry alone.
	NoRefresh bool
}

const localsKey = "codeauth.session"

// Resolve returns the request's live session, or nil. It writes the cookies the answer calls for:
// a refreshed session gets its cookie and set-auth-token again, a browser answered from the
// database gets a fresh cookie cache, and a session cookie that leads nowhere is expired.
// The result is kept for the rest of the request.
func (m *Sessions) Resolve(c *fiber.Ctx, opts Options) (*auth.SessionState, error) {
	if st, ok := c.Locals(localsKey).(*auth.SessionState); ok && !(st.Cached && opts.FromDatabase) {
		return st, nil
	}
	cred := m.Credential(c)
	if cred.Token == "" {
		if cred.CookieInvalid {
			m.Clear(c) // a cookie this service did not sign
		}
		return nil, nil
	}
	q := auth.SessionQuery{Token: cred.Token, FromDatabase: opts.FromDatabase, NoRefresh: opts.NoRefresh}
	if cred.FromCookie {
		// The request's bytes, valid while it is served: Session keeps no part of them.
		q.Cache = c.Context().Request.Header.Cookie(m.dataCookie)
	}
	st, err := m.auth.Session(c.UserContext(), q)
	if err != nil {
		return nil, err
	}
	if st == nil {
		if cred.FromCookie {
			m.Clear(c) // expired, signed out or deleted
		}
		return nil, nil
	}
	switch {
	case st.Refreshed:
		m.Issue(c, st, cred.FromCookie)
	case cred.FromCookie && !st.Cached:
		m.setCache(c, st)
	}
	c.Locals(localsKey, st)
	return st, nil
}

// Require returns a handler that lets the request through only with a live session, answering
// 401 otherwise. With opts.FromDatabase the session is checked against the database even when a
// cookie cache is present.
func (m *Sessions) Require(opts Options, unauthorized error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		st, err := m.Resolve(c, opts)
		if err != nil {
			return err
		}
		if st == nil {
			return unauthorized
		}
		return c.Next()
	}
}

// Current returns the session Require or Resolve found for this request, or nil.
func Current(c *fiber.Ctx) *auth.SessionState {
	st, _ := c.Locals(localsKey).(*auth.SessionState)
	return st
}

// Issue writes the session cookie and set-auth-token for st (sign-in, refresh, changes to the
// account), and with cache the cookie cache too, then remembers st for the rest of the request.
func (m *Sessions) Issue(c *fiber.Ctx, st *auth.SessionState, cache bool) {
	signed := m.signer.Sign(st.Token)
	maxAge := int(m.auth.CookieMaxAge(st).Round(time.Second) / time.Second)
	m.setCookie(c, m.tokenCookie, url.QueryEscape(signed), maxAge)
	c.Set(credential.SetAuthTokenHeader, signed)
	ExposeHeader(c, credential.SetAuthTokenHeader)
	if cache {
		m.setCache(c, st)
	}
	c.Locals(localsKey, st)
}

func (m *Sessions) setCache(c *fiber.Ctx, st *auth.SessionState) {
	value, err := m.auth.EncodeCache(st)
	if err != nil {
		// The cache is an optimisation; without it the database answers. A stale cache the
		// browser may still hold must not outlive this answer.
		m.setCookie(c, m.dataCookie, "", -1)
		return
	}
	m.setCookie(c, m.dataCookie, value, int(auth.CookieCacheTTL/time.Second))
}

// SignOut ends every session the request presents, the bearer token's and the session cookie's
// (both, should they name different sessions) and the admin's own that the admin session cookie
// keeps during an impersonation, and expires the cookies.
func (m *Sessions) SignOut(c *fiber.Ctx) error {
	cred := m.Credential(c)
	tokens := []string{cred.Token}
	if cred.CookieToken != cred.Token {
		tokens = append(tokens, cred.CookieToken)
	}
	// An admin who signs out while acting as someone signs out of their own session too: the
	// browser is left holding no credential, not the admin's session in the admin cookie.
	admin, hasAdmin := m.AdminSession(c)
	if hasAdmin {
		tokens = append(tokens, admin)
	}
	for _, token := range tokens {
		if token == "" {
			continue
		}
		if err := m.auth.SignOut(c.UserContext(), token); err != nil {
			return err
		}
	}
	m.Clear(c)
	if hasAdmin || len(c.Context().Request.Header.Cookie(m.adminCookie)) > 0 {
		m.ClearAdminSession(c)
	}
	return nil
}

// KeepAdminSession keeps the admin's own session token in the admin session cookie, signed, while
// the admin impersonates someone (impersonate-user): stop-impersonating brings it back. It lasts
// as long as the impersonation.
func (m *Sessions) KeepAdminSession(c *fiber.Ctx, adminToken string, maxAge time.Duration) {
	m.setCookie(c, m.adminCookie, url.QueryEscape(m.signer.Sign(adminToken)), int(maxAge/time.Second))
}

// AdminSession returns the admin's own session token the admin session cookie keeps, if it
// carries one this service signed.
func (m *Sessions) AdminSession(c *fiber.Ctx) (string, bool) {
	raw := c.Context().Request.Header.Cookie(m.adminCookie)
	if len(raw) == 0 {
		return "", false
	}
	return m.signer.Verify(string(raw))
}

// BrowserBinding returns the value marking the request's browser as one a sign-in code was asked
// from (auth.NewBrowserBinding), or "". With mint, the request asks for a code: the browser gets
// a new value, kept for as long as that code lives, so the code e-mail's sign-in link opened in it
// signs in without asking. The value is always the server's own, never one the request brings:
// one an attacker chose, and planted in someone's browser, would make the attacker's link look
// like that browser's own.
func (m *Sessions) BrowserBinding(c *fiber.Ctx, mint bool) (string, error) {
	if !mint {
		return c.Cookies(m.browserCookie), nil
	}
	v, err := auth.NewBrowserBinding()
	if err != nil {
		return "", err
	}
	m.setCookie(c, m.browserCookie, v, int(auth.OTPLifetime/time.Second))
	return v, nil
}

// ClearAdminSession expires the admin session cookie.
func (m *Sessions) ClearAdminSession(c *fiber.Ctx) { m.setCookie(c, m.adminCookie, "", -1) }

// Clear expires the session cookie and the cookie cache.
func (m *Sessions) Clear(c *fiber.Ctx) {
	m.setCookie(c, m.tokenCookie, "", -1)
	m.setCookie(c, m.dataCookie, "", -1)
	c.Locals(localsKey, nil)
}

// setCookie writes one cookie; a negative maxAge deletes it.
func (m *Sessions) setCookie(c *fiber.Ctx, name, value string, maxAge int) {
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	ck.SetKey(name)
	ck.SetValue(value)
	ck.SetPath("/")
	ck.SetHTTPOnly(true)
	ck.SetSecure(m.secure)
	ck.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	if maxAge < 0 {
		ck.SetExpire(fasthttp.CookieExpireDelete)
	} else {
		ck.SetMaxAge(maxAge)
	}
	c.Response().Header.SetCookie(ck)
}

// ExposeHeader adds name to Access-Control-Expose-Headers, keeping what is already listed, so a
// browser app on a trusted origin can read that header.
func ExposeHeader(c *fiber.Ctx, name string) {
	const h = fiber.HeaderAccessControlExposeHeaders
	current := string(c.Response().Header.Peek(h))
	for _, v := range strings.Split(current, ",") {
		if strings.EqualFold(strings.TrimSpace(v), name) {
			return
		}
	}
	if current == "" {
		c.Set(h, name)
		return
	}
	c.Set(h, current+", "+name)
}
