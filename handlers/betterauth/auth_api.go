package betterauth

import (
	"net/url"
	"strings"
	"sync"

	"codeauth/auth"
	"codeauth/handlers/betterauth/credential"
	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// The routes of better-auth's email-OTP API, under /api/auth.

// sendVerificationOTP is POST /email-otp/send-verification-otp {email, type}. It answers
// {"success":true} for every valid address, whether or not it has an account.
func (h *API) sendVerificationOTP(c *fiber.Ctx) error {
	var req sendOTPRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	if req.Type != auth.PurposeSignIn {
		return errInvalidOTPType
	}
	// An app's request carries no browser mark, and the API sets none (better-auth's answer has
	// no such cookie): the sign-in link then asks before it signs in. A browser that asked on
	// the sign-in page before keeps its mark.
	browser, _ := h.sessions.BrowserBinding(c, false)
	if err := h.auth.SendSignInCode(c.UserContext(), req.Email, h.locales.Of(c).Code(), browser); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// signInEmailOTP is POST /sign-in/email-otp {email, otp, name?}: it verifies the code, creates
// the account for an unknown address, and opens a session (cookie, set-auth-token and the raw
// token in the body).
func (h *API) signInEmailOTP(c *fiber.Ctx) error {
	var req signInRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	res, err := h.auth.SignIn(c.UserContext(), auth.SignInInput{
		Email: req.Email, Code: req.OTP, Name: req.Name, Locale: h.locales.Of(c).Code(),
		Client: auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)},
	})
	if err != nil {
		return err
	}
	h.sessions.Issue(c, &res.SessionState, true)
	return c.JSON(signInResponse{Token: res.Token, User: toUserJSON(res.User)})
}

// getSession is GET /get-session: the caller's session and user, or the JSON null.
func (h *API) getSession(c *fiber.Ctx) error {
	q := readGetSessionQuery(c)
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: q.DisableCookieCache, NoRefresh: q.DisableRefresh})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderPragma, "no-cache")
	if st == nil {
		c.Type("json")
		return c.SendString("null")
	}
	// better-auth's jwt plugin adds a JWT of the session to every answer that has one. A JWT
	// that cannot be made (the database away when the keys are due for a read) costs the header,
	// not the session: auth has logged why.
	if jwt, err := h.auth.SessionJWT(c.UserContext(), st); err == nil {
		c.Set(credential.SetAuthJWTHeader, jwt)
		middleware.ExposeHeader(c, credential.SetAuthJWTHeader)
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
func (h *API) signOut(c *fiber.Ctx) error {
	if err := h.body.read(c, emptyRequest{}); err != nil {
		return err
	}
	if err := h.sessions.SignOut(c); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// updateUser is POST /update-user {name?, image?}. The e-mail cannot change here.
func (h *API) updateUser(c *fiber.Ctx) error {
	var req updateUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	if req.Name == nil && !req.SetImage {
		return errNoFieldsToUpdate
	}
	st := middleware.Current(c)
	user, err := h.auth.UpdateUser(c.UserContext(), st.User.ID, auth.UserUpdate{Name: req.Name, Image: req.Image, SetImage: req.SetImage})
	if err != nil {
		return err
	}
	updated := *st
	updated.User = user
	h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	return c.JSON(statusResponse{Status: true})
}

// ok is GET /ok, better-auth's liveness probe.
func (h *API) ok(c *fiber.Ctx) error {
	return c.JSON(okResponse{OK: true})
}

// requestEmailChange is POST /email-otp/request-email-change {newEmail}: a code goes to the new
// address (the app flow). An address that belongs to another account gets nothing, and the same
// answer.
func (h *API) requestEmailChange(c *fiber.Ctx) error {
	var req requestEmailChangeRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	if err := h.auth.RequestEmailChangeCode(c.UserContext(), middleware.Current(c), req.NewEmail); err != nil {
		return err
	}
	return c.JSON(successResponse{Success: true})
}

// changeEmailWithCode is POST /email-otp/change-email {newEmail, otp}: the code makes the new
// address the account's. Other sessions end; this one stays and its cookie and set-auth-token are
// sent again.
func (h *API) changeEmailWithCode(c *fiber.Ctx) error {
	var req changeEmailCodeRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	st := middleware.Current(c)
	user, err := h.auth.ChangeEmailWithCode(c.UserContext(), st, req.NewEmail, req.OTP)
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
func (h *API) changeEmail(c *fiber.Ctx) error {
	var req changeEmailLinkRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	if err := h.auth.RequestEmailChangeLink(c.UserContext(), middleware.Current(c), req.NewEmail, req.CallbackURL); err != nil {
		return err
	}
	return c.JSON(statusResponse{Status: true})
}

// verifyEmail is GET /verify-email?token=…&callbackURL=…, for API users who handle the link
// themselves (the e-mail's link opens the confirmation page, which changes nothing on GET). It
// applies the change; with a callbackURL it redirects there (adding ?error=CODE on failure),
// otherwise it answers {"status":true,"user":…} or 401.
func (h *API) verifyEmail(c *fiber.Ctx) error {
	q := readVerifyEmailQuery(c)
	st, err := h.sessions.Resolve(c, middleware.Options{FromDatabase: true})
	if err != nil {
		return err
	}
	user, err := h.auth.ConfirmEmailChange(c.UserContext(), q.Token, st)
	if err != nil {
		answer, known := Answer(err)
		if q.CallbackURL == "" || !known {
			return err
		}
		return c.Redirect(withQuery(q.CallbackURL, "error", answer.Code), fiber.StatusFound)
	}
	if st != nil {
		updated := *st
		updated.User = user
		h.sessions.Issue(c, &updated, h.sessions.CookieSent(c))
	}
	if q.CallbackURL != "" {
		return c.Redirect(q.CallbackURL, fiber.StatusFound)
	}
	return c.JSON(verifyEmailResponse{Status: true, User: toUserJSON(user)})
}

// withQuery adds one query parameter to a (checked) redirect target.
func withQuery(target, key, value string) string {
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	return target + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}
