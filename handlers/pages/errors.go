package pages

import (
	"errors"

	"codeauth/auth"
	"codeauth/i18n"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// This file is where the pages word errors for the person who reads them, in their language:
// problems for the refusals a form explains in its own place, and errorPageMessage for whatever
// reaches the error page. The words are messages of the i18n files; these tables hold their keys.

// A problem is how a page words a refusal, and the status it answers with.
type problem struct {
	status  int
	message string
}

// A refusal is a problem before it is worded: its status and its message's key.
type refusal struct {
	status int
	key    string
}

// invalidEmail is the words for an address auth refused, on every form that takes one.
var invalidEmail = refusal{fiber.StatusUnprocessableEntity, "problem.invalid_email"}

// problems are the refusals the pages explain in place: beside the field, in the code-entry
// component, on the link's page.
var problems = map[error]refusal{
	auth.ErrInvalidEmail:        invalidEmail,
	auth.ErrInvalidOTP:          {fiber.StatusUnprocessableEntity, "problem.invalid_otp"},
	auth.ErrOTPExpired:          {fiber.StatusUnprocessableEntity, "problem.otp_expired"},
	auth.ErrTooManyAttempts:     {fiber.StatusUnprocessableEntity, "problem.too_many_attempts"},
	auth.ErrSignInUnconfirmed:   {fiber.StatusServiceUnavailable, "problem.sign_in_unconfirmed"},
	auth.ErrEmailSame:           {fiber.StatusUnprocessableEntity, "problem.email_same"},
	auth.ErrChangeLinksDisabled: {fiber.StatusUnprocessableEntity, "problem.change_links_disabled"},
	auth.ErrTokenExpired:        {fiber.StatusGone, "problem.token_expired"},
	auth.ErrInvalidToken:        {fiber.StatusBadRequest, "problem.invalid_token"},
	auth.ErrEmailTaken:          {fiber.StatusConflict, "problem.email_taken"},
	auth.ErrPurchaseNotFound:    {fiber.StatusUnprocessableEntity, "problem.purchase_not_found"},
	auth.ErrPurchaseOtherEmail:  {fiber.StatusUnprocessableEntity, "problem.purchase_other_email"},
	auth.ErrSessionNotFound:     {fiber.StatusBadRequest, "problem.session_not_found"},
	auth.ErrBanned:              {fiber.StatusForbidden, "problem.banned"},
	auth.ErrImpersonated:        {fiber.StatusForbidden, "problem.impersonated"},
	auth.ErrLastAdmin:           {fiber.StatusBadRequest, "problem.last_admin"},
}

// What a rate limit counted, in the words of the form that was refused ("Too many codes were
// asked for."): the keys of those words.
const (
	countedCodes    = "limit.codes"
	countedAttempts = "limit.attempts"
	countedLinks    = "limit.links"
	countedRequests = "limit.requests"
)

// explain words err for a form in l, or reports false for an error no form explains (it goes to
// the error page). counted is what the form's rate limit counts.
func explain(l *i18n.Locale, err error, counted string) (problem, bool) {
	var limited *auth.RateLimitError
	if errors.As(err, &limited) {
		return problem{fiber.StatusTooManyRequests, tooMany(l, limited, counted)}, true
	}
	var fe *auth.FieldError
	if errors.As(err, &fe) {
		// A name, or an admin's ban reason: the text fields a page edits, held to the same rules
		// and carrying their limit.
		return problem{fiber.StatusUnprocessableEntity, l.Tf("problem.name_invalid", map[string]any{"Max": fe.Max})}, true
	}
	for target, r := range problems {
		if errors.Is(err, target) {
			return problem{r.status, l.T(r.key)}, true
		}
	}
	return problem{}, false
}

// tooMany words a rate limit: what was counted, and when to try again.
func tooMany(l *i18n.Locale, limited *auth.RateLimitError, counted string) string {
	return l.T(counted) + " " + retryText(l, limited)
}

// retryText says when to try again, in words.
func retryText(l *i18n.Locale, e *auth.RateLimitError) string {
	minutes := int(e.RetryAfter.Minutes() + 0.999)
	switch {
	case e.RetryAfter.Seconds() < 90:
		return l.Tn("retry.seconds", int(e.RetryAfter.Seconds()+0.999), nil)
	case minutes < 120:
		return l.Tn("retry.minutes", minutes, nil)
	}
	return l.Tn("retry.hours", minutes/60+1, nil)
}

// The pages' own refusals that reach the error page, by their error: the keys of their words.
var ownRefusals = map[*fiber.Error]string{
	errAdminsOnly:          "error.admins_only",
	errBadSearch:           "error.bad_search",
	errConsentImpersonated: "error.consent_impersonated",
	errNotAForm:            "error.not_a_form",
}

// errorPageMessage words in l an error no form explained, by the status it is answered with;
// fallback is the answer's own message, for the statuses that have no words here.
func errorPageMessage(l *i18n.Locale, status int, fallback string, err error) string {
	for own, key := range ownRefusals {
		if errors.Is(err, own) {
			return l.T(key) // the pages' own refusals have words of their own
		}
	}
	if p, ok := explain(l, err, countedRequests); ok {
		return p.message // a refusal of auth's, in the words the forms use
	}
	switch status {
	case fiber.StatusNotFound:
		return l.T("error.not_found")
	case fiber.StatusForbidden:
		return l.T("error.cross_site")
	case fiber.StatusUnauthorized:
		return l.T("error.sign_in_first")
	case fiber.StatusTooManyRequests:
		var limited *auth.RateLimitError
		if errors.As(err, &limited) {
			return tooMany(l, limited, countedRequests)
		}
		return l.T("error.too_many")
	case fiber.StatusRequestEntityTooLarge:
		return l.T("error.too_large")
	case fiber.StatusServiceUnavailable:
		return l.T("error.unavailable")
	case fiber.StatusInternalServerError:
		return l.T("error.internal")
	}
	return fallback
}

// RenderError answers a page request that failed with status (the error's HTTP status; fallback
// is its message for a program), with the header of whoever sessions finds signed in, in the
// request's language: an error page, or for htmx a notice
// swapped into the page's alert region.
func RenderError(c *fiber.Ctx, site Site, locales *middleware.Locales, sessions *middleware.Sessions, status int, fallback string, err error) error {
	l := locales.Of(c)
	message := errorPageMessage(l, status, fallback, err)
	if isHTMX(c) {
		c.Set("HX-Retarget", "#flash")
		c.Set("HX-Reswap", "innerHTML")
		return render(c, l, status, views.Flash(message))
	}
	p := site.Page(message, here(c))
	// The header says who is signed in, as on every page (a 404 of a public path ran no session
	// check). Not when the service itself failed: the error page must not fail again, or wait on
	// the database that just failed it.
	st := middleware.Current(c)
	if st == nil && sessions != nil && status < fiber.StatusInternalServerError {
		st, _ = sessions.Resolve(c, middleware.Options{})
	}
	p.User = viewUser(st)
	return render(c, l, status, views.ErrorPage(p, status, message))
}
