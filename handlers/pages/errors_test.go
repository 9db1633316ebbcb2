package pages

import (
	"fmt"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/i18n"
)

// Each form words a refusal the way it did before the words moved into one table.
func TestExplain(t *testing.T) {
	limited := &auth.RateLimitError{RetryAfter: 42 * time.Second}
	cases := []struct {
		err     error
		counted string
		status  int
		message string
	}{
		{auth.ErrInvalidEmail, countedCodes, 422, "Enter a valid e-mail address, such as name@example.com."},
		{limited, countedCodes, 429, "Too many codes were asked for. Please try again in 42 seconds."},
		{limited, countedAttempts, 429, "Too many attempts. Please try again in 42 seconds."},
		{limited, countedLinks, 429, "Too many links were asked for. Please try again in 42 seconds."},
		{auth.ErrInvalidOTP, countedAttempts, 422, "That code is not right. Check the e-mail and try again."},
		{fmt.Errorf("%w: %w", auth.ErrSignInUnconfirmed, fmt.Errorf("connection reset")), countedAttempts, 503,
			"The service was briefly unavailable, so we could not confirm your sign-in. Send the code again and try again."},
		{auth.ErrTokenExpired, countedRequests, 410, "This link has expired. Ask for a new one from your account page."},
		{auth.ErrEmailTaken, countedRequests, 409, "That address now belongs to another account, so it cannot be used here."},
		{&auth.FieldError{Field: "name", Reason: auth.ReasonTooLong, Max: 100}, countedRequests, 422,
			"Use at most 100 characters, with no control or invisible characters."},
	}
	for _, c := range cases {
		got, known := explain(i18n.English(), c.err, c.counted)
		if !known || got.status != c.status || got.message != c.message {
			t.Errorf("explain(%v, %q) = %+v, %v; want %d %q", c.err, c.counted, got, known, c.status, c.message)
		}
	}
	if _, known := explain(i18n.English(), auth.ErrUserNotFound, countedRequests); known {
		t.Error("an error no form words was explained")
	}
}

func TestRetryText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		89 * time.Second:  "Please try again in 89 seconds.",
		90 * time.Second:  "Please try again in 2 minutes.",
		119 * time.Minute: "Please try again in 119 minutes.",
		3 * time.Hour:     "Please try again in 4 hours.",
	} {
		if got := retryText(i18n.English(), &auth.RateLimitError{RetryAfter: d}); got != want {
			t.Errorf("retryText(%v) = %q, want %q", d, got, want)
		}
	}
}
