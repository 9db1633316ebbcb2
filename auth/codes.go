package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codeauth/mail"
	"codeauth/models"
)

// codeStore is the storage of codes and their sends: models.Store implements it.
type codeStore interface {
	IssueCode(ctx context.Context, in models.SendCode) (models.Issued, error)
	ReplaceCode(ctx context.Context, v models.Verification, mail models.OutboxMessage) error
	SpendAttempt(ctx context.Context, a models.Attempt) (*models.SpentAttempt, error)
	QueueMail(ctx context.Context, m models.OutboxMessage) error
	Code(ctx context.Context, purpose, subject, email string) (models.Verification, error)
	DeleteCode(ctx context.Context, id string) error
	MarkCodeExhausted(ctx context.Context, id string) (bool, error)
}

// SendSignInCode issues a sign-in code for the address and e-mails it, in the language of the
// address's account, or for an address without one in locale (the request's). It answers the same
// way whether or not an account exists: the account is only created when the code is verified.
//
// A resend while the address's code is alive (not used, expired or out of attempts) sends that
// same code again, with the attempts it has left and its first expiry (better-auth's
// resendStrategy "reuse"): a slow e-mail and an impatient "Send a new code" no longer kill the
// code on its way, and a resend never buys more guesses. A new code, with a fresh attempt budget,
// is made once the old one is used, exhausted or expired. For that the code is kept sealed in its
// row (models.Verification.SealedCode) beside its hash; the new code of this call is made and
// sealed either way, so a resend does the work of a first send.
//
// An address gets SendLimit codes per SendWindow (resends included), counted in the database
// across instances, and none while it is locked by failed verifications; both refusals are
// RateLimitErrors.
//
// With sign-in links (AUTH_SIGNIN_LINK) the e-mail also carries a link that signs in with the
// code (signinlink.go), bound to browser, the value the asking browser keeps in a cookie ("" for
// none: an app, or a browser without the sign-in page's cookie).
func (s *Service) SendSignInCode(ctx context.Context, rawEmail, locale, browser string) error {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return err
	}
	code, v, err := s.newCode(PurposeSignIn, email, email)
	if err != nil {
		return err
	}
	if v.SealedCode, err = s.keys.sealCode(v.ID, code); err != nil {
		return err
	}
	withhold, err := s.withholdCode(ctx, email)
	if err != nil {
		return err
	}
	// The outbox delivers the e-mail after the commit, so the answer never waits on (or reveals
	// anything through) the provider. An e-mail withheld (sign-up gating) is stored and handled as
	// any other, and never handed to the provider. It is written in the language of the account
	// that has the address, which the store reads in the send's transaction, else in the
	// request's (locale), and says how long the code has left.
	codeMail := func(code, codeID string, expires time.Time, accountLocale string) (models.OutboxMessage, error) {
		c, now := s.compose.In(pickLocale(accountLocale, locale)), s.now()
		var d mail.Draft
		var err error
		if s.signInLinks {
			link, lerr := s.signInLink(ctx, email, code, codeID, browser, now, expires)
			if lerr != nil {
				return models.OutboxMessage{}, lerr
			}
			d, err = c.SignInCodeWithLink(email, code, link, expires.Sub(now))
		} else {
			d, err = c.SignInCode(email, code, expires.Sub(now))
		}
		return s.prepare(d, err, mail.EnqueueOptions{ExpiresAt: &expires, Supersede: "sign-in-code:" + email, Withhold: withhold})
	}
	m := func(accountLocale string) (models.OutboxMessage, error) {
		return codeMail(code, v.ID, v.ExpiresAt, accountLocale)
	}
	resend := func(live models.Verification, accountLocale string) (models.OutboxMessage, error) {
		code, err := s.keys.openCode(live.ID, live.SealedCode)
		if err != nil {
			// Sealed under another AUTH_SECRET: the new code replaces it.
			return models.OutboxMessage{}, models.ErrNotReusable
		}
		return codeMail(code, live.ID, live.ExpiresAt, accountLocale)
	}
	// The send is counted in the transaction that stores the code (or reads the live one) and
	// queues its e-mail, so one commit makes both durable. A refused send is committed alone: it
	// still counts.
	count := s.sendCount(email, signInCodes)
	issued, err := s.store.IssueCode(ctx, models.SendCode{Count: count, Limit: SendLimit, Code: v, Mail: m, Reuse: resend, MaxAttempts: OTPMaxAttempts})
	if err != nil {
		return err
	}
	if !issued.Stored && !issued.Reused {
		return s.sendRefused(ctx, email, signInCodes, count, issued.Counted)
	}
	if issued.Reused {
		s.stats.codesResent.Add(1)
	} else {
		s.stats.codesIssued.Add(1)
	}
	return nil
}

// newCode makes a new code for purpose and subject, sent to email, and the row that stores it
// (with a new id, so work in flight against the code it replaces cannot touch it).
func (s *Service) newCode(purpose, subject, email string) (string, models.Verification, error) {
	code, err := generateCode()
	if err != nil {
		return "", models.Verification{}, err
	}
	now := s.now()
	return code, models.Verification{
		ID:        newID(),
		Purpose:   purpose,
		Subject:   subject,
		Email:     email,
		CodeHash:  s.keys.codeHash(purpose, subject, email, code),
		ExpiresAt: now.Add(OTPLifetime),
		CreatedAt: now,
	}, nil
}

// checkCode spends one attempt of the live code for purpose and subject and compares it with
// code. On a match it returns the row, which the caller must consume in the transaction that
// acts on it; a failed transaction leaves the code usable.
//
// The attempt is spent by the store (SpendAttempt) on its own before the comparison, so parallel
// guesses, on one instance or many, can never make more than OTPMaxAttempts comparisons in total,
// and a failure later in the request cannot roll the count back. Nothing is spent while l's
// failed verifications (or l.alsoLocked's) lock the address, and the comparison is reserved against
// the address's cap of l's failures first; past the cap it fails with a RateLimitError instead of
// comparing.
func (s *Service) checkCode(ctx context.Context, purpose, subject, email, code, codeID string, l codeLimits) (*models.Verification, error) {
	now := s.now()
	if l.alsoLocked != "" {
		if err := s.checkLockedAt(ctx, l.alsoLocked, email, now); err != nil {
			return nil, err
		}
	}
	if !validCodeShape(code) {
		if err := s.checkLockedAt(ctx, l.failure, email, now); err != nil {
			return nil, err
		}
		return nil, ErrInvalidOTP
	}
	a := models.Attempt{Purpose: purpose, Subject: subject, Email: email, MaxAttempts: OTPMaxAttempts, Now: now,
		LockKey: s.keys.throttleKey(l.failure, email), MaxFailures: s.maxFailures, FailureResetAt: now.Add(FailureWindow), ID: codeID}
	spent, err := s.store.SpendAttempt(ctx, a)
	if err != nil {
		return nil, err
	}
	if spent == nil {
		return nil, s.spentCode(ctx, purpose, subject, email, l, now)
	}
	if err := s.pastFailureCap(spent.Failures, spent.FailuresResetAt); err != nil {
		return nil, err
	}
	s.stats.codeComparisons.Add(1)
	if !sameHash(spent.CodeHash, s.keys.codeHash(purpose, subject, email, code)) {
		if spent.Failures == s.maxFailures {
			// This failure was the last the address had: it is locked for the rest of the window.
			s.record(ctx, AuditVerificationLocked, "", "", map[string]any{"address": maskEmail(email), "codes": l.name})
			if l.notify {
				s.notifyPaused(ctx, email, spent.FailuresResetAt)
			}
		}
		return nil, ErrInvalidOTP
	}
	return &spent.Verification, nil
}

// spentCode explains why no attempt could be spent on the code for purpose and subject: the
// address is locked for l's codes, or the code is gone (used or replaced, or sent to another
// address), expired, or out of attempts. Out of attempts is reported as ErrTooManyAttempts once,
// to the request that marks the row exhausted, and as ErrInvalidOTP after that (better-auth's
// sequence). An exhausted row is not deleted: one of the comparisons reserved before the budget
// ran out may still be consuming it.
func (s *Service) spentCode(ctx context.Context, purpose, subject, email string, l codeLimits, now time.Time) error {
	// l.alsoLocked was looked at before the attempt (checkCode).
	if err := s.checkLockedAt(ctx, l.failure, email, now); err != nil {
		return err
	}
	v, err := s.store.Code(ctx, purpose, subject, email)
	if errors.Is(err, models.ErrNotFound) {
		return s.missedCode(ctx, purpose, subject, email, now)
	}
	if err != nil {
		return fmt.Errorf("auth: reading a code: %w", err)
	}
	if !now.Before(v.ExpiresAt) {
		s.store.DeleteCode(ctx, v.ID)
		return ErrOTPExpired
	}
	if v.Attempts >= OTPMaxAttempts {
		first, err := s.store.MarkCodeExhausted(ctx, v.ID)
		if err != nil {
			return err
		}
		if !first {
			// A parallel request reported the exhaustion first.
			return ErrInvalidOTP
		}
		return ErrTooManyAttempts
	}
	return ErrInvalidOTP
}

// notifyPaused e-mails email, in its account's language (or the service's when it has none), that
// failed codes paused signing in with it until until (catalogue #20). Once a lock: the failure
// that locks the address is counted once. It is withheld as the address's codes are (sign-up
// gating: an address that may not sign up gets no e-mail from the service, this one included).
// A failure to queue it is logged; the lock stands.
func (s *Service) notifyPaused(ctx context.Context, email string, until time.Time) {
	withhold, err := s.withholdCode(ctx, email)
	if err != nil {
		s.log.WarnContext(ctx, "queueing the sign-in-paused notice failed", "error", err)
		return
	}
	locale := ""
	if u, err := s.store.UserByEmailWithDeleted(ctx, email); err == nil {
		locale = u.Locale
	}
	d, err := s.compose.In(locale).SignInPaused(email, s.maxFailures, until)
	m, err := s.prepare(d, err, mail.EnqueueOptions{ExpiresAt: &until, Withhold: withhold})
	if err == nil {
		err = s.store.QueueMail(context.WithoutCancel(ctx), m)
	}
	if err != nil {
		s.log.WarnContext(ctx, "queueing the sign-in-paused notice failed", "error", err)
	}
}

// missedCode answers a guess at a code that is not there (never sent, used, replaced, or sent to
// another address) as a guess at a live code would be: its attempts are counted for the purpose,
// subject and address it names, for a code's lifetime, and the guess past OTPMaxAttempts is
// ErrTooManyAttempts, once, as a live code's is (catalogue #105). Otherwise a guesser would learn
// from the answers whether a code is live for an address, that is whether someone is signing in
// with it now, while spending that person's attempts.
func (s *Service) missedCode(ctx context.Context, purpose, subject, email string, now time.Time) error {
	c, err := s.store.Count(ctx, models.Count{Key: s.keys.throttleKey(throttleMiss, purpose+"\x00"+subject+"\x00"+email),
		ResetAt: now.Add(OTPLifetime), Now: now})
	if err != nil {
		return err
	}
	if c.Count == OTPMaxAttempts+1 {
		return ErrTooManyAttempts
	}
	return ErrInvalidOTP
}

// pickLocale is the language of an account's e-mail: the account's own, or when it has none
// (an account made before accounts had one, or no account yet) the request's.
func pickLocale(account, request string) string {
	if account != "" {
		return account
	}
	return request
}
