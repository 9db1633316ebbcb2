// Package auth is the domain of the service: the rules of one-time codes, sign-up and sign-in,
// sessions and the cookie cache, address changes, deletion and consent. It knows nothing of HTTP
// or of the database: each capability declares the store interface it needs (models implements
// them), and the HTTP adapters translate its errors into status codes and bodies, each in one
// place. docs/architecture.md has the map.
package auth

import (
	"errors"
	"fmt"
	"time"

	"codeauth/models"
)

// Every error value of the service is declared in this file. Callers compare with errors.Is; the
// HTTP adapters map each to their own wording in one place each.

// Errors of codes and accounts.
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

// Errors of the admin layer (better-auth's admin plugin).
var (
	// ErrNotAdmin means the caller's session is not an admin's own (a user's, or one an admin
	// opened as someone else).
	ErrNotAdmin = errors.New("auth: not an admin")
	// ErrUnknownRole means a role other than "admin" and "user" was asked for.
	ErrUnknownRole = errors.New("auth: no such role")
	// ErrInvalidUserQuery means list-users named a field or operator it cannot search by, or the
	// audit log was asked for an account by something that is not an account's id.
	ErrInvalidUserQuery = errors.New("auth: invalid user query")
	// ErrInvalidAuditAction means the audit log was asked for an action that no action's name
	// could be (not valid UTF-8, or holding a NUL).
	ErrInvalidAuditAction = errors.New("auth: invalid audit action")
	// ErrNothingToUpdate means an update named nothing to change.
	ErrNothingToUpdate = errors.New("auth: no data to update")
	// ErrCannotBanSelf and ErrCannotRemoveSelf refuse an admin acting on their own account.
	ErrCannotBanSelf    = errors.New("auth: an admin cannot ban themself")
	ErrCannotRemoveSelf = errors.New("auth: an admin cannot remove themself")
	// ErrInvalidBanLength refuses a ban whose length is negative (0 is a ban for good), or one a
	// person typed that is not a length of at least a second (ParseBanLength).
	ErrInvalidBanLength = errors.New("auth: invalid ban length")
	// ErrCannotImpersonateAdmin refuses to open a session as another admin.
	ErrCannotImpersonateAdmin = errors.New("auth: admins cannot be impersonated")
	// ErrNotImpersonating means stop-impersonating was asked by a session no admin opened.
	ErrNotImpersonating = errors.New("auth: not impersonating anyone")
	// ErrBanned means the account is banned: it cannot sign in or be impersonated.
	ErrBanned = errors.New("auth: the account is banned")
	// ErrImpersonated refuses, in a session an admin opened as an account, what only the account's
	// owner may do: consent, a change of address, the deletion of the account.
	ErrImpersonated = errors.New("auth: not in a session an admin opened as the account")
	// ErrLastAdmin refuses to demote, ban or remove the last admin in force: the service would
	// have nobody left to run it.
	ErrLastAdmin = errors.New("auth: the last admin cannot be demoted, banned or removed")
	// ErrNoSuchUser means the account an admin named does not exist (or is deleted).
	ErrNoSuchUser = errors.New("auth: no such user")
)

// ErrSessionNotFound means no session of the caller's account has the handle or token named.
var ErrSessionNotFound = errors.New("auth: session not found")

// ErrSessionNotFresh means the session was signed in longer ago than FreshAge: sign in again.
var ErrSessionNotFresh = errors.New("auth: session is not fresh")

// ErrSignInUnconfirmed means the database broke off before it confirmed a sign-in's commit and
// could not be asked afterwards whether it had committed: the code may have been used, so the
// person should ask for a new one rather than try it again.
var ErrSignInUnconfirmed = errors.New("auth: the sign-in could not be confirmed")

// ErrSigningKeySealed means the JWT signing key does not open under this AUTH_SECRET: it was
// sealed under another one. `codeauth jwt:rotate` adds a key sealed under the current secret.
var ErrSigningKeySealed = errors.New("auth: the JWT signing key was sealed under another AUTH_SECRET")

// ErrCacheTooLarge means the session is too big for the cookie cache; it is simply not cached.
var ErrCacheTooLarge = errors.New("auth: session too large for the cookie cache")

// Errors of the e-mail change.
var (
	// ErrEmailSame means the new address is the current one.
	ErrEmailSame = errors.New("auth: email is the same")
	// ErrChangeLinksDisabled means the link-based change is switched off in the configuration.
	ErrChangeLinksDisabled = errors.New("auth: verification email isn't enabled")
	// ErrInvalidToken covers an unknown, used, tampered or foreign link token.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrTokenExpired means the link came too late.
	ErrTokenExpired = errors.New("auth: token expired")
	// ErrEmailTaken means the address to restore now belongs to another account.
	ErrEmailTaken = errors.New("auth: email already in use")
)

// Errors of purchase claims.
var (
	// ErrPurchaseNotFound means no purchase has that id.
	ErrPurchaseNotFound = errors.New("auth: purchase not found")
	// ErrPurchaseOtherEmail means the purchase was made with another address than the account's.
	ErrPurchaseOtherEmail = errors.New("auth: purchase made with another e-mail address")
)

// ErrRateLimited is matched (errors.Is) by every RateLimitError.
var ErrRateLimited = errors.New("auth: rate limited")

// RateLimitError means a limit was reached. RetryAfter says when the caller may try again.
type RateLimitError struct {
	RetryAfter time.Duration
}

// Error names the failure.
func (e *RateLimitError) Error() string {
	return fmt.Sprintf("auth: rate limited, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true for every RateLimitError.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// FieldError is a rejected input field: which one, and why, as a reason a program can act on.
// The HTTP layer words it for its audience.
type FieldError struct {
	Field  string
	Reason FieldReason
	// Max is the field's limit: characters for a text field (a name, a ban reason), which carries
	// it whatever the reason; encoded bytes for a URL, which carries it with ReasonTooLong.
	Max int
}

// Error describes the rejected field.
func (e *FieldError) Error() string {
	if e.Reason == ReasonTooLong && e.Max > 0 {
		return fmt.Sprintf("auth: %s: %s (at most %d)", e.Field, e.Reason, e.Max)
	}
	return fmt.Sprintf("auth: %s: %s", e.Field, e.Reason)
}

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
	// ReasonUnknownLocale is a language the service does not speak.
	ReasonUnknownLocale FieldReason = "not a language of this service"
)

// notFoundAs is nil for nil, notFound when err says the row does not exist; any other failure (the database
// being unavailable, say) is wrapped with what was being done, so it is answered as what it is
// and never passed off as a refusal of the request.
func notFoundAs(err, notFound error, doing string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, models.ErrNotFound) {
		return notFound
	}
	return fmt.Errorf("auth: %s: %w", doing, err)
}
