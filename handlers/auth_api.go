package handlers

import (
	"net/url"
	"strings"
	"sync"

	"codeauth/auth"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// authAPI serves /api/auth, the better-auth-compatible JSON API.
type authAPI struct {
	auth     *auth.Service
	sessions *middleware.Sessions
	body     bodyReader
}

// otpTypes are the code types better-auth clients know. Only sign-in is used by this service:
// every account is verified when it is created, passwords are off, and e-mail change has its own
// routes, so the others are refused with INVALID_OTP_TYPE.
var otpTypes = []string{"email-verification", "sign-in", "forget-password", "change-email"}

// sendVerificationOTP is POST /email-otp/send-verification-otp {email, type}. It answers
// {"success":true} for every valid address, whether or not it has an account.
func (h *authAPI) sendVerificationOTP(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	email := b.str("email", true)
	typ := b.enum("type", otpTypes...)
	if err := b.err(); err != nil {
		return err
	}
	if typ != auth.PurposeSignIn {
		return errInvalidOTPType
	}
	if err := h.auth.SendSignInCode(c.UserContext(), email); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// signInEmailOTP is POST /sign-in/email-otp {email, otp, name?}: it verifies the code, creates
// the account for an unknown address, and opens a session (cookie, set-auth-token and the raw
// token in the body).
func (h *authAPI) signInEmailOTP(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	email := b.str("email", true)
	otp := b.str("otp", true)
	name := b.str("name", false)
	if err := b.err(); err != nil {
		return err
	}
	res, err := h.auth.SignIn(c.UserContext(), auth.SignInInput{
		Email: email, Code: otp, Name: name,
		Client: auth.ClientMeta{IPAddress: middleware.ClientIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)},
	})
	if err != nil {
		return err
	}
	h.sessions.Issue(c, &res.SessionState, true)
	return c.JSON(signInResponse{Token: res.Token, User: toUserJSON(res.User)})
}

// getSession is GET /get-session: the caller's session and user, or the JSON null. The query
// flags follow better-auth, where any non-empty value means true (even "false").
func (h *authAPI) getSession(c *fiber.Ctx) error {
	st, err := h.sessions.Resolve(c, middleware.Options{
		FromDatabase: c.Query("disableCookieCache") != "",
		NoRefresh:    c.Query("disableRefresh") != "",
	})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderPragma, "no-cache")
	if st == nil {
		c.Type("json")
		return c.SendString("null")
	}
	r := sessionResponse{Session: toSessionJSON(st), User: toUserJSON(st.User)}
	buf := jsonBuffers.Get().(*[]byte)
	*buf = r.appendJSON((*buf)[:0])
	c.Type("json")
	c.Response().SetBody(*buf) // SetBody copies (c.Send would keep the pooled slice).
	jsonBuffers.Put(buf)
	return nil
}

// jsonBuffers are reused for the hand-written session answers.
var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// signOut is POST /sign-out: it deletes the session presented, by bearer token and by cookie
// (both, should they name different sessions), and expires the cookies. It always succeeds.
func (h *authAPI) signOut(c *fiber.Ctx) error {
	if _, err := h.body.read(c); err != nil {
		return err
	}
	if err := h.sessions.SignOut(c); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// updateUser is POST /update-user {name?, image?}. The e-mail cannot change here.
func (h *authAPI) updateUser(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	if b.has("email") {
		return errEmailCannotBeUpdated
	}
	var u auth.UserUpdate
	u.Name = b.optStr("name")
	u.Image, u.SetImage = b.nullableStr("image")
	if err := b.err(); err != nil {
		return err
	}
	if u.Name == nil && !u.SetImage {
		return errNoFieldsToUpdate
	}
	st := middleware.Current(c)
	user, err := h.auth.UpdateUser(c.UserContext(), st.User.ID, u)
	if err != nil {
		return err
	}
	updated := *st
	updated.User = user
	h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	return c.JSON(statusResponse{Status: true})
}

// ok is GET /ok, better-auth's liveness probe.
func (h *authAPI) ok(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"ok": true})
}

// requestEmailChange is POST /email-otp/request-email-change {newEmail}: a code goes to the new
// address (the app flow). An address that belongs to another account gets nothing, and the same
// answer.
func (h *authAPI) requestEmailChange(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	newEmail := b.str("newEmail", true)
	if err := b.err(); err != nil {
		return err
	}
	if err := h.auth.RequestEmailChangeCode(c.UserContext(), middleware.Current(c), newEmail); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// changeEmailWithCode is POST /email-otp/change-email {newEmail, otp}: the code makes the new
// address the account's. Other sessions end; this one stays and its cookie and set-auth-token are
// sent again.
func (h *authAPI) changeEmailWithCode(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	newEmail := b.str("newEmail", true)
	otp := b.str("otp", true)
	if err := b.err(); err != nil {
		return err
	}
	st := middleware.Current(c)
	user, err := h.auth.ChangeEmailWithCode(c.UserContext(), st, newEmail, otp)
	if err != nil {
		return err
	}
	updated := *st
	updated.User = user
	h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	return c.JSON(successResponse{Success: true})
}

// changeEmail is POST /change-email {newEmail, callbackURL?}: a confirmation link goes to the new
// address (the web flow). callbackURL was checked by the origin middleware.
func (h *authAPI) changeEmail(c *fiber.Ctx) error {
	b, err := h.body.read(c)
	if err != nil {
		return err
	}
	newEmail := b.str("newEmail", true)
	callback := b.str("callbackURL", false)
	if err := b.err(); err != nil {
		return err
	}
	if err := h.auth.RequestEmailChangeLink(c.UserContext(), middleware.Current(c), newEmail, callback); err != nil {
		return err
	}
	return c.JSON(statusResponse{Status: true})
}

// verifyEmail is GET /verify-email?token=…&callbackURL=…, for API users who handle the link
// themselves (the e-mail's link opens the confirmation page, which changes nothing on GET). It
// applies the change; with a callbackURL it redirects there (adding ?error=CODE on failure),
// otherwise it answers {"status":true,"user":…} or 401.
func (h *authAPI) verifyEmail(c *fiber.Ctx) error {
	callback := c.Query("callbackURL")
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true})
	if err != nil {
		return err
	}
	user, err := h.auth.ConfirmEmailChange(c.UserContext(), c.Query("token"), st)
	if err != nil {
		answer, known := toAPIError(err)
		if callback == "" || !known {
			return err
		}
		return c.Redirect(withQuery(callback, "error", answer.Code), fiber.StatusFound)
	}
	if st != nil {
		updated := *st
		updated.User = user
		h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	}
	if callback != "" {
		return c.Redirect(callback, fiber.StatusFound)
	}
	return c.JSON(fiber.Map{"status": true, "user": toUserJSON(user)})
}

// withQuery adds one query parameter to a (checked) redirect target.
func withQuery(target, key, value string) string {
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	return target + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}
