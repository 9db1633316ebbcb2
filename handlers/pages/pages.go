// Package pages serves the HTML pages (templ + htmx): sign-in and sign-up with the code-entry
// component, the account page and its forms, the e-mail link pages, checkout, and the error page.
// Every form is a real form: without JavaScript each POST answers with a whole page or a
// redirect; with htmx (HX-Request) it answers with the fragment to swap. Refusals are worded for
// people in one place (errors.go); the rules live in auth.
package pages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"codeauth/auth"
	"codeauth/i18n"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
)

// Deps are what the pages need.
type Deps struct {
	Auth     *auth.Service
	Sessions *middleware.Sessions
	Origins  *middleware.Origins
	// Locales chooses each request's language.
	Locales *middleware.Locales
	// Site names the service on its pages, and links its policies.
	Site   Site
	Logger *slog.Logger
}

// Pages serves the HTML pages.
type Pages struct {
	auth     *auth.Service
	sessions *middleware.Sessions
	origins  *middleware.Origins
	locales  *middleware.Locales
	site     Site
	log      *slog.Logger
}

// New returns the pages.
func New(d Deps) *Pages {
	return &Pages{auth: d.Auth, sessions: d.Sessions, origins: d.Origins, locales: d.Locales, site: d.Site, log: d.Logger}
}

// Mount registers the pages' routes, each with its per-IP limits, declaring the public ones to
// guard where they are registered. The routes go through app.Get, which also answers HEAD like
// GET without the body, and app.Post.
func (h *Pages) Mount(app *fiber.App, limiter *middleware.RateLimiter, guard *middleware.PageGuard) {
	public := func(path string) string {
		guard.DeclarePublic(path)
		return path
	}
	formLimit := limiter.Limit(middleware.RuleDefault)
	sendLimit, signInLimit := limiter.Limit(middleware.RuleSendCode), limiter.Limit(middleware.RuleSignIn)
	app.Get(public("/"), h.home)
	app.Get(public("/auth/sign-in"), h.signInPage(views.ModeSignIn))
	app.Get(public("/auth/sign-up"), h.signInPage(views.ModeSignUp))
	app.Post(public("/auth/code"), formLimit, sendLimit, h.sendCode)
	app.Post(public("/auth/verify"), formLimit, signInLimit, h.verify)
	app.Post(public("/auth/sign-out"), formLimit, h.signOut)
	app.Get(public("/checkout/success"), h.checkout)
	app.Post(public("/checkout/claim"), formLimit, h.claim)
	app.Get(public("/auth/verify-email"), h.verifyEmailPage)
	app.Post(public("/auth/verify-email"), formLimit, signInLimit, h.confirmEmailChange)
	app.Get(public("/auth/restore-email"), h.restoreEmailPage)
	app.Post(public("/auth/restore-email"), formLimit, signInLimit, h.restoreEmail)
	app.Get(public("/auth/account-deleted"), h.accountDeleted)
	app.Get(public(auth.SignInLinkPath), h.signInLinkPage)
	app.Post(public(auth.SignInLinkPath), formLimit, signInLimit, h.signInWithLink)
	app.Get("/account", h.account)
	app.Post("/account/name", formLimit, h.updateName)
	app.Post("/account/consent", formLimit, h.grantConsent)
	app.Post("/account/consent/withdraw", formLimit, h.withdrawConsent)
	app.Post("/account/email", formLimit, sendLimit, h.requestEmailChange)
	app.Post("/account/delete", formLimit, h.deleteAccount)
	app.Post("/account/devices/sign-out", formLimit, h.signOutDevice)
	app.Post("/account/devices/sign-out-others", formLimit, h.signOutOtherDevices)
	app.Post(public("/locale"), formLimit, h.switchLocale)
	// Without JavaScript a form's answer is a page at the form's own address. Asked for again
	// with GET (from the address bar, a bookmark, the language switch or an error page's "Try
	// again"), that address goes to the page the form belongs to, not to a 405.
	for _, f := range formPages {
		if f.public {
			app.Get(public(f.path), seeOther(f.page))
		} else {
			app.Get(f.path, seeOther(f.page))
		}
	}
	app.Get(public("/robots.txt"), robots)
	app.Get(public("/favicon.ico"), favicon)
	h.mountAdmin(app, formLimit)
}

// formPages are the forms' addresses that answer only POST, each with the page its form is on
// (public: reachable without a session, as the form's POST is).
var formPages = []struct {
	path, page string
	public     bool
}{
	{"/auth/code", "/auth/sign-in", true},
	{"/auth/verify", "/auth/sign-in", true},
	{"/auth/sign-out", "/", true},
	{"/checkout/claim", "/", true},
	{"/locale", "/", true},
	{"/account/name", "/account", false},
	{"/account/consent", "/account", false},
	{"/account/consent/withdraw", "/account", false},
	{"/account/email", "/account", false},
	{"/account/delete", "/account", false},
	{"/account/devices/sign-out", "/account", false},
	{"/account/devices/sign-out-others", "/account", false},
}

// seeOther answers with a redirect to page.
func seeOther(page string) fiber.Handler {
	return func(c *fiber.Ctx) error { return c.Redirect(page, fiber.StatusSeeOther) }
}

// render writes a component as the HTML answer, in the request's language. It renders into a
// buffer first, so a failure half-way becomes a clean error page rather than half a page with a
// 200.
func (h *Pages) render(c *fiber.Ctx, status int, component templ.Component) error {
	return render(c, h.locales.Of(c), status, component)
}

// render writes component in the language l.
func render(c *fiber.Ctx, l *i18n.Locale, status int, component templ.Component) error {
	var buf bytes.Buffer
	// Rendering reads nothing but what it is given, so the request's deadline (templ stops at an
	// ended context) must not stop it: a page that answers a request out of time says so.
	if err := component.Render(i18n.NewContext(context.WithoutCancel(c.UserContext()), l), &buf); err != nil {
		return fmt.Errorf("rendering: %w", err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Status(status).Send(buf.Bytes())
}

func isHTMX(c *fiber.Ctx) bool { return c.Get("HX-Request") == "true" }

// Site is what every page says of the service: its name, and the operator's policies.
type Site struct {
	Name                 string
	PrivacyURL, TermsURL string
}

// Page is the layout's model of a page of the site titled title, at here (see views.Page.Here).
func (s Site) Page(title, here string) views.Page {
	return views.Page{Title: title, SiteName: s.Name, Here: here, PrivacyURL: s.PrivacyURL, TermsURL: s.TermsURL}
}

// lang is the language of c's request.
func (h *Pages) lang(c *fiber.Ctx) *i18n.Locale { return h.locales.Of(c) }

// page builds the layout's model, titled by the message titleKey ("" for none), with the
// signed-in person if there is one.
func (h *Pages) page(c *fiber.Ctx, titleKey string) (views.Page, error) {
	p := h.site.Page("", here(c))
	if titleKey != "" {
		p.Title = h.lang(c).T(titleKey)
	}
	st, err := h.sessions.Resolve(c, middleware.Options{})
	if err != nil {
		return p, err
	}
	p.User = viewUser(st)
	return p, nil
}

// viewUser is the signed-in person of st as the header shows them, or nil for nobody.
func viewUser(st *auth.SessionState) *views.User {
	if st == nil {
		return nil
	}
	return &views.User{Email: st.User.Email, Name: st.User.Name, Admin: adminLink(st)}
}

// here is where the language switch of c's page brings the person back to: the page itself, or
// for a page that answered a form, the page of this site the form was on (its Referer); "" when
// that is no plain relative path (the switch then goes to the front page). Of the query, only the
// parameters whose values are plain words or plain relative paths are kept (a purchase id, a
// link's token, a checked redirect target), so a page never carries a value someone put in its
// link to send people elsewhere.
func here(c *fiber.Ctx) string {
	var u *url.URL
	if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
		u = &url.URL{Path: c.Path(), RawQuery: string(c.Request().URI().QueryString())}
	} else {
		ref, err := url.Parse(c.Get(fiber.HeaderReferer))
		if err != nil || ref.Host != string(c.Request().Header.Host()) {
			return ""
		}
		u = ref
	}
	query := url.Values{}
	for name, vs := range u.Query() {
		for _, v := range vs {
			if plainValue(v) {
				query.Add(name, v)
			}
		}
	}
	next := u.Path
	if len(query) > 0 {
		next += "?" + query.Encode()
	}
	return middleware.SafeNext(next)
}

// plainValue reports whether a query value is a word of letters, digits and "._~-", or a plain
// relative path (middleware.SafeNext), of at most 512 bytes.
func plainValue(v string) bool {
	if len(v) > 512 {
		return false
	}
	if strings.HasPrefix(v, "/") {
		return middleware.SafeNext(v) != ""
	}
	return strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-") == ""
}

// The refusals of the pages themselves, as Fiber errors: the error handler answers them with
// their status, and the error page shows them in its own words (ownRefusals).
var (
	// errSignInFirst refuses a change to the account without a session.
	errSignInFirst = fiber.NewError(fiber.StatusUnauthorized, "Unauthorized")
	// errConsentImpersonated refuses a consent change in a session an admin opened as the account.
	errConsentImpersonated = fiber.NewError(fiber.StatusForbidden, "Product-news consent is the account owner's own choice: it cannot be changed while you act as them.")
	// errNotAForm refuses a page POST whose body is not an HTML form.
	errNotAForm = fiber.NewError(fiber.StatusUnsupportedMediaType, "Forms must be sent as application/x-www-form-urlencoded")
)

// RequireForms refuses with 415, before any handler runs, a POST to a page whose body is not
// application/x-www-form-urlencoded, which every form of the pages sends (htmx included). It
// guards every POST outside the API rather than a list of routes, so a form route added later
// cannot forget it: a text/plain or multipart body, which any site's form can send without a
// preflight, never reaches a handler that changes something.
func RequireForms(c *fiber.Ctx) error {
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

// pastedCode is a code typed or pasted on a page without its spaces (" 709 775 " from an
// e-mail), which the page's script takes out when it runs; the JSON API, better-auth's, refuses
// them.
func pastedCode(s string) string {
	if !strings.ContainsFunc(s, unicode.IsSpace) {
		return s
	}
	return strings.Join(strings.Fields(s), "")
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

func (h *Pages) home(c *fiber.Ctx) error {
	p, err := h.page(c, "title.home")
	if err != nil {
		return err
	}
	return h.render(c, fiber.StatusOK, views.Home(p))
}

// switchLocale is POST /locale {locale, next}, the language switch: the browser keeps the
// language in a cookie, and goes back to next, a plain relative path of this site (anything else
// goes to the front page, so the form cannot send anyone elsewhere). A signed-in person's account
// takes the language too, for its e-mails. A language the service does not speak changes
// nothing.
func (h *Pages) switchLocale(c *fiber.Ctx) error {
	next := middleware.SafeNext(formValue(c, "next"))
	if next == "" {
		next = "/"
	}
	l, ok := i18n.Lookup(formValue(c, "locale"))
	if !ok {
		return c.Redirect(next, fiber.StatusSeeOther)
	}
	h.locales.Remember(c, l)
	st, err := h.sessions.Resolve(c, middleware.Options{})
	if err != nil {
		return err
	}
	if st != nil {
		// Best effort: the pages are in the chosen language whatever happens to the account's.
		if err := h.auth.SetLocale(c.UserContext(), st, l.Code()); err != nil && !errors.Is(err, auth.ErrImpersonated) {
			h.log.WarnContext(c.UserContext(), "storing the account's language failed", "error", err)
		}
	}
	return c.Redirect(next, fiber.StatusSeeOther)
}

// signInPage serves /auth/sign-in and /auth/sign-up. Someone already signed in goes straight on,
// unless asked to sign in again (?reauth=1, for a change that needs a fresh session): then the
// page offers a new code to the current address.
func (h *Pages) signInPage(mode views.Mode) fiber.Handler {
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

// signUpNote says in l, in words, who may create an account when sign-up is gated; "" when
// anyone may.
func (h *Pages) signUpNote(l *i18n.Locale) string {
	policy := h.auth.SignUp()
	switch {
	case policy.Closed:
		return l.T("signup_note.closed")
	case len(policy.Domains) == 1:
		return l.Tf("signup_note.domain", map[string]any{"Domain": policy.Domains[0]})
	case len(policy.Domains) > 1:
		last := len(policy.Domains) - 1
		list := l.Tf("list.and", map[string]any{"Items": strings.Join(policy.Domains[:last], ", "), "Last": policy.Domains[last]})
		return l.Tf("signup_note.domains", map[string]any{"Domains": list})
	}
	return ""
}

// renderEntry answers with the code-entry component: the fragment for htmx, else the whole page
// of its mode.
func (h *Pages) renderEntry(c *fiber.Ctx, status int, e views.Entry) error {
	e.SignUpNote = h.signUpNote(h.lang(c))
	e.Swap = isHTMX(c)
	if e.Step == views.StepCode && e.Cooldown == 0 {
		// A wrong code's answer: the resend stays cooling down until the time the code's send
		// set, which its form carried (never longer than a cooldown, whatever the form says).
		if after, err := strconv.ParseInt(formValue(c, "resendAfter"), 10, 64); err == nil {
			left := after - h.auth.Now().Unix()
			if left > 0 {
				e.Cooldown, e.ResendAfter = int(min(left, views.ResendCooldown)), after
			}
		}
	}
	if isHTMX(c) {
		return h.render(c, status, views.CodeEntry(e))
	}
	switch e.Mode {
	case views.ModeCheckout:
		return h.renderCheckout(c, status, e.Purchase, &e, "")
	case views.ModeSignUp:
		p, err := h.page(c, "title.sign_up")
		if err != nil {
			return err
		}
		return h.render(c, status, views.SignIn(p, e))
	default:
		p, err := h.page(c, "title.sign_in")
		if err != nil {
			return err
		}
		return h.render(c, status, views.SignIn(p, e))
	}
}

// sendCode is POST /auth/code: step one of the component, and its resend button.
func (h *Pages) sendCode(c *fiber.Ctx) error {
	e := entryFromForm(c)
	resend := formValue(c, "resend") == "1"
	browser, err := h.sessions.BrowserBinding(c, h.auth.SignInLinks())
	if err != nil {
		return err
	}
	err = h.auth.SendSignInCode(c.UserContext(), e.Email, h.lang(c).Code(), browser)
	if err == nil {
		e.Email, _ = auth.NormalizeEmail(e.Email)
		e.Step, e.Cooldown, e.Resent = views.StepCode, views.ResendCooldown, resend
		e.ResendAfter = h.auth.Now().Add(views.ResendCooldown * time.Second).Unix()
		return h.renderEntry(c, fiber.StatusOK, e)
	}
	pr, known := explain(h.lang(c), err, countedCodes)
	if !known {
		return err
	}
	if resend && pr.status == fiber.StatusTooManyRequests {
		e.Step = views.StepCode // the resend button stays on the code step
	}
	e.Error = pr.message
	return h.renderEntry(c, pr.status, e)
}

// verify is POST /auth/verify: the code step. A wrong code stays on the step with a message and
// an empty input; success opens the session and either emits "verified" (htmx) or redirects.
func (h *Pages) verify(c *fiber.Ctx) error {
	e := entryFromForm(c)
	e.Step = views.StepCode
	previous := h.sessions.Credential(c).CookieToken
	res, err := h.auth.SignIn(c.UserContext(), auth.SignInInput{
		Email: e.Email, Code: pastedCode(formValue(c, "otp")), Locale: h.lang(c).Code(),
		Client: auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)},
	})
	if err != nil {
		if next, ok := h.signedInAlready(c, e, err); ok {
			return c.Redirect(next, fiber.StatusSeeOther)
		}
		pr, known := explain(h.lang(c), err, countedAttempts)
		if !known {
			return err
		}
		switch {
		case errors.Is(err, auth.ErrInvalidEmail):
			e.Step = views.StepEmail
		case errors.Is(err, auth.ErrSignInUnconfirmed):
			// A 503 like any other, in the component's own words.
			middleware.NoteUnavailable(c, h.log, err)
		}
		e.Error = pr.message
		return h.renderEntry(c, pr.status, e)
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
	if isHTMX(c) {
		// The page decides what follows "verified": go on, grant the opt-in, or claim.
		trigger, _ := json.Marshal(map[string]map[string]string{"verified": {"redirect": nextPage(e)}})
		c.Set("HX-Trigger", string(trigger))
		return h.render(c, fiber.StatusOK, views.CodeEntry(e))
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
			pr, known := explain(h.lang(c), err, countedRequests)
			if !known {
				return err
			}
			return h.renderCheckout(c, pr.status, e.Purchase, nil, pr.message)
		}
	}
	return c.Redirect(afterSignIn(e), fiber.StatusSeeOther)
}

// nextPage is the page a code step was opened for (its form's redirect, checked when read), or
// home.
func nextPage(e views.Entry) string {
	if e.Redirect != "" {
		return e.Redirect
	}
	return "/"
}

// afterSignIn is where a code step sent without JavaScript goes once its browser is signed in: a
// checkout's success page, or nextPage.
func afterSignIn(e views.Entry) string {
	if e.Mode == views.ModeCheckout {
		return "/checkout/success?purchase=" + url.QueryEscape(e.Purchase)
	}
	return nextPage(e)
}

// signedInAlready reports where a code step refused with err goes on to when it was sent again
// after it signed in (a double click, a reload, back and submit, without JavaScript): the code is
// spent, but the browser holds the session it opened, for the same address. Telling that person
// their code is wrong, on a page that no longer shows them signed in, would send them round again.
func (h *Pages) signedInAlready(c *fiber.Ctx, e views.Entry, err error) (string, bool) {
	if isHTMX(c) || !errors.Is(err, auth.ErrInvalidOTP) {
		return "", false
	}
	st, rerr := h.sessions.Resolve(c, middleware.Options{})
	email, nerr := auth.NormalizeEmail(e.Email)
	if rerr != nil || nerr != nil || st == nil || st.User.Email != email {
		return "", false
	}
	return afterSignIn(e), true
}

// evidence describes the request a consent came through, and the language its words were shown
// in.
func (h *Pages) evidence(c *fiber.Ctx, source string) auth.ConsentEvidence {
	return auth.ConsentEvidence{Source: source, Locale: h.lang(c).Code(),
		Client: auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)}}
}

// signOut is POST /auth/sign-out from the pages.
func (h *Pages) signOut(c *fiber.Ctx) error {
	if err := h.sessions.SignOut(c); err != nil {
		return err
	}
	return c.Redirect(middleware.SignInPath, fiber.StatusSeeOther)
}

// account is GET /account.
func (h *Pages) account(c *fiber.Ctx) error {
	st := middleware.Current(c)
	return h.accountWith(c, fiber.StatusOK, views.Account{Email: st.User.Email, Name: st.User.Name})
}

// signedIn returns the session of a request that changes the account, checked against the
// database; without one, a page request is sent to sign in.
func (h *Pages) signedIn(c *fiber.Ctx) (*auth.SessionState, error) {
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true})
	if err != nil {
		return nil, err
	}
	if st == nil {
		if isHTMX(c) {
			c.Set("HX-Redirect", middleware.SignInPath)
		}
		return nil, errSignInFirst
	}
	return st, nil
}

// updateName is POST /account/name.
func (h *Pages) updateName(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	name := formValue(c, "name")
	user, err := h.auth.UpdateUser(c.UserContext(), st.User.ID, auth.UserUpdate{Name: &name})
	a := views.Account{Email: st.User.Email, Name: name}
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		a.NameError = pr.message
		if !isHTMX(c) {
			return h.accountWith(c, pr.status, a)
		}
		return h.render(c, pr.status, views.NameForm(a))
	}
	updated := *st
	updated.User = user
	h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	if !isHTMX(c) {
		return c.Redirect("/account", fiber.StatusSeeOther)
	}
	a.Name, a.NameSaved = user.Name, true
	return h.render(c, fiber.StatusOK, views.NameForm(a))
}

// accountWith renders the account page with a given form state (a refused change without
// JavaScript), adding the consent status and, for a session too old for the sensitive forms, the
// sign-in-again link.
func (h *Pages) accountWith(c *fiber.Ctx, status int, a views.Account) error {
	p, err := h.page(c, "title.account")
	if err != nil {
		return err
	}
	st := middleware.Current(c)
	prefs, err := h.auth.Preferences(c.UserContext(), st.User.ID)
	if err != nil {
		return err
	}
	a.MarketingOptIn = prefs.MarketingOptIn
	if a.Devices.List == nil {
		if a.Devices.List, err = h.devices(c, st); err != nil {
			return err
		}
	}
	if !h.auth.Fresh(st) {
		a.ReauthURL = middleware.ReauthURL("/account")
	}
	return h.render(c, status, views.AccountPage(p, a))
}

// grantConsent is POST /account/consent.
func (h *Pages) grantConsent(c *fiber.Ctx) error {
	return h.changeConsent(c, h.auth.GrantMarketingConsent, true)
}

// withdrawConsent is POST /account/consent/withdraw: as easy as the grant.
func (h *Pages) withdrawConsent(c *fiber.Ctx) error {
	return h.changeConsent(c, h.auth.WithdrawMarketingConsent, false)
}

func (h *Pages) changeConsent(c *fiber.Ctx, change func(context.Context, string, auth.ConsentEvidence) error, optedIn bool) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	if err := change(c.UserContext(), st.User.ID, h.evidence(c, "/account")); err != nil {
		if errors.Is(err, auth.ErrImpersonated) {
			return errConsentImpersonated
		}
		return err
	}
	if !isHTMX(c) {
		return c.Redirect("/account", fiber.StatusSeeOther)
	}
	return h.render(c, fiber.StatusOK, views.ConsentStatus(optedIn, true))
}

// checkout is GET /checkout/success?purchase=<id>: the guest purchase and the component that
// claims it, the e-mail address prefilled from the purchase.
func (h *Pages) checkout(c *fiber.Ctx) error {
	return h.renderCheckout(c, fiber.StatusOK, purchaseParam(c.Query("purchase")), nil, "")
}

// renderCheckout renders the checkout page for purchaseID, with the component at entry (or at its
// first step) and claimError when a claim was refused.
func (h *Pages) renderCheckout(c *fiber.Ctx, status int, purchaseID string, entry *views.Entry, claimError string) error {
	p, err := h.page(c, "title.purchase")
	if err != nil {
		return err
	}
	view := views.Checkout{PurchaseID: purchaseID, ClaimError: claimError}
	purchase, err := h.auth.Purchase(c.UserContext(), purchaseID)
	switch {
	case errors.Is(err, auth.ErrPurchaseNotFound):
		return h.render(c, fiber.StatusNotFound, views.CheckoutPage(p, view))
	case err != nil:
		return err
	}
	view.Found, view.Product, view.PurchasedAt = true, purchase.Product, purchase.PurchasedAt
	if st := middleware.Current(c); st != nil && purchase.UserID != nil && *purchase.UserID == st.User.ID {
		view.Claimed = true
		view.Announce = c.Query("claimed") == "1" // just claimed: the panel is the news
	}
	if entry != nil {
		view.Entry = *entry
		view.Entry.SignUpNote = h.signUpNote(h.lang(c))
	} else {
		view.Entry = views.Entry{Mode: views.ModeCheckout, Step: views.StepEmail, Email: purchase.Email, Purchase: purchase.ID,
			SignUpNote: h.signUpNote(h.lang(c))}
	}
	return h.render(c, status, views.CheckoutPage(p, view))
}

// claim is POST /checkout/claim: links the purchase to the signed-in account when the account's
// address is the one it was bought with.
func (h *Pages) claim(c *fiber.Ctx) error {
	st, err := h.signedIn(c)
	if err != nil {
		return err
	}
	id := purchaseParam(formValue(c, "purchase"))
	purchase, err := h.auth.ClaimPurchase(c.UserContext(), st.User, id)
	view := views.Checkout{Found: true, PurchaseID: id, Product: purchase.Product, Claimed: err == nil, Announce: true}
	status := fiber.StatusOK
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		view.ClaimError, status = pr.message, pr.status
		if !isHTMX(c) {
			return h.renderCheckout(c, status, id, nil, view.ClaimError)
		}
	}
	// Claimed: the whole page again, as it now is for its owner, signed in (the header, no
	// instruction to confirm the address any more), its success panel taking the focus; with
	// htmx by a redirect the script follows.
	done := "/checkout/success?purchase=" + url.QueryEscape(id) + "&claimed=1"
	if !isHTMX(c) {
		return c.Redirect(done, fiber.StatusSeeOther)
	}
	if err == nil {
		c.Set("HX-Redirect", done)
		return c.SendStatus(fiber.StatusNoContent)
	}
	return h.render(c, status, views.ClaimStatus(view))
}
