package pages

import (
	"errors"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// The page of the code e-mail's sign-in link (AUTH_SIGNIN_LINK). Opening the link only shows the
// page: the sign-in is its button's POST, so a mail scanner that opens every link uses nothing.
// Opened in the browser that asked for the code, the page offers the button at once; elsewhere
// it first names the device that asked, where and when, for the person to confirm it was them.

// signInLinkPage is GET /auth/sign-in-link?token=….
func (h *Pages) signInLinkPage(c *fiber.Ctx) error {
	p, err := h.page(c, "title.sign_in")
	if err != nil {
		return err
	}
	token := c.Query("token")
	browser, err := h.sessions.BrowserBinding(c, false)
	if err != nil {
		return err
	}
	link, err := h.auth.OpenSignInLink(token, browser)
	if err != nil {
		return h.signInLinkRefused(c, p, err)
	}
	l := h.lang(c)
	v := views.SignInLink{Token: token, Email: link.Email, SameBrowser: link.SameBrowser,
		Device: l.DeviceName(link.Browser, link.Platform), IP: link.IP, AskedAt: l.DateTime(link.AskedAt)}
	return h.render(c, fiber.StatusOK, views.SignInLinkPage(p, v))
}

// signInWithLink is POST /auth/sign-in-link {token}: the page's button. It signs in as the code
// would, into this browser, and goes to the account.
func (h *Pages) signInWithLink(c *fiber.Ctx) error {
	previous := h.sessions.Credential(c).CookieToken
	res, err := h.auth.SignInWithLink(c.UserContext(), formValue(c, "token"), h.lang(c).Code(),
		auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)})
	if err != nil {
		p, perr := h.page(c, "title.sign_in")
		if perr != nil {
			return perr
		}
		return h.signInLinkRefused(c, p, err)
	}
	h.sessions.Issue(c, &res.SessionState, true)
	if previous != "" {
		// As after a sign-in with the code: the browser's earlier session is unreachable now.
		if err := h.auth.SignOut(c.UserContext(), previous); err != nil {
			h.log.WarnContext(c.UserContext(), "ending the replaced session failed", "error", err)
		}
	}
	return c.Redirect("/account", fiber.StatusSeeOther)
}

// signInLinkRefused answers a link that cannot sign in (used, expired, replaced, tampered, or
// the account banned) with the page's own words and the way to a new code.
func (h *Pages) signInLinkRefused(c *fiber.Ctx, p views.Page, err error) error {
	l := h.lang(c)
	var pr problem
	switch {
	case errors.Is(err, auth.ErrTokenExpired), errors.Is(err, auth.ErrOTPExpired):
		pr = problem{fiber.StatusGone, l.T("sign_in_link.expired")}
	case errors.Is(err, auth.ErrInvalidToken), errors.Is(err, auth.ErrInvalidOTP):
		// Used, replaced by a newer code, tampered with, or sealed under another secret.
		pr = problem{fiber.StatusBadRequest, l.T("sign_in_link.invalid")}
	default:
		var known bool
		if pr, known = explain(l, err, countedAttempts); !known {
			return err
		}
	}
	return h.render(c, pr.status, views.SignInLinkPage(p, views.SignInLink{Error: pr.message, Dead: deadLink(err)}))
}

// deadLink reports whether err says that an e-mail's link itself no longer works: used, replaced
// by a newer one, tampered with, or expired (and for a sign-in link, its code so, or out of
// attempts).
func deadLink(err error) bool {
	for _, dead := range []error{auth.ErrInvalidToken, auth.ErrTokenExpired, auth.ErrInvalidOTP, auth.ErrOTPExpired, auth.ErrTooManyAttempts} {
		if errors.Is(err, dead) {
			return true
		}
	}
	return false
}
