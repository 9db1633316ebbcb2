package pages

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// verifyEmailPage is GET /auth/verify-email?token=…: it shows what the link will change and a
// button; opening the link changes nothing (mail scanners fetch links).
func (h *Pages) verifyEmailPage(c *fiber.Ctx) error {
	p, err := h.page(c, "title.verify_email")
	if err != nil {
		return err
	}
	v := views.EmailLink{Token: c.Query("token")}
	if cb := c.Query("callbackURL"); h.origins.SafeRedirect(cb) {
		v.CallbackURL = cb
	}
	pending, err := h.auth.PendingEmailChange(c.UserContext(), v.Token)
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		v.Error, v.Dead = pr.message, deadLink(err)
		return h.render(c, pr.status, views.VerifyEmailPage(p, v))
	}
	v.From, v.To = pending.OldEmail, pending.NewEmail
	return h.render(c, fiber.StatusOK, views.VerifyEmailPage(p, v))
}

// confirmEmailChange is POST /auth/verify-email: the button of the link's page.
func (h *Pages) confirmEmailChange(c *fiber.Ctx) error {
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true})
	if err != nil {
		return err
	}
	user, err := h.auth.ConfirmEmailChange(c.UserContext(), formValue(c, "token"), st)
	p, perr := h.page(c, "title.verify_email")
	if perr != nil {
		return perr
	}
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		// Signed in to another account, a live link is refused as if it were not one (the
		// account is not the link's): not called dead, as it works from the right browser.
		return h.render(c, pr.status, views.VerifyEmailPage(p, views.EmailLink{Error: pr.message, Dead: deadLink(err) && st == nil}))
	}
	if st != nil {
		updated := *st
		updated.User = user
		h.sessions.Issue(c, &updated, true)
		p.User = &views.User{Email: user.Email, Name: user.Name}
	}
	if cb := formValue(c, "callbackURL"); cb != "" && h.origins.SafeRedirect(cb) {
		return c.Redirect(cb, fiber.StatusSeeOther)
	}
	return h.render(c, fiber.StatusOK, views.VerifyEmailPage(p, views.EmailLink{Done: true, To: user.Email}))
}

// restoreEmailPage is GET /auth/restore-email?token=…, the link of the notice to an old address.
func (h *Pages) restoreEmailPage(c *fiber.Ctx) error {
	p, err := h.page(c, "title.restore_email")
	if err != nil {
		return err
	}
	v := views.EmailLink{Token: c.Query("token")}
	pending, err := h.auth.PendingEmailRestore(c.UserContext(), v.Token)
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		v.Error, v.Dead = pr.message, deadLink(err)
		return h.render(c, pr.status, views.RestoreEmailPage(p, v))
	}
	v.From, v.To, v.Deleted = pending.CurrentEmail, pending.OldEmail, pending.Deleted
	return h.render(c, fiber.StatusOK, views.RestoreEmailPage(p, v))
}

// restoreEmail is POST /auth/restore-email: the address comes back and every session ends,
// this browser's included.
func (h *Pages) restoreEmail(c *fiber.Ctx) error {
	user, err := h.auth.RestoreEmail(c.UserContext(), formValue(c, "token"))
	p := h.site.Page(h.lang(c).T("title.restore_email"), here(c))
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		return h.render(c, pr.status, views.RestoreEmailPage(p, views.EmailLink{Error: pr.message, Dead: deadLink(err)}))
	}
	// This browser's cookie is cleared if its session was one of those ended; a browser signed in
	// to another account stays signed in.
	if _, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true}); err != nil {
		return err
	}
	return h.render(c, fiber.StatusOK, views.RestoreEmailPage(p, views.EmailLink{Done: true, To: user.Email}))
}

// requestEmailChange is POST /account/email: a confirmation link goes to the new address.
func (h *Pages) requestEmailChange(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	a := views.Account{Email: st.User.Email, Name: st.User.Name}
	newEmail := formValue(c, "newEmail")
	err = h.auth.RequestEmailChangeLink(c.UserContext(), st, newEmail, "/account")
	status := fiber.StatusOK
	switch {
	case err == nil:
		a.ChangeSentTo, _ = auth.NormalizeEmail(newEmail)
	case errors.Is(err, auth.ErrSessionNotFresh):
		// No words: the form offers to sign in again.
		a.ReauthURL, status = middleware.ReauthURL("/account"), fiber.StatusForbidden
	default:
		pr, known := explain(h.lang(c), err, countedLinks)
		if !known {
			return err
		}
		a.ChangeError, a.ChangeTyped, status = pr.message, strings.ToValidUTF8(newEmail, "\uFFFD"), pr.status
	}
	if !isHTMX(c) {
		return h.accountWith(c, status, a)
	}
	return h.render(c, status, views.EmailChangeForm(a))
}

// deleteAccount is POST /account/delete: the account is deleted with its grace period, this
// browser is signed out with every other, and the person lands on /auth/account-deleted. A
// session too old for it (auth.FreshAge) gets the account page asking to sign in again.
func (h *Pages) deleteAccount(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	if formValue(c, "confirm") != "yes" {
		return h.accountWith(c, fiber.StatusUnprocessableEntity, views.Account{
			Email: st.User.Email, Name: st.User.Name, DeleteError: h.lang(c).T("account.delete_tick"),
		})
	}
	at, err := h.auth.DeleteAccount(c.UserContext(), st)
	if errors.Is(err, auth.ErrSessionNotFresh) {
		return h.accountWith(c, fiber.StatusForbidden, views.Account{Email: st.User.Email, Name: st.User.Name})
	}
	if err != nil {
		return err
	}
	h.sessions.Clear(c)
	return c.Redirect("/auth/account-deleted?until="+url.QueryEscape(at.UTC().Format(time.DateOnly)), fiber.StatusSeeOther)
}

// accountDeleted is GET /auth/account-deleted?until=YYYY-MM-DD, the grace-period page.
func (h *Pages) accountDeleted(c *fiber.Ctx) error {
	p, err := h.page(c, "title.account_deleted")
	if err != nil {
		return err
	}
	until := ""
	if t, err := time.Parse(time.DateOnly, c.Query("until")); err == nil {
		until = h.lang(c).Date(t)
	}
	return h.render(c, fiber.StatusOK, views.AccountDeletedPage(p, until))
}
