package middleware

import (
	"net/url"
	"time"

	"codeauth/handlers/betterauth/credential"
	"codeauth/i18n"

	"github.com/gofiber/fiber/v2"
)

// LocaleCookieSuffix follows the cookie prefix in the name of the cookie that keeps the language
// chosen with the pages' language switch: "auth.locale" under the default prefix.
const LocaleCookieSuffix = ".locale"

// localeCookieAge is how long the language switch's choice is kept.
const localeCookieAge = 365 * 24 * time.Hour

// Locales chooses the language of a page or an e-mail a request causes: the one chosen with the
// language switch (a cookie), else the best the Accept-Language header asks for, else the
// default (AUTH_DEFAULT_LOCALE). A request's language is chosen when something asks for it, and
// once: the API's session reads never pay for it.
type Locales struct {
	negotiator *i18n.Negotiator
	cookie     string
	secure     bool
}

// NewLocales returns the chooser whose last resort is def, with the switch's cookie named after
// the cookie prefix; secure is true when the service is served over https.
func NewLocales(def *i18n.Locale, cookiePrefix string, secure bool) *Locales {
	if secure {
		cookiePrefix = credential.SecureCookiePrefix + cookiePrefix
	}
	return &Locales{negotiator: i18n.NewNegotiator(def), cookie: cookiePrefix + LocaleCookieSuffix, secure: secure}
}

// CookieName is the name of the language switch's cookie.
func (l *Locales) CookieName() string { return l.cookie }

// Default is the default language.
func (l *Locales) Default() *i18n.Locale { return l.negotiator.Default() }

type localeKey struct{}

// Of is the language of c's request.
func (l *Locales) Of(c *fiber.Ctx) *i18n.Locale {
	if loc, ok := c.Locals(localeKey{}).(*i18n.Locale); ok {
		return loc
	}
	loc := l.negotiator.Choose(c.Cookies(l.cookie), c.Get(fiber.HeaderAcceptLanguage))
	c.Locals(localeKey{}, loc)
	return loc
}

// Use makes loc the language of the rest of c's request, whatever it asked for (the admin pages
// are in English).
func (l *Locales) Use(c *fiber.Ctx, loc *i18n.Locale) { c.Locals(localeKey{}, loc) }

// Remember keeps loc as the language of the browser's later requests (the switch's cookie), and
// of the rest of this one.
func (l *Locales) Remember(c *fiber.Ctx, loc *i18n.Locale) {
	c.Cookie(&fiber.Cookie{
		Name: l.cookie, Value: url.QueryEscape(loc.Code()), Path: "/", MaxAge: int(localeCookieAge / time.Second),
		Secure: l.secure, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode,
	})
	l.Use(c, loc)
}
