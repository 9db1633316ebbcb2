package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codeauth/mail"
	"codeauth/models"
)

// signInStore is the storage of sign-ins: models.Store implements it.
type signInStore interface {
	CompleteSignIn(ctx context.Context, in models.SignIn) (models.SignedIn, error)
	SessionExists(ctx context.Context, id string) (bool, error)
	Preferences(ctx context.Context, defaults models.UserData) (models.UserData, error)
}

// SignInInput is one verification request.
type SignInInput struct {
	Email string
	Code  string
	// Name is used only when this verification creates the account.
	Name string
	// Locale is the request's language (a code of the i18n files): a new account's, and so its
	// welcome e-mail's, and an account's that has none yet.
	Locale string
	Client ClientMeta
	// codeID and method are a sign-in link's: the code row it carries, and "email-link" for
	// the audit log (else "email-otp").
	codeID, method string
}

// SignInResult is a successful verification.
type SignInResult struct {
	SessionState
	// Created reports whether this verification created the account (a sign-up).
	Created bool
}

// confirmTimeout bounds the look, after a commit that was not acknowledged, at whether it
// committed: the request is already waiting on a broken connection.
const confirmTimeout = 3 * time.Second

// SignIn verifies a sign-in code and opens a session. An address without an account gets one
// here, and nowhere else: an account exists only once someone has proved they read its mailbox.
// Past the cap of consecutive failed verifications for the address, it fails with a
// RateLimitError without comparing; a successful sign-in resets the count.
//
// Consuming the code, creating the account with its UserData and linking earlier purchases, and
// creating the session happen in one transaction; if it fails, the code stays usable. The welcome
// e-mail is queued in that transaction and delivered after the commit; a failed delivery does not
// undo the sign-up. When the connection breaks after the COMMIT was sent, the session it stored
// tells whether the sign-in happened: if it is there, the sign-in succeeds as if nothing had
// gone wrong (the token is still in hand); if it cannot be found out, ErrSignInUnconfirmed.
func (s *Service) SignIn(ctx context.Context, in SignInInput) (*SignInResult, error) {
	email, err := NormalizeEmail(in.Email)
	if err != nil {
		return nil, err
	}
	name, err := ValidateName(in.Name)
	if err != nil {
		return nil, err
	}
	v, err := s.checkCode(ctx, PurposeSignIn, email, email, in.Code, in.codeID, signInCodes)
	if err != nil {
		s.countFailedVerification(err)
		return nil, err
	}
	token, sess, err := s.newSession(in.Client)
	if err != nil {
		return nil, err
	}
	// The welcome e-mail is sealed here, before the transaction, and written only if the sign-in
	// creates the account: a sign-in that does not wastes a few microseconds, and the store needs
	// no way back into the rules.
	d, err := s.compose.In(in.Locale).Welcome(email)
	welcome, err := s.prepare(d, err, mail.EnqueueOptions{})
	if err != nil {
		return nil, err
	}
	now := s.now()
	fresh := models.User{ID: newID(), Email: email, Name: name, EmailVerified: true, CreatedAt: now, UpdatedAt: now, Locale: s.localeCode(in.Locale)}
	signIn := models.SignIn{
		Fresh:       fresh,
		UserData:    s.defaultUserData(fresh.ID),
		Code:        *v,
		FailureKey:  s.keys.throttleKey(signInCodes.failure, email),
		Session:     sess,
		Welcome:     welcome,
		GraceCutoff: now.Add(-s.deletionGrace),
		Now:         now,
		Admin:       s.adminEmails[email],
		NoSignUp:    !s.mayCreate(email),
		// The event is written in the sign-in's transaction, from what the sign-in turned out
		// to be.
		Audit: func(o models.SignInOutcome) []models.AuditEvent {
			method := in.method
			if method == "" {
				method = "email-otp"
			}
			action := AuditSignIn
			switch {
			case o.Created:
				action = AuditSignUp
			case o.Restored:
				action = AuditDeletionRestored
			}
			events := []models.AuditEvent{s.auditEvent(ctx, action, o.UserID, o.UserID, map[string]any{"method": method, "new_device": o.NewDevice})}
			if o.PromotedTo != "" {
				// The operator's AUTH_ADMIN_EMAILS made the account an admin: no account acted.
				events = append(events, s.auditEvent(ctx, AuditRoleSet, "", o.UserID, map[string]any{"role": o.PromotedTo, "by": "AUTH_ADMIN_EMAILS"}))
			}
			return events
		},
	}
	if s.newDeviceNotice {
		device := DeviceOf(sess.UserAgent)
		signIn.DeviceKey = s.keys.deviceKey(device)
		signIn.DeviceCutoff, signIn.DeviceFreshAfter = now.Add(-KnownDeviceWindow), now.Add(-deviceSeenPrecision)
		// Sealed only when the store finds the device new to the account, which most sign-ins
		// are not; in the account's language.
		signIn.NewDevice = func(locale string) (models.OutboxMessage, error) {
			d, err := s.compose.In(locale).NewDevice(email, device.Browser, device.Platform(), sess.IPAddress, now, KnownDeviceWindow)
			return s.prepare(d, err, mail.EnqueueOptions{})
		}
	}
	done, err := s.store.CompleteSignIn(ctx, signIn)
	if errors.Is(err, models.ErrBanned) {
		err = ErrBanned
	}
	if errors.Is(err, models.ErrSignUpClosed) {
		err = ErrInvalidOTP // as a wrong code: nothing says whether the address has an account
	}
	if errors.Is(err, models.ErrLost) {
		err = ErrInvalidOTP // a parallel request used the code first
	}
	if errors.Is(err, models.ErrCommitUnknown) {
		err = s.confirmCommit(ctx, sess.ID, err)
	}
	if err != nil {
		s.countFailedVerification(err)
		return nil, err
	}
	sess.UserID = done.User.ID
	res := &SignInResult{SessionState: SessionState{Session: sess, User: done.User, Token: token}, Created: done.Created}
	s.stats.signIns.Add(1)
	if res.Created {
		s.stats.signUps.Add(1)
		s.log.InfoContext(ctx, "account created", "user_id", res.User.ID)
	}
	return res, nil
}

// confirmLooks are the pauses before each look confirmCommit takes for a session: a look can
// fail on another connection the same failure broke, and a COMMIT the server received may still
// be running, so one look would turn away people whose sign-in worked.
var confirmLooks = []time.Duration{0, 250 * time.Millisecond, 750 * time.Millisecond}

// confirmCommit settles a sign-in whose commit was not acknowledged (unknown, the error): it
// committed exactly when its session exists. It looks up to len(confirmLooks) times within
// confirmTimeout. A session that is not there is no proof of a rollback (the server may still be
// running the COMMIT it received), so that, like failed looks, is ErrSignInUnconfirmed.
func (s *Service) confirmCommit(ctx context.Context, sessionID string, unknown error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
	defer cancel()
	for i, pause := range confirmLooks {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrSignInUnconfirmed, unknown)
		case <-time.After(pause):
		}
		found, err := s.store.SessionExists(ctx, sessionID)
		if err == nil && found {
			s.log.WarnContext(ctx, "a sign-in's commit was not acknowledged, and was found committed", "error", unknown, "looks", i+1)
			return nil
		}
		s.log.WarnContext(ctx, "a sign-in's commit was not acknowledged, and its session was not found yet", "look", i+1, "error", err)
	}
	return fmt.Errorf("%w: %w", ErrSignInUnconfirmed, unknown)
}

// defaultUserData is the preference record an account starts with.
func (s *Service) defaultUserData(userID string) models.UserData {
	now := s.now()
	return models.UserData{ID: newID(), UserID: userID, MarketingOptIn: false, IsTrialEligible: true, CreatedAt: now, UpdatedAt: now}
}

// Preferences returns the user's UserData, creating the default row for accounts that predate
// it.
func (s *Service) Preferences(ctx context.Context, userID string) (models.UserData, error) {
	return s.store.Preferences(ctx, s.defaultUserData(userID))
}
