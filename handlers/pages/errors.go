package pages

import (
	"errors"
	"fmt"

	"codeauth/auth"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// This file is where the pages word errors for the person who reads them: problems for the
// refusals a form explains in its own place, and errorPageMessage for whatever reaches the error
// page.

// A problem is how a page words a refusal, and the status it answers with.
type problem struct {
	status  int
	message string
}

// invalidEmail is the words for an address auth refused, on every form that takes one.
var invalidEmail = problem{fiber.StatusUnprocessableEntity, "Enter a valid e-mail address, such as name@example.com."}

// problems are the refusals the pages explain in place: beside the field, in the code-entry
// component, on the link's page.
var problems = map[error]problem{
	auth.ErrInvalidEmail:        invalidEmail,
	auth.ErrInvalidOTP:          {fiber.StatusUnprocessableEntity, "That code is not right. Check the e-mail and try again."},
	auth.ErrOTPExpired:          {fiber.StatusUnprocessableEntity, "That code has expired. Send the code again for a new one."},
	auth.ErrTooManyAttempts:     {fiber.StatusUnprocessableEntity, "Too many wrong codes. Send the code again for a new one."},
	auth.ErrSignInUnconfirmed:   {fiber.StatusServiceUnavailable, "The service was briefly unavailable, so we could not confirm your sign-in. Send the code again and try again."},
	auth.ErrEmailSame:           {fiber.StatusUnprocessableEntity, "That is already your address."},
	auth.ErrChangeLinksDisabled: {fiber.StatusUnprocessableEntity, "Changing the address on the web is switched off here. Use the app."},
	auth.ErrTokenExpired:        {fiber.StatusGone, "This link has expired. Ask for a new one from your account page."},
	auth.ErrInvalidToken:        {fiber.StatusBadRequest, "This link is not valid any more: it was used already, replaced by a newer one, or opened while signed in to another account."},
	auth.ErrEmailTaken:          {fiber.StatusConflict, "That address now belongs to another account, so it cannot be used here."},
	auth.ErrPurchaseNotFound:    {fiber.StatusUnprocessableEntity, "We could not find this purchase."},
	auth.ErrPurchaseOtherEmail:  {fiber.StatusUnprocessableEntity, "This purchase was made with another e-mail address. Sign in with that address to keep it."},
	auth.ErrSessionNotFound:     {fiber.StatusBadRequest, "That device is signed out already."},
	auth.ErrBanned:              {fiber.StatusForbidden, "This account has been suspended, so it cannot sign in. If you think this is a mistake, contact support."},
	auth.ErrImpersonated:        {fiber.StatusForbidden, "Only the account's owner can do this: it cannot be done while you act as them."},
}

// What a rate limit counted, in the words of the form that was refused ("Too many codes were
// asked for.").
const (
	countedCodes    = "codes were asked for"
	countedAttempts = "attempts"
	countedLinks    = "links were asked for"
	countedRequests = "requests"
)

// explain words err for a form, or reports false for an error no form explains (it goes to the
// error page). counted is what the form's rate limit counts.
func explain(err error, counted string) (problem, bool) {
	var limited *auth.RateLimitError
	if errors.As(err, &limited) {
		return problem{fiber.StatusTooManyRequests, tooMany(limited, counted)}, true
	}
	var fe *auth.FieldError
	if errors.As(err, &fe) {
		// The name is the only field a page edits.
		return problem{fiber.StatusUnprocessableEntity,
			fmt.Sprintf("Use at most %d characters, with no control or invisible characters.", auth.MaxNameLength)}, true
	}
	for target, p := range problems {
		if errors.Is(err, target) {
			return p, true
		}
	}
	return problem{}, false
}

// tooMany words a rate limit: what was counted, and when to try again.
func tooMany(limited *auth.RateLimitError, counted string) string {
	return "Too many " + counted + ". " + retryText(limited)
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

// errorPageMessage words an error no form explained, by the status it is answered with; fallback
// is the answer's own message, for the statuses that have no words here.
func errorPageMessage(status int, fallback string, err error) string {
	for _, own := range []*fiber.Error{errAdminsOnly, errBadSearch, errConsentImpersonated} {
		if errors.Is(err, own) {
			return own.Message // the pages' own refusals have words of their own
		}
	}
	if p, ok := explain(err, countedRequests); ok {
		return p.message // a refusal of auth's, in the words the forms use
	}
	switch status {
	case fiber.StatusNotFound:
		return "This page does not exist."
	case fiber.StatusForbidden:
		return "This request came from another site, so it was refused."
	case fiber.StatusUnauthorized:
		return "Please sign in first."
	case fiber.StatusTooManyRequests:
		var limited *auth.RateLimitError
		if errors.As(err, &limited) {
			return tooMany(limited, countedRequests)
		}
		return "Too many requests. Please try again later."
	case fiber.StatusRequestEntityTooLarge:
		return "That was more than this form accepts."
	case fiber.StatusServiceUnavailable:
		return "The service is briefly unavailable. Please try again in a moment."
	case fiber.StatusInternalServerError:
		return "Something went wrong on our side. Please try again."
	}
	return fallback
}

// RenderError answers a page request that failed with status (the error's HTTP status; fallback
// is its message for a program): an error page, or for htmx a notice swapped into the page's
// alert region.
func RenderError(c *fiber.Ctx, siteName string, status int, fallback string, err error) error {
	message := errorPageMessage(status, fallback, err)
	if isHTMX(c) {
		c.Set("HX-Retarget", "#flash")
		c.Set("HX-Reswap", "innerHTML")
		return render(c, status, views.Flash(message))
	}
	return render(c, status, views.ErrorPage(views.Page{Title: message, SiteName: siteName}, status, message))
}
