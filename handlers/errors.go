package handlers

import (
	"errors"
	"log/slog"
	"math"
	"strconv"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/models"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// apiError is an error with its HTTP answer. Body: {"message": ..., "code": ...}.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

// errorBody is the JSON of every error answer.
type errorBody struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

func newAPIError(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

// The fixed error answers of the wire contract.
var (
	errUnauthorized         = newAPIError(fiber.StatusUnauthorized, "UNAUTHORIZED", "Unauthorized")
	errInvalidJSON          = newAPIError(fiber.StatusBadRequest, "BAD_REQUEST", "Invalid JSON in request body")
	errInvalidOTPType       = newAPIError(fiber.StatusBadRequest, "INVALID_OTP_TYPE", "Invalid OTP type")
	errEmailCannotBeUpdated = newAPIError(fiber.StatusBadRequest, "EMAIL_CAN_NOT_BE_UPDATED", "Email can not be updated")
	errNoFieldsToUpdate     = newAPIError(fiber.StatusBadRequest, "NO_FIELDS_TO_UPDATE", "No fields to update")
	errContentTypeRequired  = newAPIError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Content-Type is required. Allowed types: application/json")
	errContentEncoding      = newAPIError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Content-Encoding is not supported: send the body uncompressed")
	errInternal             = newAPIError(fiber.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
	errUnavailable          = newAPIError(fiber.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Service temporarily unavailable")
	errUnknownUser          = errUnauthorized
	domainErrors            = map[error]*apiError{
		auth.ErrInvalidEmail:        newAPIError(fiber.StatusBadRequest, "INVALID_EMAIL", "Invalid email"),
		auth.ErrInvalidOTP:          newAPIError(fiber.StatusBadRequest, "INVALID_OTP", "Invalid OTP"),
		auth.ErrOTPExpired:          newAPIError(fiber.StatusBadRequest, "OTP_EXPIRED", "OTP expired"),
		auth.ErrTooManyAttempts:     newAPIError(fiber.StatusForbidden, "TOO_MANY_ATTEMPTS", "Too many attempts"),
		auth.ErrEmailSame:           newAPIError(fiber.StatusBadRequest, "EMAIL_IS_THE_SAME", "Email is the same"),
		auth.ErrChangeLinksDisabled: newAPIError(fiber.StatusBadRequest, "VERIFICATION_EMAIL_NOT_ENABLED", "Verification email isn't enabled"),
		auth.ErrInvalidToken:        newAPIError(fiber.StatusUnauthorized, "INVALID_TOKEN", "Invalid token"),
		auth.ErrTokenExpired:        newAPIError(fiber.StatusUnauthorized, "TOKEN_EXPIRED", "Token expired"),
		auth.ErrEmailTaken:          newAPIError(fiber.StatusBadRequest, "EMAIL_ALREADY_IN_USE", "Email already in use"),
		auth.ErrUserNotFound:        errUnknownUser,
		auth.ErrSessionNotFresh:     newAPIError(fiber.StatusForbidden, "SESSION_NOT_FRESH", "Session is not fresh"),
		auth.ErrRateLimited:         newAPIError(fiber.StatusTooManyRequests, "TOO_MANY_REQUESTS", "Too many requests. Please try again later."),
		auth.ErrSignInUnconfirmed:   newAPIError(fiber.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Service temporarily unavailable. The sign-in may not have completed: request a new code and try again."),
	}
	// fiberErrors are the router's and the HTTP server's own failures.
	fiberErrors = map[int]*apiError{
		fiber.StatusBadRequest:                  newAPIError(fiber.StatusBadRequest, "BAD_REQUEST", "Bad request"),
		fiber.StatusNotFound:                    newAPIError(fiber.StatusNotFound, "NOT_FOUND", "Not Found"),
		fiber.StatusMethodNotAllowed:            newAPIError(fiber.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method not allowed"),
		fiber.StatusRequestTimeout:              newAPIError(fiber.StatusRequestTimeout, "REQUEST_TIMEOUT", "Request timeout"),
		fiber.StatusRequestEntityTooLarge:       newAPIError(fiber.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "Request body is too large"),
		fiber.StatusRequestHeaderFieldsTooLarge: newAPIError(fiber.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE", "Request headers are too large"),
		fiber.StatusNotImplemented:              newAPIError(fiber.StatusNotImplemented, "NOT_IMPLEMENTED", "Request method not implemented"),
	}
)

// validationError is 400 VALIDATION_ERROR with better-auth's "[body.<field>] <reason>" message.
func validationError(message string) *apiError {
	return newAPIError(fiber.StatusBadRequest, "VALIDATION_ERROR", message)
}

// toAPIError maps any error to its answer: the one place where domain errors become HTTP.
func toAPIError(err error) (*apiError, bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae, true
	}
	for target, answer := range domainErrors {
		if errors.Is(err, target) {
			return answer, true
		}
	}
	var fe *auth.FieldError
	if errors.As(err, &fe) {
		return validationError("[body." + fe.Field + "] " + fe.Reason), true
	}
	var oe *middleware.OriginError
	if errors.As(err, &oe) {
		return newAPIError(oe.Status, oe.Code, oe.Message), true
	}
	var fiberErr *fiber.Error
	if errors.As(err, &fiberErr) {
		if answer, ok := fiberErrors[fiberErr.Code]; ok {
			return answer, true
		}
		if fiberErr.Code >= 400 && fiberErr.Code < 500 {
			return newAPIError(fiberErr.Code, "BAD_REQUEST", fiberErr.Message), true
		}
	}
	if models.Unavailable(err) {
		return errUnavailable, true
	}
	return errInternal, false
}

// unavailableRetryAfter is the Retry-After of a 503: about as long as a database restart or a
// failover takes to begin answering again.
const unavailableRetryAfter = "5"

// noteUnavailable does for a 503 what every one gets, whoever writes its body: a warning with
// the cause in the log, and Retry-After.
func noteUnavailable(c *fiber.Ctx, log *slog.Logger, err error) {
	log.WarnContext(c.UserContext(), "database unavailable", "method", c.Method(), "path", c.Path(), "error", err)
	c.Set(fiber.HeaderRetryAfter, unavailableRetryAfter)
}

// ErrorHandler writes the answer for an error returned by a handler or raised by the server:
// JSON under /api (and for the probes, and for a request whose path the server lost), an error
// page elsewhere, and for htmx requests a notice swapped into the page's alert region. Unexpected
// errors are logged with the request's id and answered with a generic 500 that reveals nothing
// about the cause.
func ErrorHandler(log *slog.Logger, siteName string) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		answer, known := toAPIError(err)
		switch {
		case !known:
			log.ErrorContext(c.UserContext(), "request failed", "method", c.Method(), "path", c.Path(), "error", err)
		case answer.Status == fiber.StatusServiceUnavailable:
			noteUnavailable(c, log, err)
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		var limited *auth.RateLimitError
		if errors.As(err, &limited) {
			// better-auth clients read X-Retry-After; everything else reads Retry-After.
			secs := strconv.FormatInt(int64(math.Ceil(limited.RetryAfter.Seconds())), 10)
			c.Set("X-Retry-After", secs)
			c.Set(fiber.HeaderRetryAfter, secs)
		}
		if kind := middleware.KindOf(c); kind == middleware.APIPath || kind == middleware.ProbePath {
			return c.Status(answer.Status).JSON(errorBody{Message: answer.Message, Code: answer.Code})
		}
		message := pageMessage(answer, limited)
		if c.Get("HX-Request") == "true" {
			c.Set("HX-Retarget", "#flash")
			c.Set("HX-Reswap", "innerHTML")
			return render(c, answer.Status, views.Flash(message))
		}
		return render(c, answer.Status, views.ErrorPage(views.Page{Title: message, SiteName: siteName}, answer.Status, message))
	}
}

// pageMessage words an error for a person rather than a program.
func pageMessage(answer *apiError, limited *auth.RateLimitError) string {
	switch answer.Status {
	case fiber.StatusNotFound:
		return "This page does not exist."
	case fiber.StatusForbidden:
		return "This request came from another site, so it was refused."
	case fiber.StatusUnauthorized:
		return "Please sign in first."
	case fiber.StatusTooManyRequests:
		if limited != nil {
			return "Too many requests. " + retryText(limited)
		}
		return "Too many requests. Please try again later."
	case fiber.StatusRequestEntityTooLarge:
		return "That was more than this form accepts."
	case fiber.StatusServiceUnavailable:
		return "The service is briefly unavailable. Please try again in a moment."
	case fiber.StatusInternalServerError:
		return "Something went wrong on our side. Please try again."
	}
	return answer.Message
}
