package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

const (
	sendPath   = "/api/auth/email-otp/send-verification-otp"
	signInPath = "/api/auth/sign-in/email-otp"
)

func signIn(e *testkit.Env, email, otp string) *testkit.Response {
	return e.Post(signInPath, map[string]any{"email": email, "otp": otp})
}

// wrongCode returns a well-formed code different from code.
func wrongCode(code string, n int) string {
	for i := 0; ; i++ {
		c := fmt.Sprintf("%0*d", auth.OTPLength, (n*7919+i)%1000000)
		if c != code {
			return c
		}
	}
}

func TestSendCode_AnswersSuccessAndMailsACode(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r := e.Post(sendPath, map[string]any{"email": "alice@example.com", "type": "sign-in"})
		if r.Status != http.StatusOK || string(r.Body) != `{"success":true}` {
			t.Fatalf("got %d %s, want 200 {\"success\":true}", r.Status, r.Body)
		}
		// Catalogue A1: exactly OTP_LENGTH characters of the alphabet.
		code := e.Mailer.LastCode("alice@example.com")
		if len(code) != auth.OTPLength || strings.Trim(code, auth.OTPAlphabet) != "" {
			t.Fatalf("code %q is not %d characters of %q", code, auth.OTPLength, auth.OTPAlphabet)
		}
		// Catalogue A4, A10: the code is stored only as a keyed hash, and no account exists yet.
		var v models.Verification
		if err := e.DB.Take(&v).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(v.CodeHash, code) || v.Attempts != 0 || v.Email != "alice@example.com" {
			t.Fatalf("stored verification %+v holds the code or wrong fields", v)
		}
		if got := v.ExpiresAt.Sub(v.CreatedAt); got != auth.OTPLifetime {
			t.Fatalf("code lifetime = %v, want %v", got, auth.OTPLifetime)
		}
		if n := e.Count(&models.User{}); n != 0 {
			t.Fatalf("users after a send = %d, want 0 (catalogue A10)", n)
		}
		if strings.Contains(e.Logs.String(), code) {
			t.Fatal("the code appears in the service log (catalogue A4)")
		}
	})
}

// Catalogue M102: a send for a known and for an unknown address are answered identically.
func TestSendCode_SameAnswerForKnownAndUnknownAddress(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.SignIn("known@example.com")
		known := e.Post(sendPath, map[string]any{"email": "known@example.com", "type": "sign-in"})
		unknown := e.Post(sendPath, map[string]any{"email": "unknown@example.com", "type": "sign-in"})
		if known.Status != unknown.Status || string(known.Body) != string(unknown.Body) {
			t.Fatalf("known: %d %s; unknown: %d %s", known.Status, known.Body, unknown.Status, unknown.Body)
		}
		for _, h := range []http.Header{known.Header, unknown.Header} {
			h.Del("Date")
			h.Del("X-Request-Id")
		}
		if fmt.Sprint(known.Header) != fmt.Sprint(unknown.Header) {
			t.Fatalf("headers differ:\n%v\n%v", known.Header, unknown.Header)
		}
	})
}

func TestSendCode_OnlySignInType(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for _, typ := range []string{"change-email", "forget-password", "email-verification"} {
			e.Post(sendPath, map[string]any{"email": "a@example.com", "type": typ}).ExpectError(t, 400, "INVALID_OTP_TYPE")
		}
		r := e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "magic"})
		r.ExpectError(t, 400, "VALIDATION_ERROR")
		if !strings.Contains(string(r.Body), `[body.type] Invalid option`) {
			t.Fatalf("message %s does not name body.type", r.Body)
		}
		if n := len(e.Mailer.Messages()); n != 0 {
			t.Fatalf("%d e-mails sent for refused types", n)
		}
	})
}

func TestVerify_RightCodeSignsUpThenSignsIn(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("new@example.com")
		r := e.Post(signInPath, map[string]any{"email": "new@example.com", "otp": code, "name": "  Ada Lovelace "})
		if r.Status != 200 {
			t.Fatalf("sign-up: %d %s", r.Status, r.Body)
		}
		var body struct {
			Token string `json:"token"`
			User  struct {
				ID            string  `json:"id"`
				Email         string  `json:"email"`
				Name          string  `json:"name"`
				EmailVerified bool    `json:"emailVerified"`
				Image         *string `json:"image"`
				CreatedAt     string  `json:"createdAt"`
				UpdatedAt     string  `json:"updatedAt"`
			} `json:"user"`
		}
		r.Decode(t, &body)
		u := body.User
		if u.Email != "new@example.com" || u.Name != "Ada Lovelace" || !u.EmailVerified || u.Image != nil || len(u.ID) != 36 {
			t.Fatalf("user = %+v", u)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", u.CreatedAt); err != nil {
			t.Fatalf("createdAt %q is not an ISO 8601 UTC time: %v", u.CreatedAt, err)
		}
		if len(body.Token) != 43 {
			t.Fatalf("token %q is not 43 base64url characters (256 bits)", body.Token)
		}

		// The same address again signs in to the same account; the name is not changed.
		code = e.SendCode("new@example.com")
		r = e.Post(signInPath, map[string]any{"email": "new@example.com", "otp": code, "name": "Someone Else"})
		var again struct {
			User struct{ ID, Name string } `json:"user"`
		}
		r.Decode(t, &again)
		if again.User.ID != u.ID || again.User.Name != "Ada Lovelace" {
			t.Fatalf("second sign-in got user %+v, want the first account unchanged", again.User)
		}
		if n := e.Count(&models.User{}); n != 1 {
			t.Fatalf("users = %d, want 1", n)
		}
	})
}

func TestVerify_WrongCodeIsInvalidOTP(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		r := signIn(e, "alice@example.com", wrongCode(code, 1))
		r.ExpectError(t, 400, "INVALID_OTP")
		if r.RawSetCookie("auth.session_token") != "" || r.Header.Get("set-auth-token") != "" {
			t.Fatal("a failed verification set a session")
		}
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("sessions = %d after a wrong code", n)
		}
	})
}

// Catalogue B12: five wrong codes, then the right one is refused with 403 and the code is dead.
func TestVerify_FiveWrongThenRightIsTooManyAttempts(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		for i := 0; i < auth.OTPMaxAttempts; i++ {
			signIn(e, "alice@example.com", wrongCode(code, i)).ExpectError(t, 400, "INVALID_OTP")
		}
		signIn(e, "alice@example.com", code).ExpectError(t, 403, "TOO_MANY_ATTEMPTS")
		// Dead afterwards: better-auth answers INVALID_OTP from here on.
		signIn(e, "alice@example.com", code).ExpectError(t, 400, "INVALID_OTP")
		if n := e.Count(&models.Session{}); n != 0 {
			t.Fatalf("sessions = %d, want 0", n)
		}
		if n := e.Count(&models.User{}); n != 0 {
			t.Fatalf("users = %d, want 0", n)
		}
		// A new code gets a new budget.
		code = e.SendCode("alice@example.com")
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("fresh code after lockout: %d %s", r.Status, r.Body)
		}
	})
}

// Catalogue #105: guesses at an address that has no code, never had one or whose code was used,
// are answered as guesses at a live code are (five INVALID_OTP, then TOO_MANY_ATTEMPTS once,
// then INVALID_OTP), so the answers do not tell whether someone is signing in with it now. A code
// sent afterwards has its own five attempts.
func TestVerify_GuessesWithoutACodeAnswerAsALiveCodesDo(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		sequence := func(email, code string) string {
			var got []string
			for i := 0; i <= auth.OTPMaxAttempts+1; i++ {
				r := signIn(e, email, wrongCode(code, i))
				var body struct{ Code string }
				r.Decode(t, &body)
				got = append(got, fmt.Sprintf("%d %s", r.Status, body.Code))
			}
			return strings.Join(got, ", ")
		}
		live := sequence("pending@example.com", e.SendCode("pending@example.com"))
		if want := strings.Repeat("400 INVALID_OTP, ", auth.OTPMaxAttempts) + "403 TOO_MANY_ATTEMPTS, 400 INVALID_OTP"; live != want {
			t.Fatalf("a live code's guesses: %s", live)
		}
		if never := sequence("never@example.com", ""); never != live {
			t.Fatalf("an address that never had a code: %s\nwant, as a live code's: %s", never, live)
		}
		used := e.SendCode("used@example.com")
		if r := signIn(e, "used@example.com", used); r.Status != 200 {
			t.Fatalf("sign-in: %d", r.Status)
		}
		if after := sequence("used@example.com", used); after != live {
			t.Fatalf("after the code was used: %s", after)
		}
		code := e.SendCode("never@example.com")
		if r := signIn(e, "never@example.com", code); r.Status != 200 {
			t.Fatalf("a code sent after the guesses: %d %s", r.Status, r.Body)
		}
	})
}

// Catalogue B13: 50 parallel wrong guesses compare at most 5 times in total, and the right code
// is dead afterwards.
func TestVerify_ParallelGuessesNeverPassTheAttemptBudget(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("victim@example.com")
		before := e.Auth.Stats().CodeComparisons
		var wg sync.WaitGroup
		statuses := make([]int, 50)
		for i := range statuses {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				statuses[i] = signIn(e, "victim@example.com", wrongCode(code, i)).Status
			}(i)
		}
		wg.Wait()
		if got := e.Auth.Stats().CodeComparisons - before; got != auth.OTPMaxAttempts {
			t.Fatalf("comparisons = %d, want exactly %d", got, auth.OTPMaxAttempts)
		}
		forbidden := 0
		for i, s := range statuses {
			if s != 400 && s != 403 {
				t.Fatalf("guess %d got status %d", i, s)
			}
			if s == 403 {
				forbidden++
			}
		}
		if forbidden != 1 {
			t.Fatalf("%d answers were TOO_MANY_ATTEMPTS, want exactly 1: %v", forbidden, statuses)
		}
		var v models.Verification
		if err := e.DB.Where("subject = ?", "victim@example.com").Take(&v).Error; err == nil && v.Attempts > auth.OTPMaxAttempts {
			t.Fatalf("stored attempts = %d, more than %d", v.Attempts, auth.OTPMaxAttempts)
		}
		if r := signIn(e, "victim@example.com", code); r.Status == 200 {
			t.Fatal("the right code still worked after the budget was spent")
		}
	})
}

// Catalogue B15: ten parallel requests with the right code open exactly one session, in every
// round. (A request finding the budget spent once deleted the code under the feet of the
// request that had reserved a comparison in time, and then nobody signed in.)
func TestVerify_ParallelRightCodesOpenOneSession(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for round := 0; round < 5; round++ {
			parallelRightCodes(t, e, fmt.Sprintf("race%d@example.com", round))
		}
		if n := e.Count(&models.Session{}); n != 5 {
			t.Fatalf("sessions = %d, want 5", n)
		}
	})
}

func parallelRightCodes(t *testing.T, e *testkit.Env, email string) {
	t.Helper()
	{
		code := e.SendCode(email)
		var wg sync.WaitGroup
		statuses := make([]int, 10)
		for i := range statuses {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				statuses[i] = signIn(e, email, code).Status
			}(i)
		}
		wg.Wait()
		ok := 0
		for _, s := range statuses {
			switch s {
			case 200:
				ok++
			case 400, 403:
			default:
				t.Fatalf("status %d in %v", s, statuses)
			}
		}
		if ok != 1 {
			t.Fatalf("%d successes in %v, want exactly 1", ok, statuses)
		}
	}
}

// Catalogue A2: a code works until its 600th second and not at or after it.
func TestVerify_CodeExpiresAt600Seconds(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		e.Clock.Advance(auth.OTPLifetime - time.Second)
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("at 599 s: %d %s", r.Status, r.Body)
		}
		code = e.SendCode("alice@example.com")
		e.Clock.Advance(auth.OTPLifetime)
		signIn(e, "alice@example.com", code).ExpectError(t, 400, "OTP_EXPIRED")
		// The expired code is gone, not merely refused.
		signIn(e, "alice@example.com", code).ExpectError(t, 400, "INVALID_OTP")
	})
}

// Catalogue A3, with the resend that keeps the first code alive (issue 17): one code is live per
// address and purpose. A resend while it lives sends that same code again, with the attempts it
// has left and its first expiry, so a slow e-mail and an impatient resend do not kill the code on
// its way, and a resend never buys more guesses.
func TestVerify_ResendSendsTheLiveCodeAgain(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		first := e.SendCode("alice@example.com")
		signIn(e, "alice@example.com", wrongCode(first, 0)).ExpectError(t, 400, "INVALID_OTP")
		signIn(e, "alice@example.com", wrongCode(first, 1)).ExpectError(t, 400, "INVALID_OTP")
		e.Clock.Advance(9 * time.Minute)
		if again := e.SendCode("alice@example.com"); again != first {
			t.Fatalf("a resend within the code's life sent %q, want the live code %q", again, first)
		}
		if n := len(e.Mailer.Find(mail.KindSignInCode, "alice@example.com")); n != 2 {
			t.Fatalf("%d e-mails, want the code sent twice", n)
		}
		var v models.Verification
		if err := e.DB.Take(&v).Error; err != nil || v.Attempts != 2 || !v.ExpiresAt.Equal(testkit.Start.Add(auth.OTPLifetime)) {
			t.Fatalf("after the resend the code has %d attempts spent, expires %v (%v); want 2 and its first expiry", v.Attempts, v.ExpiresAt, err)
		}
		// Catalogue A4: the row keeps the code sealed, never in plain text.
		if strings.Contains(string(v.SealedCode), first) || strings.Contains(v.CodeHash, first) || len(v.SealedCode) == 0 {
			t.Fatalf("the stored code is readable: %q", v.SealedCode)
		}
		// The budget was not reset: three more wrong codes use it up.
		for i := 2; i < auth.OTPMaxAttempts; i++ {
			signIn(e, "alice@example.com", wrongCode(first, i)).ExpectError(t, 400, "INVALID_OTP")
		}
		signIn(e, "alice@example.com", first).ExpectError(t, 403, "TOO_MANY_ATTEMPTS")
	})
}

// The expiry is not extended by resends: the code sent at 0 s and again at 9 min dies at 10 min.
func TestVerify_ResendKeepsTheFirstExpiry(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		e.Clock.Advance(9 * time.Minute)
		e.SendCode("alice@example.com")
		e.Clock.Advance(time.Minute)
		signIn(e, "alice@example.com", code).ExpectError(t, 400, "OTP_EXPIRED")
	})
}

// A new code, with a fresh budget, is made once the live one is used, out of attempts or expired;
// the old code then no longer works (catalogue A3: only the latest code is live).
func TestVerify_NewCodeOnceTheLiveOneIsDone(t *testing.T) {
	// fresh sends again and checks that a new code (a new row, no attempts spent) was made, and
	// that the old code, unless the new one drew the same digits (one in a million), is dead.
	fresh := func(t *testing.T, e *testkit.Env, old string) string {
		t.Helper()
		var before []models.Verification
		e.DB.Find(&before)
		code := e.SendCode("alice@example.com")
		var v models.Verification
		if err := e.DB.Take(&v).Error; err != nil || v.Attempts != 0 || v.Exhausted || (len(before) == 1 && before[0].ID == v.ID) {
			t.Fatalf("no new code was made: the row has %d attempts spent, exhausted %v, the same row %v (%v)",
				v.Attempts, v.Exhausted, len(before) == 1 && before[0].ID == v.ID, err)
		}
		if code != old {
			signIn(e, "alice@example.com", old).ExpectError(t, 400, "INVALID_OTP")
		}
		return code
	}
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		t.Run("used", func(t *testing.T) {
			old := e.SendCode("alice@example.com")
			if r := signIn(e, "alice@example.com", old); r.Status != 200 {
				t.Fatalf("sign-in: %d %s", r.Status, r.Body)
			}
			code := fresh(t, e, old)
			if r := signIn(e, "alice@example.com", code); r.Status != 200 {
				t.Fatalf("the new code: %d %s", r.Status, r.Body)
			}
		})
		t.Run("out of attempts", func(t *testing.T) {
			old := e.SendCode("alice@example.com")
			for i := range auth.OTPMaxAttempts {
				signIn(e, "alice@example.com", wrongCode(old, i)).ExpectError(t, 400, "INVALID_OTP")
			}
			code := fresh(t, e, old)
			if r := signIn(e, "alice@example.com", code); r.Status != 200 {
				t.Fatalf("the new code: %d %s", r.Status, r.Body)
			}
		})
		t.Run("expired", func(t *testing.T) {
			e.Clock.Advance(time.Hour) // a fresh send window
			old := e.SendCode("alice@example.com")
			e.Clock.Advance(auth.OTPLifetime)
			code := fresh(t, e, old)
			if r := signIn(e, "alice@example.com", code); r.Status != 200 {
				t.Fatalf("the new code: %d %s", r.Status, r.Body)
			}
		})
	})
}

// Resends count against the address's sends like first sends (catalogue A5).
func TestSend_ResendsCountAgainstTheLimit(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for range auth.SendLimit {
			e.SendCode("alice@example.com")
		}
		r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "alice@example.com", "type": "sign-in"})
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("send %d: %d, want 429", auth.SendLimit+1, r.Status)
		}
		if n := len(e.Mailer.Find(mail.KindSignInCode, "alice@example.com")); n != auth.SendLimit {
			t.Fatalf("%d e-mails, want %d", n, auth.SendLimit)
		}
	})
}

// Catalogue B16: a used code cannot be replayed.
func TestVerify_UsedCodeFails(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("first use: %d", r.Status)
		}
		signIn(e, "alice@example.com", code).ExpectError(t, 400, "INVALID_OTP")
		if n := e.Count(&models.Session{}); n != 1 {
			t.Fatalf("sessions = %d, want 1", n)
		}
	})
}

// Catalogue B17: a code is bound to its address. Submitting a's code as b spends one of b's
// attempts and leaves a's code valid.
func TestVerify_CodeForAnotherEmailFails(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		codeA := e.SendCode("a@example.com")
		codeB := e.SendCode("b@example.com")
		if codeA == codeB {
			codeB = e.SendCode("b@example.com")
		}
		signIn(e, "b@example.com", codeA).ExpectError(t, 400, "INVALID_OTP")
		var v models.Verification
		e.DB.Where("subject = ?", "b@example.com").Take(&v)
		if v.Attempts != 1 {
			t.Fatalf("b's attempts = %d, want 1", v.Attempts)
		}
		if r := signIn(e, "a@example.com", codeA); r.Status != 200 {
			t.Fatalf("a's own code: %d %s", r.Status, r.Body)
		}
		// Without any code pending, a code is simply invalid.
		signIn(e, "c@example.com", codeA).ExpectError(t, 400, "INVALID_OTP")
	})
}

// Catalogue B22: malformed codes are refused before any lookup and spend no attempt.
func TestVerify_MalformedCodesSpendNoAttempt(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		code := e.SendCode("alice@example.com")
		for _, bad := range []string{"%", "______", "12345%", " " + code[1:], code + "\n", "１２３４５６", "+12345", "1e5", "0x1E240", code[:5], code + "0", ""} {
			signIn(e, "alice@example.com", bad).ExpectError(t, 400, "INVALID_OTP")
		}
		for _, bad := range []string{`123456`, `null`, `[]`, `{}`, `true`} {
			r := e.Do(testkit.Request{Method: "POST", Path: signInPath, ContentType: "application/json",
				Body: `{"email":"alice@example.com","otp":` + bad + `}`})
			r.ExpectError(t, 400, "VALIDATION_ERROR")
		}
		var v models.Verification
		e.DB.Take(&v)
		if v.Attempts != 0 {
			t.Fatalf("attempts = %d after malformed codes, want 0", v.Attempts)
		}
		if r := signIn(e, "alice@example.com", code); r.Status != 200 {
			t.Fatalf("right code after malformed ones: %d", r.Status)
		}
	})
}

// Catalogue A7, C27: one address, however it is cased or padded, is one identity.
func TestVerify_EmailCaseAndSpacesAreOneAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		first := e.SignIn("ALICE@Example.com ")
		code := e.SendCode("\talice@EXAMPLE.com")
		r := signIn(e, "alice@example.com", code)
		var body struct {
			User struct{ ID, Email string } `json:"user"`
		}
		r.Decode(t, &body)
		if body.User.ID != first.UserID || body.User.Email != "alice@example.com" {
			t.Fatalf("second sign-in user = %+v, want %s alice@example.com", body.User, first.UserID)
		}
		if n := e.Count(&models.User{}); n != 1 {
			t.Fatalf("users = %d, want 1", n)
		}
	})
}

// Catalogue P122: a whole flow leaves no code or token in the log.
func TestLogs_NeverHoldCodesOrTokens(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("alice@example.com")
		code := e.SendCode("alice@example.com")
		signIn(e, "alice@example.com", wrongCode(code, 3))
		e.Get("/api/auth/get-session", "Authorization", "Bearer "+s.Bearer)
		e.Post("/api/auth/sign-out", map[string]any{}, "Authorization", "Bearer "+s.Token)
		logs := e.Logs.String()
		for _, secret := range []string{code, s.Token, s.Bearer, s.DataCookie.Value} {
			if strings.Contains(logs, secret) {
				t.Fatalf("log holds a secret %q", secret)
			}
		}
		if !strings.Contains(logs, "path=/api/auth/sign-in/email-otp") {
			t.Fatal("the access log is missing")
		}
	})
}
