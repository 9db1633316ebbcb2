package betterauth

import (
	"github.com/gofiber/fiber/v2"
)

// request is the input of one route. decode reads its fields from the body: problems with a
// field are recorded on the body and reported together; a refusal that comes before any field
// check is returned.
type request interface {
	decode(b *jsonBody) error
}

// otpTypes are the code types better-auth clients know. Only sign-in is used by this service:
// every account is verified when it is created, passwords are off, and e-mail change has its own
// routes, so the others are refused with INVALID_OTP_TYPE.
var otpTypes = []string{"email-verification", "sign-in", "forget-password", "change-email"}

// sendOTPRequest is the body of POST /email-otp/send-verification-otp.
type sendOTPRequest struct {
	Email string
	Type  string
}

func (r *sendOTPRequest) decode(b *jsonBody) error {
	r.Email = b.str("email", true)
	r.Type = b.enum("type", otpTypes...)
	return nil
}

// signInRequest is the body of POST /sign-in/email-otp; Name names a new account.
type signInRequest struct {
	Email string
	OTP   string
	Name  string
}

func (r *signInRequest) decode(b *jsonBody) error {
	r.Email = b.str("email", true)
	r.OTP = b.str("otp", true)
	r.Name = b.str("name", false)
	return nil
}

// updateUserRequest is the body of POST /update-user: nil fields stay as they are, and an image
// set to null is removed (SetImage with a nil Image). An e-mail is refused before anything else
// is looked at: it cannot change here.
type updateUserRequest struct {
	Name     *string
	Image    *string
	SetImage bool
}

func (r *updateUserRequest) decode(b *jsonBody) error {
	// better-auth refuses an address only when one is given: null, "" (or another falsy value)
	// is no address and changes nothing.
	if b.truthy("email") {
		return errEmailCannotBeUpdated
	}
	r.Name = b.optStr("name")
	r.Image, r.SetImage = b.nullableStr("image")
	return nil
}

// requestEmailChangeRequest is the body of POST /email-otp/request-email-change.
type requestEmailChangeRequest struct {
	NewEmail string
}

func (r *requestEmailChangeRequest) decode(b *jsonBody) error {
	r.NewEmail = b.str("newEmail", true)
	return nil
}

// changeEmailCodeRequest is the body of POST /email-otp/change-email.
type changeEmailCodeRequest struct {
	NewEmail string
	OTP      string
}

func (r *changeEmailCodeRequest) decode(b *jsonBody) error {
	r.NewEmail = b.str("newEmail", true)
	r.OTP = b.str("otp", true)
	return nil
}

// changeEmailLinkRequest is the body of POST /change-email; CallbackURL was checked with the
// other redirect targets (bodyReader.read).
type changeEmailLinkRequest struct {
	NewEmail    string
	CallbackURL string
}

func (r *changeEmailLinkRequest) decode(b *jsonBody) error {
	r.NewEmail = b.str("newEmail", true)
	r.CallbackURL = b.str("callbackURL", false)
	return nil
}

// emptyRequest is the body of the routes that take no fields (sign-out, marketing-consent,
// account/delete). It is read all the same: a body must still be a JSON object, and the redirect
// targets in it are still checked.
type emptyRequest struct{}

func (emptyRequest) decode(*jsonBody) error { return nil }

// revokeSessionRequest is the body of POST /revoke-session: Token is a session's handle as
// list-sessions gives it (or the raw token of one of the caller's sessions).
type revokeSessionRequest struct {
	Token string
}

func (r *revokeSessionRequest) decode(b *jsonBody) error {
	r.Token = b.str("token", true)
	return nil
}

// deleteUserRequest is the body of POST /delete-user. better-auth's optional fields are
// accepted and do nothing here: there is no password to check, and the deletion needs no e-mailed
// confirmation because it can be undone by signing in during its grace period. callbackURL is
// still checked as every redirect target is.
type deleteUserRequest struct{}

func (r *deleteUserRequest) decode(b *jsonBody) error {
	b.optStr("callbackURL")
	b.optStr("password")
	b.optStr("token")
	return nil
}

// getSessionQuery is the query of GET /get-session. As in better-auth, any non-empty value means
// true (even "false").
type getSessionQuery struct {
	DisableCookieCache bool
	DisableRefresh     bool
}

func readGetSessionQuery(c *fiber.Ctx) getSessionQuery {
	return getSessionQuery{DisableCookieCache: c.Query("disableCookieCache") != "", DisableRefresh: c.Query("disableRefresh") != ""}
}

// verifyEmailQuery is the query of GET /verify-email; CallbackURL was checked by the origin
// middleware.
type verifyEmailQuery struct {
	Token       string
	CallbackURL string
}

func readVerifyEmailQuery(c *fiber.Ctx) verifyEmailQuery {
	return verifyEmailQuery{Token: c.Query("token"), CallbackURL: c.Query("callbackURL")}
}
