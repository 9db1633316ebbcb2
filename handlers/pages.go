package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/url"
	"strings"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
)

// pagesHandler serves the HTML pages. Every form is a real form: without JavaScript each POST
// answers with a whole page or a redirect; with htmx (HX-Request) it answers with the fragment to
// swap.
type pagesHandler struct {
	auth     *auth.Service
	sessions *middleware.Sessions
	origins  *middleware.Origins
	siteName string
	log      *slog.Logger
}

// render writes a component as the HTML answer. It renders into a buffer first, so a failure
// half-way becomes a clean error page rather than half a page with a 200.
func render(c *fiber.Ctx, status int, component templ.Component) error {
	var buf bytes.Buffer
	if err := component.Render(c.UserContext(), &buf); err != nil {
		return fmt.Errorf("rendering: %w", err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(buf.Bytes())
}

func isHTMX(c *fiber.Ctx) bool { return c.Get("HX-Request") == "true" }

// page builds the layout's model, with the signed-in person if there is one.
func (h *pagesHandler) page(c *fiber.Ctx, title string) (views.Page, error) {
	p := views.Page{Title: title, SiteName: h.siteName}
	st, err := h.sessions.Resolve(c, middleware.Options{})
	if err != nil {
		return p, err
	}
	if st != nil {
		p.User = &views.User{Email: st.User.Email, Name: st.User.Name}
	}
	return p, nil
}

// errNotAForm refuses a page POST whose body is not an HTML form.
var errNotAForm = newAPIError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Forms must be sent as application/x-www-form-urlencoded")

// requireForms refuses with 415, before any handler runs, a POST to a page whose body is not
// application/x-www-form-urlencoded, which every form of the pages sends (htmx included). It
// guards every POST outside the API rather than a list of routes, so a form route added later
// cannot forget it: a text/plain or multipart body, which any site's form can send without a
// preflight, never reaches a handler that changes something.
func requireForms(c *fiber.Ctx) error {
	if c.Method() == fiber.MethodPost && middleware.KindOf(c) == middleware.PagePath {
		if mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); err != nil || mt != fiber.MIMEApplicationForm {
			return errNotAForm
		}
	}
	return c.Next()
}

// formValue reads a field of the form body, and only of the body: fasthttp's FormValue looks in
// the query string first, which would let "POST /auth/verify?otp=…" sign in with a code carried in
// the URL (into logs, histories and Referer headers) and let a query override what the form sent
// (catalogue #67, #112; ASVS 14.2.1, 15.3.7). Every page handler reads its fields here.
func formValue(c *fiber.Ctx, name string) string {
	return string(c.Request().PostArgs().Peek(name))
}

// entryFromForm reads the code-entry component's context back from its form.
func entryFromForm(c *fiber.Ctx) views.Entry {
	return views.Entry{
		Mode:     views.ParseMode(formValue(c, "mode")),
		Redirect: middleware.SafeNext(formValue(c, "redirect")),
		Purchase: purchaseParam(formValue(c, "purchase")),
		Email:    strings.TrimSpace(formValue(c, "email")),
	}
}

// purchaseParam keeps a purchase id only when it has the shape of one.
func purchaseParam(s string) string {
	if len(s) == 36 && strings.Count(s, "-") == 4 {
		return s
	}
	return ""
}

func (h *pagesHandler) home(c *fiber.Ctx) error {
	p, err := h.page(c, "Welcome")
	if err != nil {
		return err
	}
	return render(c, fiber.StatusOK, views.Home(p))
}

// signInPage serves /auth/sign-in and /auth/sign-up. Someone already signed in goes straight on,
// unless asked to sign in again (?reauth=1, for a change that needs a fresh session): then the
// page offers a new code to the current address.
func (h *pagesHandler) signInPage(mode views.Mode) fiber.Handler {
	return func(c *fiber.Ctx) error {
		redirect := middleware.SafeNext(c.Query("redirect"))
		p, err := h.page(c, "")
		if err != nil {
			return err
		}
		e := views.Entry{Mode: mode, Step: views.StepEmail, Redirect: redirect}
		if p.User != nil {
			if c.Query(middleware.ReauthParam) != "1" {
				if redirect == "" {
					redirect = "/account"
				}
				return c.Redirect(redirect, fiber.StatusSeeOther)
			}
			e.Mode, e.Reauth, e.Email = views.ModeSignIn, true, p.User.Email
		}
		return h.renderEntry(c, fiber.StatusOK, e)
	}
}

// renderEntry answers with the code-entry component: the fragment for htmx, else the whole page
// of its mode.
func (h *pagesHandler) renderEntry(c *fiber.Ctx, status int, e views.Entry) error {
	if isHTMX(c) {
		return render(c, status, views.CodeEntry(e))
	}
	switch e.Mode {
	case views.ModeCheckout:
		return h.renderCheckout(c, status, e.Purchase, &e, "")
	case views.ModeSignUp:
		p, err := h.page(c, "Create your account")
		if err != nil {
			return err
		}
		return render(c, status, views.SignIn(p, e))
	default:
		p, err := h.page(c, "Sign in")
		if err != nil {
			return err
		}
		return render(c, status, views.SignIn(p, e))
	}
}

// sendCode is POST /auth/code: step one of the component, and its resend button.
func (h *pagesHandler) sendCode(c *fiber.Ctx) error {
	e := entryFromForm(c)
	resend := formValue(c, "resend") == "1"
	err := h.auth.SendSignInCode(c.UserContext(), e.Email)
	var limited *auth.RateLimitError
	switch {
	case err == nil:
		e.Email, _ = auth.NormalizeEmail(e.Email)
		e.Step, e.Cooldown = views.StepCode, views.ResendCooldown
		return h.renderEntry(c, fiber.StatusOK, e)
	case errors.Is(err, auth.ErrInvalidEmail):
		e.Error = "Enter a valid e-mail address, such as name@example.com."
		return h.renderEntry(c, fiber.StatusUnprocessableEntity, e)
	case errors.As(err, &limited):
		e.Error = "Too many codes were asked for. " + retryText(limited)
		if resend {
			e.Step = views.StepCode
		}
		return h.renderEntry(c, fiber.StatusTooManyRequests, e)
	}
	return err
}

// retryText says when to try again, in words.
func retryText(e *auth.RateLimitError) string {
	minutes := int(e.RetryAfter.Minutes() + 0.999)
	switch {
	case e.RetryAfter.Seconds() < 90:
		return fmt.Sprintf("Please try again in %d seconds.", int(e.RetryAfter.Seconds()+0.999))
	case minutes < 120:
		return fmt.Sprintf("Please try again in %d minutes.", minutes)
	}
	return fmt.Sprintf("Please try again in %d hours.", minutes/60+1)
}

// verify is POST /auth/verify: the code step. A wrong code stays on the step with a message and
// an empty input; success opens the session and either emits "verified" (htmx) or redirects.
func (h *pagesHandler) verify(c *fiber.Ctx) error {
	e := entryFromForm(c)
	e.Step = views.StepCode
	previous := h.sessions.Credential(c).CookieToken
	res, err := h.auth.SignIn(c.UserContext(), auth.SignInInput{
		Email: e.Email, Code: formValue(c, "otp"),
		Client: auth.ClientMeta{IPAddress: middleware.ClientIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)},
	})
	if err != nil {
		var limited *auth.RateLimitError
		switch {
		case errors.Is(err, auth.ErrInvalidOTP):
			e.Error = "That code is not right. Check the e-mail and try again."
		case errors.Is(err, auth.ErrOTPExpired):
			e.Error = "That code has expired. Send a new code."
		case errors.Is(err, auth.ErrTooManyAttempts):
			e.Error = "Too many wrong codes. Send a new code."
		case errors.Is(err, auth.ErrInvalidEmail):
			e.Step, e.Error = views.StepEmail, "Enter a valid e-mail address, such as name@example.com."
		case errors.Is(err, auth.ErrSignInUnconfirmed):
			// A 503 like any other, in the component's own words.
			noteUnavailable(c, h.log, err)
			e.Error = "The service was briefly unavailable, so we could not confirm your sign-in. Send a new code and try again."
			return h.renderEntry(c, fiber.StatusServiceUnavailable, e)
		case errors.As(err, &limited):
			e.Error = "Too many attempts. " + retryText(limited)
			return h.renderEntry(c, fiber.StatusTooManyRequests, e)
		default:
			return err
		}
		return h.renderEntry(c, fiber.StatusUnprocessableEntity, e)
	}
	h.sessions.Issue(c, &res.SessionState, true)
	if previous != "" {
		// The browser's earlier session (signing in again, or as someone else) is unreachable
		// now that its cookie is replaced: end it rather than leave it live. The sign-in stands
		// if that fails; the old session then simply expires.
		if err := h.auth.SignOut(c.UserContext(), previous); err != nil {
			h.log.WarnContext(c.UserContext(), "ending the replaced session failed", "error", err)
		}
	}
	e.Email, e.Step = res.User.Email, views.StepVerified
	next := e.Redirect
	if next == "" {
		next = "/"
	}
	if isHTMX(c) {
		// The page decides what follows "verified": go on, grant the opt-in, or claim.
		trigger, _ := json.Marshal(map[string]map[string]string{"verified": {"redirect": next}})
		c.Set("HX-Trigger", string(trigger))
		return render(c, fiber.StatusOK, views.CodeEntry(e))
	}
	// Without JavaScript the server does what the page script would.
	switch e.Mode {
	case views.ModeSignUp:
		if formValue(c, "marketingOptIn") == "on" {
			// Best effort: a failed grant never undoes the sign-up.
			_ = h.auth.GrantMarketingConsent(c.UserContext(), res.User.ID, h.evidence(c, "/auth/sign-up"))
		}
	case views.ModeCheckout:
		if _, err := h.auth.ClaimPurchase(c.UserContext(), res.User, e.Purchase); err != nil {
			msg, known := claimFailure(err)
			if !known {
				return err
			}
			return h.renderCheckout(c, fiber.StatusUnprocessableEntity, e.Purchase, nil, msg)
		}
		return c.Redirect("/checkout/success?purchase="+url.QueryEscape(e.Purchase), fiber.StatusSeeOther)
	}
	return c.Redirect(next, fiber.StatusSeeOther)
}

// evidence describes the request a consent came through.
func (h *pagesHandler) evidence(c *fiber.Ctx, source string) auth.ConsentEvidence {
	return auth.ConsentEvidence{Source: source,
		Client: auth.ClientMeta{IPAddress: middleware.ClientIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)}}
}

// signOut is POST /auth/sign-out from the pages.
func (h *pagesHandler) signOut(c *fiber.Ctx) error {
	if err := h.sessions.SignOut(c); err != nil {
		return err
	}
	return c.Redirect(middleware.SignInPath, fiber.StatusSeeOther)
}

// account is GET /account.
func (h *pagesHandler) account(c *fiber.Ctx) error {
	st := middleware.Current(c)
	return h.accountWith(c, fiber.StatusOK, views.Account{Email: st.User.Email, Name: st.User.Name})
}

// signedIn returns the session of a request that changes the account, checked against the
// database; without one, a page request is sent to sign in.
func (h *pagesHandler) signedIn(c *fiber.Ctx) (*auth.SessionState, error) {
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true})
	if err != nil {
		return nil, err
	}
	if st == nil {
		if isHTMX(c) {
			c.Set("HX-Redirect", middleware.SignInPath)
		}
		return nil, errUnauthorized
	}
	return st, nil
}

// updateName is POST /account/name.
func (h *pagesHandler) updateName(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	name := formValue(c, "name")
	user, err := h.auth.UpdateUser(c.UserContext(), st.User.ID, auth.UserUpdate{Name: &name})
	a := views.Account{Email: st.User.Email, Name: name}
	var fe *auth.FieldError
	switch {
	case errors.As(err, &fe):
		a.NameError = "Use at most 100 characters, with no control or invisible characters."
		if !isHTMX(c) {
			return h.accountWith(c, fiber.StatusUnprocessableEntity, a)
		}
		return render(c, fiber.StatusUnprocessableEntity, views.NameForm(a))
	case err != nil:
		return err
	}
	updated := *st
	updated.User = user
	h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	if !isHTMX(c) {
		return c.Redirect("/account", fiber.StatusSeeOther)
	}
	a.Name, a.NameSaved = user.Name, true
	return render(c, fiber.StatusOK, views.NameForm(a))
}

// accountWith renders the account page with a given form state (a refused change without
// JavaScript), adding the consent status and, for a session too old for the sensitive forms, the
// sign-in-again link.
func (h *pagesHandler) accountWith(c *fiber.Ctx, status int, a views.Account) error {
	p, err := h.page(c, "Your account")
	if err != nil {
		return err
	}
	st := middleware.Current(c)
	prefs, err := h.auth.Preferences(c.UserContext(), st.User.ID)
	if err != nil {
		return err
	}
	a.MarketingOptIn = prefs.MarketingOptIn
	if !h.auth.Fresh(st) {
		a.ReauthURL = middleware.ReauthURL("/account")
	}
	return render(c, status, views.AccountPage(p, a))
}

// grantConsent is POST /account/consent.
func (h *pagesHandler) grantConsent(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	if err := h.auth.GrantMarketingConsent(c.UserContext(), st.User.ID, h.evidence(c, "/account")); err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect("/account", fiber.StatusSeeOther)
	}
	return render(c, fiber.StatusOK, views.ConsentStatus(true))
}

// checkout is GET /checkout/success?purchase=<id>: the guest purchase and the component that
// claims it, the e-mail address prefilled from the purchase.
func (h *pagesHandler) checkout(c *fiber.Ctx) error {
	return h.renderCheckout(c, fiber.StatusOK, purchaseParam(c.Query("purchase")), nil, "")
}

// renderCheckout renders the checkout page for purchaseID, with the component at entry (or at its
// first step) and claimError when a claim was refused.
func (h *pagesHandler) renderCheckout(c *fiber.Ctx, status int, purchaseID string, entry *views.Entry, claimError string) error {
	p, err := h.page(c, "Your purchase")
	if err != nil {
		return err
	}
	view := views.Checkout{PurchaseID: purchaseID, ClaimError: claimError}
	purchase, err := h.auth.Purchase(c.UserContext(), purchaseID)
	switch {
	case errors.Is(err, auth.ErrPurchaseNotFound):
		return render(c, fiber.StatusNotFound, views.CheckoutPage(p, view))
	case err != nil:
		return err
	}
	view.Found, view.Product, view.PurchasedAt = true, purchase.Product, purchase.PurchasedAt
	if st := middleware.Current(c); st != nil && purchase.UserID != nil && *purchase.UserID == st.User.ID {
		view.Claimed = true
	}
	if entry != nil {
		view.Entry = *entry
	} else {
		view.Entry = views.Entry{Mode: views.ModeCheckout, Step: views.StepEmail, Email: purchase.Email, Purchase: purchase.ID}
	}
	return render(c, status, views.CheckoutPage(p, view))
}

// claim is POST /checkout/claim: links the purchase to the signed-in account when the account's
// address is the one it was bought with.
func (h *pagesHandler) claim(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	id := purchaseParam(formValue(c, "purchase"))
	purchase, err := h.auth.ClaimPurchase(c.UserContext(), st.User, id)
	view := views.Checkout{Found: true, PurchaseID: id, Product: purchase.Product, Claimed: err == nil}
	if err != nil {
		msg, known := claimFailure(err)
		if !known {
			return err
		}
		view.ClaimError = msg
		if !isHTMX(c) {
			return h.renderCheckout(c, fiber.StatusUnprocessableEntity, id, nil, msg)
		}
	}
	if !isHTMX(c) {
		return c.Redirect("/checkout/success?purchase="+url.QueryEscape(id), fiber.StatusSeeOther)
	}
	status := fiber.StatusOK
	if !view.Claimed {
		status = fiber.StatusUnprocessableEntity
	}
	return render(c, status, views.ClaimStatus(view))
}

// claimFailure words a refused claim for the person who tried.
func claimFailure(err error) (string, bool) {
	switch {
	case errors.Is(err, auth.ErrPurchaseNotFound):
		return "We could not find this purchase.", true
	case errors.Is(err, auth.ErrPurchaseOtherEmail):
		return "This purchase was made with another e-mail address. Sign in with that address to keep it.", true
	}
	return "", false
}
