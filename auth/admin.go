package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"codeauth/models"
)

// The admin layer (better-auth's admin plugin): roles, the user list, bans, session revocation,
// removal and impersonation. Every operation takes the acting session and refuses unless its
// account is an admin and the session is not an impersonation (ErrNotAdmin): an admin acting as
// someone else cannot use the admin powers, and nobody can reach them through a session an admin
// opened as them.

// adminStore is the storage of the admin layer: models.Store implements it.
type adminStore interface {
	ListUsers(ctx context.Context, q models.UserQuery) ([]models.User, int64, error)
	User(ctx context.Context, id string) (models.User, error)
	UserByEmailWithDeleted(ctx context.Context, email string) (models.User, error)
	SetRole(ctx context.Context, id, role string, now time.Time, keepAdmin bool) (models.User, []string, error)
	Ban(ctx context.Context, id string, reason *string, expires *time.Time, now time.Time, keepAdmin bool) (models.User, []string, error)
	Unban(ctx context.Context, id string, now time.Time) (models.User, error)
	RemoveAccount(ctx context.Context, id string, now time.Time, keepAdmin bool) ([]string, error)
	EndSessionByHandle(ctx context.Context, id, tokenHash string) (ended, userID string, err error)
	CreateSession(ctx context.Context, sess models.Session, now time.Time) error
}

// Bounds of the user list.
const (
	// DefaultUserPage is how many users list-users returns without a limit (better-auth returns
	// them all, which no dashboard can show and no database should be asked for).
	DefaultUserPage = 100
	// MaxUserPage is the most users one page holds.
	MaxUserPage = 1000
	// ImpersonationLifetime is how long a session an admin opens as another user lasts
	// (better-auth's default impersonationSessionDuration).
	ImpersonationLifetime = time.Hour
	// MaxBanReason is the longest ban reason, in characters.
	MaxBanReason = 500
	// MaxTypedBanLength is the longest ban a person types (ParseBanLength); longer is a ban
	// until lifted.
	MaxTypedBanLength = 10 * 365 * 24 * time.Hour
)

// ParseBanLength reads a ban length typed by a person (the admin page's form, the command line's
// -for): "0" (or nothing) is a ban until lifted, anything else a Go duration ("24h", "90m") of at
// least a second and at most MaxTypedBanLength. Anything else is ErrInvalidBanLength, so a length
// that rounds to nothing ("0.5ns", "-1s") is never read as a ban for good.
func ParseBanLength(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > MaxTypedBanLength {
		return 0, ErrInvalidBanLength
	}
	return d, nil
}

// Roles reads a role value ("admin", "user", "admin,user") as its set.
func Roles(role string) []string {
	var out []string
	for _, r := range strings.Split(role, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// IsAdmin reports whether the account's roles include the admin role.
func IsAdmin(u models.User) bool { return slices.Contains(Roles(u.Role), RoleAdmin) }

// Operator is the authority of the command line (`codeauth users`): an admin of no account, so
// every admin rule applies, no "yourself" refusal can match, and its audit events have no actor.
func (s *Service) Operator() *SessionState {
	return &SessionState{User: models.User{Role: RoleAdmin}}
}

// keepsAnAdmin reports whether st's changes must leave an admin in force (ErrLastAdmin): an
// account's must, so the service never ends up with nobody to run it; the operator's command
// line may, as AUTH_ADMIN_EMAILS and `users set-role` bring an admin back.
func keepsAnAdmin(st *SessionState) bool { return st.User.ID != "" }

// lastAdmin is models.ErrLastAdmin as auth's ErrLastAdmin, and any other error as it is.
func lastAdmin(err error) error {
	if errors.Is(err, models.ErrLastAdmin) {
		return ErrLastAdmin
	}
	return err
}

// ownerOnly refuses (ErrImpersonated), in a session an admin opened as the account, what only the
// account's owner may do: move it to another address (which would hand it to whoever holds that
// mailbox) or delete it.
func ownerOnly(st *SessionState) error {
	if st != nil && st.Session.ImpersonatedBy != nil {
		return ErrImpersonated
	}
	return nil
}

// requireAdmin refuses st unless it is an admin's own session.
func requireAdmin(st *SessionState) error {
	if st == nil || st.Session.ImpersonatedBy != nil || !IsAdmin(st.User) {
		return ErrNotAdmin
	}
	return nil
}

// ParseRoles checks a role value set by an admin: one or more of the known roles. It returns
// the value as stored ("admin,user").
func ParseRoles(roles []string) (string, error) {
	if len(roles) == 0 {
		return "", ErrUnknownRole
	}
	seen := make([]string, 0, len(roles))
	for _, r := range roles {
		r = strings.TrimSpace(r)
		if r != RoleAdmin && r != RoleUser {
			return "", ErrUnknownRole
		}
		if !slices.Contains(seen, r) {
			seen = append(seen, r)
		}
	}
	return strings.Join(seen, ","), nil
}

// ListUsers returns a page of the live accounts and how many match in all. The limit defaults to
// DefaultUserPage and is capped at MaxUserPage; a query the store cannot run (an unknown field or
// operator) is ErrInvalidUserQuery.
func (s *Service) ListUsers(ctx context.Context, st *SessionState, q models.UserQuery) ([]models.User, int64, models.UserQuery, error) {
	if err := requireAdmin(st); err != nil {
		return nil, 0, q, err
	}
	if q.Limit <= 0 {
		q.Limit = DefaultUserPage
	}
	q.Limit = min(q.Limit, MaxUserPage)
	q.Offset = max(q.Offset, 0)
	for _, c := range q.Where {
		if !queryValueOK(c.Field, c.Value) {
			return nil, 0, q, ErrInvalidUserQuery
		}
	}
	users, total, err := s.store.ListUsers(ctx, q)
	if errors.Is(err, models.ErrInvalidQuery) {
		return nil, 0, q, ErrInvalidUserQuery
	}
	return users, total, q, err
}

// SearchUsers is ListUsers for the admin pages: the accounts whose address contains text (all
// when ""), newest first.
func (s *Service) SearchUsers(ctx context.Context, st *SessionState, text string, limit, offset int) ([]models.User, int64, error) {
	q := models.UserQuery{Limit: limit, Offset: offset, Desc: true}
	if text != "" {
		q.Where = []models.UserCondition{{Field: models.UserFieldEmail, Op: models.OpContains, Value: text}}
	}
	users, total, _, err := s.ListUsers(ctx, st, q)
	return users, total, err
}

// queryValueOK reports whether v is a value the databases can compare with field: ids are
// canonical UUIDs (PostgreSQL's uuid type refuses anything else), text is valid UTF-8 without NUL
// (PostgreSQL refuses NUL in text); lists are checked item by item.
func queryValueOK(field models.UserField, v any) bool {
	switch v := v.(type) {
	case []any:
		for _, item := range v {
			if !queryValueOK(field, item) {
				return false
			}
		}
		return true
	case string:
		if field == models.UserFieldID {
			return canonicalUUID(v)
		}
		return queryText(v)
	}
	return true
}

// queryText reports whether s is text a query may carry: valid UTF-8 without NUL.
func queryText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// AdminGetUser reads an account for an admin.
func (s *Service) AdminGetUser(ctx context.Context, st *SessionState, id string) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	return s.adminTarget(ctx, id)
}

// FindAccount reads, for an admin, the account named by its id or its address (the operator's
// command line), live or, with deleted, also in its deletion grace period (what remove erases);
// ErrNoSuchUser when there is none.
func (s *Service) FindAccount(ctx context.Context, st *SessionState, idOrEmail string, deleted bool) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	var u models.User
	var err error
	switch {
	case !strings.Contains(idOrEmail, "@"):
		if !canonicalUUID(idOrEmail) {
			return models.User{}, ErrNoSuchUser
		}
		if deleted {
			u, err = s.store.UserWithDeleted(ctx, idOrEmail)
		} else {
			u, err = s.store.User(ctx, idOrEmail)
		}
	default:
		email, nerr := NormalizeEmail(idOrEmail)
		if nerr != nil {
			return models.User{}, nerr
		}
		u, err = s.store.UserByEmailWithDeleted(ctx, email)
		if err == nil && u.DeletedAt.Valid && !deleted {
			return models.User{}, ErrNoSuchUser
		}
	}
	return u, notFoundAs(err, ErrNoSuchUser, "reading an account")
}

// adminTarget reads the live account an admin acts on; ErrNoSuchUser when there is none.
func (s *Service) adminTarget(ctx context.Context, id string) (models.User, error) {
	if !canonicalUUID(id) {
		return models.User{}, ErrNoSuchUser
	}
	u, err := s.store.User(ctx, id)
	return u, notFoundAs(err, ErrNoSuchUser, "reading an account")
}

// SetRole sets an account's roles (ParseRoles). An admin who loses the role loses the sessions
// they opened as others; the last admin in force keeps it (ErrLastAdmin).
func (s *Service) SetRole(ctx context.Context, st *SessionState, id string, roles []string) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	role, err := ParseRoles(roles)
	if err != nil {
		return models.User{}, err
	}
	if !canonicalUUID(id) {
		return models.User{}, ErrNoSuchUser
	}
	u, ended, err := s.store.SetRole(ctx, id, role, s.now(), keepsAnAdmin(st))
	if err != nil {
		return models.User{}, notFoundAs(lastAdmin(err), ErrNoSuchUser, "setting a role")
	}
	s.revokeLocally(ended)
	s.record(ctx, AuditRoleSet, st.User.ID, id, map[string]any{"role": role, "sessions_ended": len(ended)})
	return u, nil
}

// AdminUpdateUser changes an account's name or image, checked as the account's own change is
// (UpdateUser); ErrNothingToUpdate when it changes neither.
func (s *Service) AdminUpdateUser(ctx context.Context, st *SessionState, id string, in UserUpdate) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	if in.Name == nil && !in.SetImage {
		return models.User{}, ErrNothingToUpdate
	}
	if !canonicalUUID(id) {
		return models.User{}, ErrNoSuchUser
	}
	u, err := s.UpdateUser(ctx, id, in)
	if errors.Is(err, ErrUserNotFound) {
		return u, ErrNoSuchUser
	}
	if err == nil {
		s.record(ctx, AuditUserUpdated, st.User.ID, id, map[string]any{"name": in.Name != nil, "image": in.SetImage})
	}
	return u, err
}

// FieldBanReason names the ban reason in a FieldError.
const FieldBanReason = "banReason"

// DefaultBanReason is the reason kept when an admin gives none (better-auth's).
const DefaultBanReason = "No reason"

// BanUser bans an account, for expiresIn (0: for good; a part of a second counts as a whole one)
// and with reason (DefaultBanReason when blank; a FieldError when it breaks validateText's rules),
// and ends every session of it, and those it opened as others, at once. An admin cannot ban
// themself, nor the last admin in force (ErrLastAdmin).
func (s *Service) BanUser(ctx context.Context, st *SessionState, id, reason string, expiresIn time.Duration) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	if id == st.User.ID {
		return models.User{}, ErrCannotBanSelf
	}
	if expiresIn < 0 {
		return models.User{}, ErrInvalidBanLength
	}
	// The reason is shown to admins and may be to the account: held to a name's rules (no
	// control, bidirectional or invisible characters), and refused, not cut, past MaxBanReason.
	reason, err := validateText(FieldBanReason, reason, MaxBanReason)
	if err != nil {
		return models.User{}, err
	}
	if reason == "" {
		reason = DefaultBanReason
	}
	var until *time.Time
	now := s.now()
	if expiresIn > 0 {
		// A part of a second counts as a whole one, so no length is too short to be a ban.
		if rem := expiresIn % time.Second; rem != 0 {
			expiresIn += time.Second - rem
		}
		t := now.Add(expiresIn)
		until = &t
	}
	if !canonicalUUID(id) {
		return models.User{}, ErrNoSuchUser
	}
	u, ended, err := s.store.Ban(ctx, id, &reason, until, now, keepsAnAdmin(st))
	if err != nil {
		return models.User{}, notFoundAs(lastAdmin(err), ErrNoSuchUser, "banning an account")
	}
	s.revokeLocally(ended)
	s.record(ctx, AuditBanned, st.User.ID, id, map[string]any{"reason": reason, "expires": until, "sessions_ended": len(ended)})
	return u, nil
}

// UnbanUser lifts an account's ban.
func (s *Service) UnbanUser(ctx context.Context, st *SessionState, id string) (models.User, error) {
	if err := requireAdmin(st); err != nil {
		return models.User{}, err
	}
	if !canonicalUUID(id) {
		return models.User{}, ErrNoSuchUser
	}
	u, err := s.store.Unban(ctx, id, s.now())
	if err == nil {
		s.record(ctx, AuditUnbanned, st.User.ID, id, nil)
	}
	return u, notFoundAs(err, ErrNoSuchUser, "unbanning an account")
}

// UserSessions lists an account's live sessions for an admin, newest first.
func (s *Service) UserSessions(ctx context.Context, st *SessionState, id string) ([]models.Session, error) {
	if err := requireAdmin(st); err != nil {
		return nil, err
	}
	if _, err := s.adminTarget(ctx, id); err != nil {
		return nil, err
	}
	return s.store.ListSessions(ctx, id, s.now())
}

// UserDevices lists an account's live sessions for an admin as devices, newest first.
func (s *Service) UserDevices(ctx context.Context, st *SessionState, id string) ([]DeviceSession, error) {
	sessions, err := s.UserSessions(ctx, st, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]DeviceSession, len(sessions))
	for i, sess := range sessions {
		out[i] = deviceSession(sess, "", now)
	}
	return out, nil
}

// RevokeUserSession ends any account's session, named by its handle (the id the session lists
// give as its token) or its raw token; ErrSessionNotFound when there is none.
func (s *Service) RevokeUserSession(ctx context.Context, st *SessionState, handle string) error {
	if err := requireAdmin(st); err != nil {
		return err
	}
	var id, hash string
	switch {
	case canonicalUUID(handle):
		id = handle
	case WellFormedToken(handle):
		hash = hashToken(handle)
	default:
		return ErrSessionNotFound
	}
	ended, owner, err := s.store.EndSessionByHandle(ctx, id, hash)
	if err != nil {
		return err
	}
	if ended == "" {
		return ErrSessionNotFound
	}
	s.revokeLocally([]string{ended})
	s.record(ctx, AuditSessionRevoked, st.User.ID, owner, map[string]any{"sessions": []string{ended}, "by": "admin"})
	return nil
}

// RevokeAccountSession ends the session id of the account userID for an admin (the admin page's
// "Sign out" of one device); ErrSessionNotFound when the account has no such session, so a
// session of another account is never ended from this account's page, or recorded against it.
func (s *Service) RevokeAccountSession(ctx context.Context, st *SessionState, userID, id string) error {
	if err := requireAdmin(st); err != nil {
		return err
	}
	if !canonicalUUID(userID) || !canonicalUUID(id) {
		return ErrSessionNotFound
	}
	ended, err := s.store.EndUserSession(ctx, userID, id, "", models.ReasonRevokedByAdmin)
	if err != nil {
		return err
	}
	if ended == "" {
		return ErrSessionNotFound
	}
	s.revokeLocally([]string{ended})
	s.record(ctx, AuditSessionRevoked, st.User.ID, userID, map[string]any{"sessions": []string{ended}, "by": "admin"})
	return nil
}

// RevokeUserSessions ends every session of an account.
func (s *Service) RevokeUserSessions(ctx context.Context, st *SessionState, id string) error {
	if err := requireAdmin(st); err != nil {
		return err
	}
	if _, err := s.adminTarget(ctx, id); err != nil {
		return err
	}
	ended, err := s.store.EndUserSessions(ctx, id, "", models.ReasonRevokedByAdmin)
	if err != nil {
		return err
	}
	s.revokeLocally(ended)
	s.record(ctx, AuditSessionRevoked, st.User.ID, id, map[string]any{"sessions": ended, "by": "admin"})
	return nil
}

// RemoveUser erases an account at once, without the grace period of a deletion: its sessions
// (and those it opened as others), codes, preferences and consent records go; its purchases
// stay, unlinked. An admin cannot remove themself, nor the last admin in force (ErrLastAdmin).
func (s *Service) RemoveUser(ctx context.Context, st *SessionState, id string) error {
	if err := requireAdmin(st); err != nil {
		return err
	}
	if id == st.User.ID {
		return ErrCannotRemoveSelf
	}
	if !canonicalUUID(id) {
		return ErrNoSuchUser
	}
	ended, err := s.store.RemoveAccount(ctx, id, s.now(), keepsAnAdmin(st))
	if err != nil {
		return notFoundAs(lastAdmin(err), ErrNoSuchUser, "removing an account")
	}
	s.revokeLocally(ended)
	s.record(ctx, AuditUserRemoved, st.User.ID, id, map[string]any{"sessions_ended": len(ended)})
	return nil
}

// Impersonate opens a session as another account for the admin of st, marked with the admin's
// id and ending after ImpersonationLifetime, and returns it with its raw token. Admins cannot be
// impersonated, and a banned account cannot be either.
func (s *Service) Impersonate(ctx context.Context, st *SessionState, id string, meta ClientMeta) (*SessionState, error) {
	if err := requireAdmin(st); err != nil {
		return nil, err
	}
	target, err := s.adminTarget(ctx, id)
	if err != nil {
		return nil, err
	}
	if IsAdmin(target) {
		return nil, ErrCannotImpersonateAdmin
	}
	if target.Banned && (target.BanExpires == nil || target.BanExpires.After(s.now())) {
		return nil, ErrBanned // a ban past its expiry is none, as at sign-in
	}
	token, sess, err := s.newSession(meta)
	if err != nil {
		return nil, err
	}
	sess.UserID = target.ID
	end := s.now().Add(ImpersonationLifetime)
	sess.ExpiresAt, sess.AbsoluteExpiresAt = end, end
	admin := st.User.ID
	sess.ImpersonatedBy = &admin
	if err := s.store.CreateSession(ctx, sess, s.now()); err != nil {
		switch {
		case errors.Is(err, models.ErrBanned):
			return nil, ErrBanned // a ban that committed since the account was read
		case errors.Is(err, models.ErrIsAdmin):
			return nil, ErrCannotImpersonateAdmin // made an admin since it was read
		case errors.Is(err, models.ErrNoAuthority):
			return nil, ErrNotAdmin // the admin was banned, demoted or removed meanwhile
		}
		return nil, notFoundAs(err, ErrNoSuchUser, "opening an impersonation session")
	}
	s.record(ctx, AuditImpersonationStarted, st.User.ID, target.ID, map[string]any{"session": sess.ID, "expires": end})
	return &SessionState{Session: sess, User: target, Token: token}, nil
}

// StopImpersonating ends the impersonation session st and returns the admin's own session, whose
// raw token the admin's browser kept (adminToken). It fails with ErrNotImpersonating for a
// session no admin opened, and ErrSessionNotFound when adminToken is not that admin's live
// session.
func (s *Service) StopImpersonating(ctx context.Context, st *SessionState, adminToken string) (*SessionState, error) {
	if st == nil || st.Session.ImpersonatedBy == nil {
		return nil, ErrNotImpersonating
	}
	admin, err := s.Session(ctx, SessionQuery{Token: adminToken, FromDatabase: true})
	if err != nil {
		return nil, err
	}
	if admin == nil || admin.User.ID != *st.Session.ImpersonatedBy || admin.Session.ImpersonatedBy != nil {
		return nil, ErrSessionNotFound
	}
	if err := s.SignOut(ctx, st.Token); err != nil {
		return nil, err
	}
	s.record(ctx, AuditImpersonationStopped, admin.User.ID, st.User.ID, map[string]any{"session": st.Session.ID})
	return admin, nil
}

// Permissions are the admin plugin's statements a caller may hold: resource → actions.
type Permissions map[string][]string

// adminStatements are what the admin role may do; the user role may do none of it.
var adminStatements = Permissions{
	"user":    {"create", "list", "set-role", "ban", "impersonate", "delete", "set-password", "get", "update"},
	"session": {"list", "revoke", "delete"},
}

// HasPermission reports whether a role value grants every permission asked: the admin role
// grants the admin plugin's statements, the user role none. A resource or action the service
// does not have is granted to nobody.
func HasPermission(role string, asked Permissions) bool {
	if len(asked) == 0 || !slices.Contains(Roles(role), RoleAdmin) {
		return false
	}
	for resource, actions := range asked {
		known, ok := adminStatements[resource]
		if !ok {
			return false
		}
		for _, a := range actions {
			if !slices.Contains(known, a) {
				return false
			}
		}
	}
	return true
}
