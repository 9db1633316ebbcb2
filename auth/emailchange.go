package auth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"codeauth/mail"
	"codeauth/models"
)

// Purposes of the e-mail change codes and links, each usable only for its own purpose.
const (
	// PurposeChangeEmail codes confirm a new address from the app; their subject is the user.
	PurposeChangeEmail = "change-email"
	purposeChangeLink  = "change-email-link"
	purposeRestore     = "email-restore"
)

// Lifetimes of the links.
const (
	// ChangeLinkLifetime is how long the link to a new address works.
	ChangeLinkLifetime = 15 * time.Minute
	// RestoreLinkLifetime is how long the old address can undo a change.
	RestoreLinkLifetime = 7 * 24 * time.Hour
)

// newAddress checks the requested address: valid, and not the current one.
func newAddress(user models.User, raw string) (string, error) {
	email, err := NormalizeEmail(raw)
	if err != nil {
		return "", err
	}
	if email == user.Email {
		return "", ErrEmailSame
	}
	return email, nil
}

// changeStore is the storage of address changes: models.Store implements it.
type changeStore interface {
	AddressTaken(ctx context.Context, email string) (bool, error)
	CodeByID(ctx context.Context, id, purpose string) (models.Verification, error)
	User(ctx context.Context, id string) (models.User, error)
	UserWithDeleted(ctx context.Context, id string) (models.User, error)
	ApplyEmailChange(ctx context.Context, c models.EmailChange) (models.User, []string, error)
	RestoreEmail(ctx context.Context, r models.EmailRestore) (models.User, []string, error)
}

// pendingChanges are the purposes of the codes and links of an address change in progress.
var pendingChanges = []string{PurposeChangeEmail, purposeChangeLink}

// changeRequest runs the checks both change flows make before anything is stored: a fresh
// session, a valid new address that is not the current one, and the address's budget of change
// sends (changeCodes: its own, apart from the sign-in codes'), which a lock by failed change
// verifications closes, as does a lock by failed sign-in guesses (catalogue #20, #91). taken reports that the address belongs to another account: the caller
// then does the same work as for a free address but withholds the e-mail, so neither the answer
// nor its timing tells the two apart (catalogue #88, #106; ASVS 6.3.8).
func (s *Service) changeRequest(ctx context.Context, st *SessionState, rawNew string) (email string, taken bool, err error) {
	if err := ownerOnly(st); err != nil {
		return "", false, err
	}
	if err := s.requireFresh(st); err != nil {
		return "", false, err
	}
	if email, err = newAddress(st.User, rawNew); err != nil {
		return "", false, err
	}
	if err := s.throttleSend(ctx, email, changeCodes); err != nil {
		return "", false, err
	}
	if taken, err = s.store.AddressTaken(ctx, email); err != nil {
		return "", false, err
	}
	return email, taken, nil
}

// RequestEmailChangeCode e-mails a change-email code to the new address (the app flow). The
// session must be fresh. For an address that belongs to another account the code is stored and
// its e-mail written but withheld, so the request reveals nothing, by its answer or its timing;
// the final step then fails like a wrong code. Either way the new code replaces the account's
// previous change code.
func (s *Service) RequestEmailChangeCode(ctx context.Context, st *SessionState, rawNew string) error {
	user := st.User
	email, taken, err := s.changeRequest(ctx, st, rawNew)
	if err != nil {
		return err
	}
	code, v, err := s.newCode(PurposeChangeEmail, user.ID, email)
	if err != nil {
		return err
	}
	locale, err := s.accountLocale(ctx, user.ID)
	if err != nil {
		return err
	}
	d, err := s.compose.In(locale).ChangeEmailCode(email, code, OTPLifetime)
	m, err := s.prepare(d, err, mail.EnqueueOptions{ExpiresAt: &v.ExpiresAt, Supersede: "change-email-code:" + user.ID, Withhold: taken})
	if err != nil {
		return err
	}
	if err := s.store.ReplaceCode(ctx, v, m); err != nil {
		return err
	}
	s.stats.codesIssued.Add(1)
	// Recorded whether or not the address is taken, so the work done does not tell.
	s.record(ctx, AuditEmailChangeRequested, user.ID, user.ID, map[string]any{"to": maskEmail(email), "by": "code"})
	return nil
}

// ChangeEmailWithCode completes the app flow: the code sent to the new address makes it the
// account's address. Any failure, including an address taken meanwhile, is ErrInvalidOTP (or the
// code's own expiry and attempt errors). Each comparison counts against the new address's cap of
// failed change verifications, as a sign-in guess counts against its own, and is refused while
// either locks the address: guessing at change codes is bounded as guessing at sign-in codes is,
// but cannot lock the address's owner out of signing in (changeCodes; catalogue #20, #21, #91).
func (s *Service) ChangeEmailWithCode(ctx context.Context, st *SessionState, rawNew, code string) (models.User, error) {
	if err := ownerOnly(st); err != nil {
		return models.User{}, err
	}
	email, err := newAddress(st.User, rawNew)
	if err != nil {
		return models.User{}, err
	}
	v, err := s.checkCode(ctx, PurposeChangeEmail, st.User.ID, email, code, "", changeCodes)
	if err != nil {
		return models.User{}, err
	}
	user, err := s.applyEmailChange(ctx, v, st.User.ID, st.User.Email, email, st.Session.ID)
	if errors.Is(err, ErrEmailTaken) || errors.Is(err, ErrInvalidToken) {
		return models.User{}, ErrInvalidOTP
	}
	return user, err
}

// RequestEmailChangeLink e-mails a confirmation link to the new address (the web flow). The
// session must be fresh. callback is where the confirmation page goes afterwards; the caller has
// checked it. For a taken address the link is stored and its e-mail written but withheld: the
// same answer, the same work.
func (s *Service) RequestEmailChangeLink(ctx context.Context, st *SessionState, rawNew, callback string) error {
	if !s.changeLinks {
		return ErrChangeLinksDisabled
	}
	user := st.User
	email, taken, err := s.changeRequest(ctx, st, rawNew)
	if err != nil {
		return err
	}
	token, v, err := s.newLink(purposeChangeLink, user.ID, email, user.Email, ChangeLinkLifetime)
	if err != nil {
		return err
	}
	q := url.Values{"token": {token}}
	if callback != "" {
		q.Set("callbackURL", callback)
	}
	locale, err := s.accountLocale(ctx, user.ID)
	if err != nil {
		return err
	}
	d, err := s.compose.In(locale).ChangeEmailLink(email, user.Email, s.compose.SiteURL+"/auth/verify-email?"+q.Encode(), ChangeLinkLifetime)
	m, err := s.prepare(d, err, mail.EnqueueOptions{ExpiresAt: &v.ExpiresAt, Supersede: "change-email-link:" + user.ID, Withhold: taken})
	if err != nil {
		return err
	}
	if err := s.store.ReplaceCode(ctx, v, m); err != nil {
		return err
	}
	s.record(ctx, AuditEmailChangeRequested, user.ID, user.ID, map[string]any{"to": maskEmail(email), "by": "link"})
	return nil
}

// PendingChange describes what a link would do, for the page that asks to confirm it.
type PendingChange struct {
	UserID    string
	OldEmail  string
	NewEmail  string
	ExpiresAt time.Time
}

// PendingEmailChange reads a change link without using it.
func (s *Service) PendingEmailChange(ctx context.Context, token string) (PendingChange, error) {
	v, user, err := s.checkChangeLink(ctx, token)
	if err != nil {
		return PendingChange{}, err
	}
	return PendingChange{UserID: user.ID, OldEmail: user.Email, NewEmail: v.Email, ExpiresAt: v.ExpiresAt}, nil
}

func (s *Service) checkChangeLink(ctx context.Context, token string) (*models.Verification, models.User, error) {
	v, secret, err := s.findLink(ctx, purposeChangeLink, token)
	if err != nil {
		return nil, models.User{}, err
	}
	user, err := s.store.User(ctx, v.Subject)
	if err != nil {
		return nil, models.User{}, notFoundAs(err, ErrInvalidToken, "reading an account")
	}
	// The link is bound to the address the account had when it was asked for.
	if !sameHash(v.CodeHash, s.keys.codeHash(purposeChangeLink, v.Subject, v.Email+"\x00"+user.Email, secret)) {
		return nil, models.User{}, ErrInvalidToken
	}
	return v, user, nil
}

// ConfirmEmailChange uses a change link (the web flow). st is the session where the link is
// opened, or nil: a link opened in another account's session is refused. That session is kept;
// every other session of the account ends.
func (s *Service) ConfirmEmailChange(ctx context.Context, token string, st *SessionState) (models.User, error) {
	v, user, err := s.checkChangeLink(ctx, token)
	if err != nil {
		return models.User{}, err
	}
	keep := ""
	if st != nil {
		if err := ownerOnly(st); err != nil {
			return models.User{}, err
		}
		if st.User.ID != user.ID {
			return models.User{}, ErrInvalidToken
		}
		keep = st.Session.ID
	}
	return s.applyEmailChange(ctx, v, user.ID, user.Email, v.Email, keep)
}

// applyEmailChange consumes the code or link and moves the account to the new address, in one
// transaction: the address (verified), the end of every other session, the end of other pending
// changes, and the notice to the old address with its restore link. ErrEmailTaken when another
// account took the address meanwhile; ErrInvalidToken when the account's address changed or the
// code was used meanwhile.
func (s *Service) applyEmailChange(ctx context.Context, v *models.Verification, userID, oldEmail, newEmail, keepSession string) (models.User, error) {
	token, link, err := s.newLink(purposeRestore, restoreSubject(userID, oldEmail), oldEmail, "", RestoreLinkLifetime)
	if err != nil {
		return models.User{}, err
	}
	locale, err := s.accountLocale(ctx, userID)
	if err != nil {
		return models.User{}, err
	}
	d, err := s.compose.In(locale).EmailChanged(oldEmail, newEmail, s.compose.SiteURL+"/auth/restore-email?token="+url.QueryEscape(token), RestoreLinkLifetime)
	notice, err := s.prepare(d, err, mail.EnqueueOptions{ExpiresAt: &link.ExpiresAt})
	if err != nil {
		return models.User{}, err
	}
	user, revoked, err := s.store.ApplyEmailChange(ctx, models.EmailChange{
		UserID: userID, OldEmail: oldEmail, NewEmail: newEmail, Code: *v, KeepSession: keepSession,
		PendingPurposes: pendingChanges,
		// The new address was just proved, as a sign-in proves one: its counts of failed
		// verifications start again.
		FailureKeys: []string{s.keys.throttleKey(signInCodes.failure, newEmail), s.keys.throttleKey(changeCodes.failure, newEmail)},
		RestoreLink: link, Notice: notice, Now: s.now(),
	})
	switch {
	case errors.Is(err, models.ErrAddressTaken):
		return models.User{}, ErrEmailTaken
	case errors.Is(err, models.ErrLost):
		return models.User{}, ErrInvalidToken
	case err != nil:
		return models.User{}, err
	}
	s.revokeLocally(revoked)
	s.log.InfoContext(ctx, "e-mail address changed", "user_id", userID, "sessions_ended", len(revoked))
	s.record(ctx, AuditEmailChanged, userID, userID, map[string]any{"from": maskEmail(oldEmail), "to": maskEmail(newEmail),
		"sessions_ended": len(revoked)})
	return user, nil
}

// PendingRestore describes what a restore link would do.
type PendingRestore struct {
	OldEmail     string
	CurrentEmail string
	// Deleted means the account is in its deletion grace period: restoring also undeletes it.
	Deleted bool
}

// PendingEmailRestore reads a restore link without using it.
func (s *Service) PendingEmailRestore(ctx context.Context, token string) (PendingRestore, error) {
	v, user, err := s.checkRestoreLink(ctx, token)
	if err != nil {
		return PendingRestore{}, err
	}
	return PendingRestore{OldEmail: v.Email, CurrentEmail: user.Email, Deleted: user.DeletedAt.Valid}, nil
}

func (s *Service) checkRestoreLink(ctx context.Context, token string) (*models.Verification, models.User, error) {
	v, secret, err := s.findLink(ctx, purposeRestore, token)
	if err != nil {
		return nil, models.User{}, err
	}
	if !sameHash(v.CodeHash, s.keys.codeHash(purposeRestore, v.Subject, v.Email+"\x00", secret)) {
		return nil, models.User{}, ErrInvalidToken
	}
	userID, _, _ := strings.Cut(v.Subject, ":")
	// A deleted account in its grace period can still be restored: deleting it may be what the
	// person who took it over did next.
	user, err := s.store.UserWithDeleted(ctx, userID)
	if err != nil {
		return nil, models.User{}, notFoundAs(err, ErrInvalidToken, "reading an account")
	}
	if s.pastGrace(user) {
		return nil, models.User{}, ErrInvalidToken
	}
	return v, user, nil
}

// RestoreEmail uses the link sent to an old address: the account gets that address back, a
// deletion in its grace period is undone, and every one of its sessions ends, so whoever changed
// it is signed out. Later changes do not void the link; each old address keeps its own. Using it
// voids the restore links of every change made after it, so whoever made those changes cannot
// take the account back with the link their own address received.
func (s *Service) RestoreEmail(ctx context.Context, token string) (models.User, error) {
	v, user, err := s.checkRestoreLink(ctx, token)
	if err != nil {
		return models.User{}, err
	}
	now := s.now()
	locked, revoked, err := s.store.RestoreEmail(ctx, models.EmailRestore{
		UserID: user.ID, Email: v.Email, Code: *v, RestorePurpose: purposeRestore, PendingPurposes: pendingChanges,
		GraceCutoff: now.Add(-s.deletionGrace), Now: now,
	})
	switch {
	case errors.Is(err, models.ErrAddressTaken):
		return models.User{}, ErrEmailTaken
	case errors.Is(err, models.ErrNotFound), errors.Is(err, models.ErrLost):
		return models.User{}, ErrInvalidToken
	case err != nil:
		return models.User{}, err
	}
	s.revokeLocally(revoked)
	s.log.InfoContext(ctx, "e-mail address restored", "user_id", user.ID, "sessions_ended", len(revoked), "undeleted", locked.DeletedAt.Valid)
	s.record(ctx, AuditEmailRestored, "", user.ID, map[string]any{"to": maskEmail(v.Email), "sessions_ended": len(revoked),
		"undeleted": locked.DeletedAt.Valid})
	user = locked
	user.Email, user.EmailVerified, user.DeletedAt = v.Email, true, models.User{}.DeletedAt
	return user, nil
}
