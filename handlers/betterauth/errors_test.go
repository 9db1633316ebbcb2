package betterauth

import (
	"testing"

	"codeauth/auth"
	"codeauth/middleware"
)

// auth's field refusals are answered with the messages better-auth's validator writes, as they
// were when auth wrote them itself.
func TestAnswer_FieldErrors(t *testing.T) {
	cases := map[string]error{
		"[body.name] Invalid input: not valid UTF-8":                                  &auth.FieldError{Field: "name", Reason: auth.ReasonInvalidUTF8},
		"[body.name] Too big: expected string to have <=100 characters":               &auth.FieldError{Field: "name", Reason: auth.ReasonTooLong, Max: 100},
		"[body.name] Invalid input: control and invisible characters are not allowed": &auth.FieldError{Field: "name", Reason: auth.ReasonInvisible},
		"[body.name] Invalid input: expected at least one visible character":          &auth.FieldError{Field: "name", Reason: auth.ReasonNoVisible},
		"[body.image] Invalid input: expected an absolute http(s) URL":                &auth.FieldError{Field: "image", Reason: auth.ReasonNotHTTPURL},
		"[body.image] Too big: expected a URL of at most 2048 characters":             &auth.FieldError{Field: "image", Reason: auth.ReasonTooLong, Max: 2048},
	}
	for want, err := range cases {
		got, known := Answer(err)
		if !known || got.Status != 400 || got.Code != "VALIDATION_ERROR" || got.Message != want {
			t.Errorf("Answer(%v) = %+v, %v; want 400 VALIDATION_ERROR %q", err, got, known, want)
		}
	}
}

// The middleware's refusals get better-auth's statuses and codes.
func TestAnswer_OriginErrors(t *testing.T) {
	type answer struct {
		status int
		code   string
	}
	for err, want := range map[error]answer{
		middleware.ErrMissingOrigin:        {403, "MISSING_OR_NULL_ORIGIN"},
		middleware.ErrInvalidOrigin:        {403, "INVALID_ORIGIN"},
		middleware.ErrCrossSiteNavigation:  {403, "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED"},
		middleware.ErrInvalidCallbackURL:   {403, "INVALID_CALLBACK_URL"},
		middleware.ErrInvalidRedirectURL:   {403, "INVALID_REDIRECT_URL"},
		middleware.ErrInvalidErrorCallback: {403, "INVALID_ERROR_CALLBACK_URL"},
		middleware.ErrInvalidNewUserURL:    {403, "INVALID_NEW_USER_CALLBACK_URL"},
		middleware.ErrRedirectNotString:    {400, "VALIDATION_ERROR"},
	} {
		if got, known := Answer(err); !known || got.Status != want.status || got.Code != want.code {
			t.Errorf("Answer(%v) = %+v, %v; want %d %s", err, got, known, want.status, want.code)
		}
	}
}
