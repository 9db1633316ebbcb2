package betterauth

import (
	"errors"
	"fmt"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/gofiber/fiber/v2"
)

// Error is an error with its better-auth answer: the HTTP status, and the body
// {"message": ..., "code": ...}.
type Error struct {
	Status  int
	Code    string
	Message string
}

// Error is the answer's message.
func (e *Error) Error() string { return e.Message }

// errorBody is the JSON of every error answer.
type errorBody struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

func newError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// RetryAfterHeader is where better-auth clients read how long a rate limit lasts; everything else
// reads Retry-After.
const RetryAfterHeader = "X-Retry-After"

// The answers the HTTP layer raises itself, before or outside any route.
var (
	// ErrFraming refuses a request whose body length two HTTP servers could read differently
	// (middleware.Framing).
	ErrFraming = newError(fiber.StatusBadRequest, "BAD_REQUEST",
		"Ambiguous request framing: send one Content-Length, or Transfer-Encoding: chunked alone, and no folded header lines")
	// ErrContentEncoding refuses a compressed request body.
	ErrContentEncoding = newError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Content-Encoding is not supported: send the body uncompressed")
)

// The fixed error answers of the wire contract.
var (
	errUnauthorized         = newError(fiber.StatusUnauthorized, "UNAUTHORIZED", "Unauthorized")
	errInvalidJSON          = newError(fiber.StatusBadRequest, "BAD_REQUEST", "Invalid JSON in request body")
	errInvalidOTPType       = newError(fiber.StatusBadRequest, "INVALID_OTP_TYPE", "Invalid OTP type")
	errEmailCannotBeUpdated = newError(fiber.StatusBadRequest, "EMAIL_CAN_NOT_BE_UPDATED", "Email can not be updated")
	errNoFieldsToUpdate     = newError(fiber.StatusBadRequest, "NO_FIELDS_TO_UPDATE", "No fields to update")
	errContentTypeRequired  = newError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "Content-Type is required. Allowed types: application/json")
	errInternal             = newError(fiber.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "Internal server error")
	errUnavailable          = newError(fiber.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Service temporarily unavailable")
	// errGetSessionByPost is better-auth's answer to POST /get-session when its deferred
	// refreshes are off: here a session is always read, and refreshed, with GET.
	errGetSessionByPost = newError(fiber.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED_DEFER_SESSION_REQUIRED", "POST is not allowed: read the session with GET, which also refreshes it")
	// domainErrors answer what auth and the middleware refuse.
	domainErrors = map[error]*Error{
		middleware.ErrUnknownMethod:    newError(fiber.StatusBadRequest, "BAD_REQUEST", "Unknown request method"),
		auth.ErrInvalidEmail:           newError(fiber.StatusBadRequest, "INVALID_EMAIL", "Invalid email"),
		auth.ErrInvalidOTP:             newError(fiber.StatusBadRequest, "INVALID_OTP", "Invalid OTP"),
		auth.ErrOTPExpired:             newError(fiber.StatusBadRequest, "OTP_EXPIRED", "OTP expired"),
		auth.ErrTooManyAttempts:        newError(fiber.StatusForbidden, "TOO_MANY_ATTEMPTS", "Too many attempts"),
		auth.ErrEmailSame:              newError(fiber.StatusBadRequest, "EMAIL_IS_THE_SAME", "Email is the same"),
		auth.ErrChangeLinksDisabled:    newError(fiber.StatusBadRequest, "VERIFICATION_EMAIL_NOT_ENABLED", "Verification email isn't enabled"),
		auth.ErrInvalidToken:           newError(fiber.StatusUnauthorized, "INVALID_TOKEN", "Invalid token"),
		auth.ErrTokenExpired:           newError(fiber.StatusUnauthorized, "TOKEN_EXPIRED", "Token expired"),
		auth.ErrEmailTaken:             newError(fiber.StatusBadRequest, "EMAIL_ALREADY_IN_USE", "Email already in use"),
		auth.ErrUserNotFound:           errUnauthorized,
		auth.ErrSessionNotFresh:        newError(fiber.StatusBadRequest, "SESSION_EXPIRED", "Session expired. Re-authenticate to perform this action."),
		auth.ErrSessionNotFound:        newError(fiber.StatusBadRequest, "SESSION_NOT_FOUND", "Session not found"),
		auth.ErrRateLimited:            newError(fiber.StatusTooManyRequests, "TOO_MANY_REQUESTS", "Too many requests. Please try again later."),
		auth.ErrSigningKeySealed:       newError(fiber.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Service temporarily unavailable"),
		auth.ErrSignInUnconfirmed:      newError(fiber.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "Service temporarily unavailable. The sign-in may not have completed: request a new code and try again."),
		auth.ErrNotAdmin:               newError(fiber.StatusForbidden, "FORBIDDEN", "You are not allowed to do this"),
		auth.ErrNoSuchUser:             newError(fiber.StatusNotFound, "USER_NOT_FOUND", "User not found"),
		auth.ErrImpersonated:           newError(fiber.StatusForbidden, "NOT_ALLOWED_WHILE_IMPERSONATING", "This is the account owner's own to do: it cannot be done in a session an admin opened as the account"),
		auth.ErrLastAdmin:              newError(fiber.StatusBadRequest, "YOU_CANNOT_REMOVE_THE_LAST_ADMIN", "The last admin cannot be demoted, banned or removed: make another account an admin first"),
		auth.ErrUnknownRole:            newError(fiber.StatusBadRequest, "YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE", "You are not allowed to set a non-existent role value"),
		auth.ErrCannotBanSelf:          newError(fiber.StatusBadRequest, "YOU_CANNOT_BAN_YOURSELF", "You cannot ban yourself"),
		auth.ErrCannotRemoveSelf:       newError(fiber.StatusBadRequest, "YOU_CANNOT_REMOVE_YOURSELF", "You cannot remove yourself"),
		auth.ErrInvalidBanLength:       newError(fiber.StatusBadRequest, "VALIDATION_ERROR", "Invalid input: expected a number of seconds, 0 (for good) or more"),
		auth.ErrCannotImpersonateAdmin: newError(fiber.StatusForbidden, "YOU_CANNOT_IMPERSONATE_ADMINS", "You cannot impersonate admins"),
		auth.ErrBanned:                 newError(fiber.StatusForbidden, "BANNED_USER", BannedMessage),

		middleware.ErrMissingOrigin:        newError(fiber.StatusForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin"),
		middleware.ErrInvalidOrigin:        newError(fiber.StatusForbidden, "INVALID_ORIGIN", "Invalid origin"),
		middleware.ErrCrossSiteNavigation:  newError(fiber.StatusForbidden, "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED", "Cross-site navigation login blocked. This request appears to be a CSRF attack."),
		middleware.ErrInvalidCallbackURL:   newError(fiber.StatusForbidden, "INVALID_CALLBACK_URL", "Invalid callbackURL"),
		middleware.ErrInvalidRedirectURL:   newError(fiber.StatusForbidden, "INVALID_REDIRECT_URL", "Invalid redirectURL"),
		middleware.ErrInvalidErrorCallback: newError(fiber.StatusForbidden, "INVALID_ERROR_CALLBACK_URL", "Invalid errorCallbackURL"),
		middleware.ErrInvalidNewUserURL:    newError(fiber.StatusForbidden, "INVALID_NEW_USER_CALLBACK_URL", "Invalid newUserCallbackURL"),
		middleware.ErrRedirectNotString:    newError(fiber.StatusBadRequest, "VALIDATION_ERROR", "Invalid callbackURL: expected a string"),
	}
	// fiberErrors are the router's and the HTTP server's own failures.
	fiberErrors = map[int]*Error{
		fiber.StatusBadRequest:                  newError(fiber.StatusBadRequest, "BAD_REQUEST", "Bad request"),
		fiber.StatusNotFound:                    newError(fiber.StatusNotFound, "NOT_FOUND", "Not Found"),
		fiber.StatusMethodNotAllowed:            newError(fiber.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method not allowed"),
		fiber.StatusRequestTimeout:              newError(fiber.StatusRequestTimeout, "REQUEST_TIMEOUT", "Request timeout"),
		fiber.StatusRequestEntityTooLarge:       newError(fiber.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "Request body is too large"),
		fiber.StatusRequestHeaderFieldsTooLarge: newError(fiber.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE", "Request headers are too large"),
	}
)

// BannedMessage is what a banned account is told when it verifies a code (better-auth's default
// bannedUserMessage).
const BannedMessage = "You have been banned from this application. Please contact support if you believe this is an error."

// validationError is 400 VALIDATION_ERROR with better-auth's "[body.<field>] <reason>" message.
func validationError(message string) *Error {
	return newError(fiber.StatusBadRequest, "VALIDATION_ERROR", message)
}

// fieldReasons word auth's field refusals as better-auth's validator (zod) does.
var fieldReasons = map[auth.FieldReason]string{
	auth.ReasonInvalidUTF8: "Invalid input: not valid UTF-8",
	auth.ReasonInvisible:   "Invalid input: control and invisible characters are not allowed",
	auth.ReasonNoVisible:   "Invalid input: expected at least one visible character",
	auth.ReasonNotHTTPURL:  "Invalid input: expected an absolute http(s) URL",
}

// fieldError is the VALIDATION_ERROR of a field auth refused.
func fieldError(fe *auth.FieldError) *Error {
	reason, ok := fieldReasons[fe.Reason]
	switch {
	case fe.Reason == auth.ReasonTooLong && fe.Field == "image":
		reason = fmt.Sprintf("Too big: expected a URL of at most %d characters", fe.Max)
	case fe.Reason == auth.ReasonTooLong:
		reason = fmt.Sprintf("Too big: expected string to have <=%d characters", fe.Max)
	case !ok:
		reason = "Invalid input"
	}
	return validationError("[body." + fe.Field + "] " + reason)
}

// Answer maps any error to its answer: the one place where errors become HTTP statuses and
// better-auth's codes and messages. known is false for an unexpected error, answered with a
// generic 500.
func Answer(err error) (answer *Error, known bool) {
	var ae *Error
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
		return fieldError(fe), true
	}
	var fiberErr *fiber.Error
	if errors.As(err, &fiberErr) {
		if answer, ok := fiberErrors[fiberErr.Code]; ok {
			return answer, true
		}
		if fiberErr.Code >= 400 && fiberErr.Code < 500 {
			return newError(fiberErr.Code, "BAD_REQUEST", fiberErr.Message), true
		}
	}
	if models.Unavailable(err) {
		return errUnavailable, true
	}
	return errInternal, false
}

// WriteError answers with the JSON body of answer.
func WriteError(c *fiber.Ctx, answer *Error) error {
	return c.Status(answer.Status).JSON(errorBody{Message: answer.Message, Code: answer.Code})
}
