package handlers_test

import (
	"testing"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// Catalogue #20, #91: a change code is a guess at its new address like a sign-in code. An address
// locked by failed sign-in guesses gets no change code either, and no comparison is made for it:
// a signed-in attacker cannot keep guessing at an address that has no account yet, move their
// account onto it, and so be the account its owner lands in at their first sign-in
// (pre-hijacking). Once the lock passes, the owner's first sign-in makes an account of their own.
func TestEmailChange_LockedAddressGetsNoChangeCode(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const victim = "victim@example.com"
		e.SendCode(victim)
		failCode(t, e, victim, 0) // the cap is 1: the address is locked now

		attacker := e.SignIn("attacker@example.com")
		before := e.Auth.Stats().CodeComparisons
		expectTooMany(t, e.Post(requestChangePath, map[string]any{"newEmail": victim}, bearer(attacker)...), auth.FailureWindow)
		if n := e.Count(&models.Verification{}, "purpose = ?", auth.PurposeChangeEmail); n != 0 {
			t.Fatalf("%d change codes stored for a locked address", n)
		}
		for i := 0; i < 3; i++ {
			r := e.Post(changeWithCode, map[string]any{"newEmail": victim, "otp": wrongCode("", i)}, bearer(attacker)...)
			expectTooMany(t, r, auth.FailureWindow)
		}
		// The link flow of the web is closed to it too.
		expectTooMany(t, e.Post(changeByLinkPath, map[string]any{"newEmail": victim}, bearer(attacker)...), auth.FailureWindow)
		if got := e.Auth.Stats().CodeComparisons; got != before {
			t.Fatalf("%d comparisons made for a locked address", got-before)
		}
		if n := len(e.Mailer.Find(mail.KindChangeEmailCode, victim)) + len(e.Mailer.Find(mail.KindChangeEmailLink, victim)); n != 0 {
			t.Fatalf("%d change e-mails sent to a locked address", n)
		}

		e.Clock.Advance(auth.FailureWindow)
		owner := e.SignIn(victim)
		if owner.UserID == attacker.UserID {
			t.Fatal("the owner signed in to the attacker's account")
		}
		if u := userOf(t, e, attacker.UserID); u.Email != "attacker@example.com" {
			t.Fatalf("the attacker's account moved to %s", u.Email)
		}
	}, testkit.WithMaxFailedVerifications(1))
}

// Catalogue #20, #21, #91: wrong change codes count against the new address's cap of failed
// change verifications, across codes, and past it the address gets no change code and no
// comparison; but they never lock the address's owner out of signing in (anyone with an account
// could, silently, every day: a change code to another account's address is withheld). A
// successful change proves the address and starts its counts again, as a sign-in does.
func TestEmailChange_WrongCodesCountAgainstTheAddress(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const cap = 3
		attacker := e.SignIn("attacker@example.com")
		const victim = "victim@example.com"
		if r := e.Post(requestChangePath, map[string]any{"newEmail": victim}, bearer(attacker)...); r.Status != 200 {
			t.Fatalf("request: %d %s", r.Status, r.Body)
		}
		code := e.Mailer.Last(mail.KindChangeEmailCode, victim).Code
		for i := 0; i < cap; i++ {
			e.Post(changeWithCode, map[string]any{"newEmail": victim, "otp": wrongCode(code, i)}, bearer(attacker)...).
				ExpectError(t, 400, "INVALID_OTP")
		}
		// The code still has attempts left, but the address has none for changes: the right code
		// is refused without a comparison, and so is a new change code, from any account.
		another := e.SignIn("another@example.com")
		before := e.Auth.Stats().CodeComparisons
		expectTooMany(t, e.Post(changeWithCode, map[string]any{"newEmail": victim, "otp": code}, bearer(attacker)...), auth.FailureWindow)
		expectTooMany(t, e.Post(requestChangePath, map[string]any{"newEmail": victim}, bearer(another)...), auth.FailureWindow)
		if e.Auth.Stats().CodeComparisons != before {
			t.Fatal("a locked address still had a code compared")
		}
		if u := userOf(t, e, attacker.UserID); u.Email != "attacker@example.com" {
			t.Fatalf("the account moved to %s", u.Email)
		}
		// Its owner signs in as ever: the change's guesses and sends are not the sign-in's.
		if owner := e.SignIn(victim); owner.UserID == attacker.UserID {
			t.Fatal("the owner signed in to the attacker's account")
		}

		// Another address: two wrong codes, then the right one. Its count starts again, so three
		// wrong sign-in guesses later it is still not locked.
		const next = "next@example.com"
		e.Post(requestChangePath, map[string]any{"newEmail": next}, bearer(attacker)...)
		code = e.Mailer.Last(mail.KindChangeEmailCode, next).Code
		for i := 0; i < cap-1; i++ {
			e.Post(changeWithCode, map[string]any{"newEmail": next, "otp": wrongCode(code, i)}, bearer(attacker)...).
				ExpectError(t, 400, "INVALID_OTP")
		}
		if r := e.Post(changeWithCode, map[string]any{"newEmail": next, "otp": code}, bearer(attacker)...); r.Status != 200 {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		e.SendCode(next)
		for i := 0; i < cap; i++ {
			failCode(t, e, next, i)
		}
	}, testkit.WithMaxFailedVerifications(3))
}

// Catalogue #20, #21: the attack the separate counters stop. An attacker with an account asks
// for change codes to a victim's address (another account's, so nothing reaches the victim) and
// guesses until the change to it is locked: the victim still gets a sign-in code at once and
// signs in.
func TestEmailChange_CannotLockAnotherAccountOutOfSigningIn(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const victim = "victim@example.com"
		e.SignIn(victim)
		attacker := e.SignIn("attacker@example.com")
		for round := 0; ; round++ {
			r := e.Post(requestChangePath, map[string]any{"newEmail": victim}, bearer(attacker)...)
			if r.Status == 429 {
				expectTooMany(t, r, auth.FailureWindow)
				break
			}
			if r.Status != 200 || round == auth.SendLimit {
				t.Fatalf("change request %d: %d %s", round, r.Status, r.Body)
			}
			for i := 0; i < auth.OTPMaxAttempts; i++ {
				r := e.Post(changeWithCode, map[string]any{"newEmail": victim, "otp": wrongCode("", round*10+i)}, bearer(attacker)...)
				if r.Status != 400 && r.Status != 403 && r.Status != 429 {
					t.Fatalf("guess: %d %s", r.Status, r.Body)
				}
			}
		}
		if n := len(e.Mailer.Find(mail.KindChangeEmailCode, victim)); n != 0 {
			t.Fatalf("%d change codes reached the victim", n)
		}
		if r := e.Post(sendPath, map[string]any{"email": victim, "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("the victim's sign-in code after the attack: %d %s", r.Status, r.Body)
		}
		code := e.Mailer.Last(mail.KindSignInCode, victim).Code
		if r := signIn(e, victim, code); r.Status != 200 {
			t.Fatalf("the victim's sign-in after the attack: %d %s", r.Status, r.Body)
		}
	}, testkit.WithMaxFailedVerifications(5))
}

// Catalogue #20, #21: a guess naming an address is counted against that address only when it
// meets a code sent to it. A change code sent to the attacker's own address cannot be guessed in
// another address's name to lock that address out without ever sending it anything; nor are the
// code's own attempts spent by it. They are answered as guesses at a code that is not there are
// (catalogue #105): five INVALID_OTP, TOO_MANY_ATTEMPTS once, INVALID_OTP.
func TestEmailChange_GuessesNamingAnotherAddressCountForNothing(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		attacker := e.SignIn("attacker@example.com")
		e.Post(requestChangePath, map[string]any{"newEmail": "mine@example.com"}, bearer(attacker)...)
		code := e.Mailer.Last(mail.KindChangeEmailCode, "mine@example.com").Code
		before := e.Auth.Stats().CodeComparisons
		for i := 0; i < 10; i++ {
			status, want := 400, "INVALID_OTP"
			if i == auth.OTPMaxAttempts {
				status, want = 403, "TOO_MANY_ATTEMPTS"
			}
			e.Post(changeWithCode, map[string]any{"newEmail": "victim@example.com", "otp": wrongCode(code, i)}, bearer(attacker)...).
				ExpectError(t, status, want)
		}
		if e.Auth.Stats().CodeComparisons != before {
			t.Fatal("guesses naming another address were compared")
		}
		// The victim is not locked, and the attacker's own code kept its attempts.
		e.SignIn("victim@example.com")
		if r := e.Post(changeWithCode, map[string]any{"newEmail": "mine@example.com", "otp": code}, bearer(attacker)...); r.Status != 200 {
			t.Fatalf("the attacker's own code after the guesses: %d %s", r.Status, r.Body)
		}
	}, testkit.WithMaxFailedVerifications(3))
}

// Catalogue #88, #106: a change to an address another account holds does what a change to a free
// address does, but for the e-mail: the code is stored (so it replaces the account's earlier change
// code, as a code for a free address would) and the e-mail is written and withheld. Nothing reaches
// the other account's owner, and the final step fails like a wrong code.
func TestEmailChange_TakenAddressDoesTheSameWork(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		app := e.SignIn("alice@example.com")
		e.SignIn("bob@example.com")
		e.Post(requestChangePath, map[string]any{"newEmail": "carol@example.com"}, bearer(app)...)
		first := e.Mailer.Last(mail.KindChangeEmailCode, "carol@example.com").Code
		if r := e.Post(requestChangePath, map[string]any{"newEmail": "bob@example.com"}, bearer(app)...); r.Status != 200 || string(r.Body) != `{"success":true}` {
			t.Fatalf("request for a taken address: %d %s", r.Status, r.Body)
		}
		if n := e.Count(&models.Verification{}, "purpose = ? AND email = ?", auth.PurposeChangeEmail, "bob@example.com"); n != 1 {
			t.Fatalf("%d change codes stored for the taken address, want 1", n)
		}
		// The withheld e-mail went through the worker and out of the queue, to no one.
		e.Mailer.Flush()
		if n := len(e.Mailer.Find(mail.KindChangeEmailCode, "bob@example.com")); n != 0 {
			t.Fatalf("%d change codes mailed to another account's address", n)
		}
		if n := e.Count(&models.OutboxMessage{}, "status = ?", "pending"); n != 0 {
			t.Fatalf("%d e-mails still pending", n)
		}
		e.Post(changeWithCode, map[string]any{"newEmail": "carol@example.com", "otp": first}, bearer(app)...).ExpectError(t, 400, "INVALID_OTP")

		// The web flow alike: the link row is stored, the e-mail withheld.
		if r := e.Post(changeByLinkPath, map[string]any{"newEmail": "bob@example.com"}, bearer(app)...); r.Status != 200 {
			t.Fatalf("link request for a taken address: %d %s", r.Status, r.Body)
		}
		if n := e.Count(&models.Verification{}, "email = ? AND purpose <> ?", "bob@example.com", auth.PurposeChangeEmail); n != 1 {
			t.Fatalf("%d change links stored for the taken address, want 1", n)
		}
		if n := len(e.Mailer.Find(mail.KindChangeEmailLink, "bob@example.com")); n != 0 {
			t.Fatalf("%d change links mailed to another account's address", n)
		}
		if u := userOf(t, e, app.UserID); u.Email != "alice@example.com" {
			t.Fatalf("the address changed to %s", u.Email)
		}
	})
}
