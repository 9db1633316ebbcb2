package pages

import (
	"codeauth/static"

	"github.com/gofiber/fiber/v2"
)

// What crawlers and browsers ask every site for, answered as public files rather than sent to
// the sign-in page.

// robotsTxt lets crawlers index the front and sign-in pages and keeps them off the account, the
// admin pages and the one-time links (whose tokens belong to one person).
const robotsTxt = `User-agent: *
Disallow: /account
Disallow: /admin
Disallow: /api/
Disallow: /auth/verify-email
Disallow: /auth/restore-email
Disallow: /auth/sign-in-link
Disallow: /checkout/
`

// crawlerMaxAge is how long browsers and crawlers may keep these answers.
const crawlerMaxAge = "public, max-age=86400"

// robots is GET /robots.txt.
func robots(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, crawlerMaxAge)
	return c.SendString(robotsTxt)
}

// favicon is GET /favicon.ico, which browsers ask for whatever the page's icon link says: the
// logo (an SVG, which browsers take whatever the name).
func favicon(c *fiber.Ctx) error {
	logo := static.Get("logo.svg")
	c.Set(fiber.HeaderContentType, logo.ContentType)
	c.Set(fiber.HeaderCacheControl, crawlerMaxAge)
	return c.Send(logo.Raw)
}
