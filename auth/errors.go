// Package auth is the domain of the service: one-time codes, sign-up and sign-in, sessions and
// their signing, and the cookie cache. It knows nothing of HTTP; the handlers translate its errors
// into status codes and bodies in one place.
package auth

import (
	"errors"
	"fmt"

	"codeauth/models"
)

// Errors returned by the service. Callers compare with errors.Is.
var (
	// ErrInvalidEmail means the address is not one this service accepts (see NormalizeEmail).
	ErrInvalidEmail = errors.New("auth: invalid email")
	// ErrInvalidOTP covers a wrong, malformed, replaced, used or unknown code.
	ErrInvalidOTP = errors.New("auth: invalid otp")
	// ErrOTPExpired means the code was right or wrong, but too late to matter.
	ErrOTPExpired = errors.New("auth: otp expired")
	// ErrTooManyAttempts means the code has used up its attempts and is now dead.
	ErrTooManyAttempts = errors.New("auth: too many attempts")
	// ErrUserNotFound means the signed-in user's account no longer exists.
	ErrUserNotFound = errors.New("auth: user not found")
)

// FieldError is a rejected input field: which one, and why, as a reason a program can act on.
// The HTTP layer words it for its audience.
type FieldError struct {
	Field  string
	Reason FieldReason
	// Max is the limit a ReasonTooLong went past: characters for a name, encoded bytes for a URL.
	Max int
}

// Error describes the rejected field.
func (e *FieldError) Error() string { return fmt.Sprintf("auth: %s: %s", e.Field, e.Reason) }

// FieldReason says why a field was rejected.
type FieldReason string

// The reasons a field is rejected.
const (
	// ReasonInvalidUTF8 is text that is not valid UTF-8.
	ReasonInvalidUTF8 FieldReason = "invalid utf-8"
	// ReasonTooLong is a value longer than FieldError.Max.
	ReasonTooLong FieldReason = "too long"
	// ReasonInvisible is text with control or invisible characters where they do no work.
	ReasonInvisible FieldReason = "control or invisible characters"
	// ReasonNoVisible is text that is not empty but puts no ink on the page.
	ReasonNoVisible FieldReason = "no visible character"
	// ReasonNotHTTPURL is a value that is not an absolute http(s) URL.
	ReasonNotHTTPURL FieldReason = "not an absolute http(s) url"
)

// notFoundAs is notFound when err says the row does not exist; any other failure (the database
// being unavailable, say) is wrapped with what was being done, so it is answered as what it is
// and never passed off as a refusal of the request.
func notFoundAs(err, notFound error, doing string) error {
	if errors.Is(err, models.ErrNotFound) {
		return notFound
	}
	return fmt.Errorf("auth: %s: %w", doing, err)
}
