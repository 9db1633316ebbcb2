package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The admin's statements: the user list with its search, filter, sort and page, roles, bans and
// the immediate removal of an account.

// UserField is a column of the users table the admin's list may search, filter or sort by.
type UserField string

// The fields of UserQuery.
const (
	UserFieldID            UserField = "id"
	UserFieldEmail         UserField = "email"
	UserFieldName          UserField = "name"
	UserFieldEmailVerified UserField = "email_verified"
	UserFieldRole          UserField = "role"
	UserFieldBanned        UserField = "banned"
	UserFieldBanExpires    UserField = "ban_expires"
	UserFieldCreatedAt     UserField = "created_at"
	UserFieldUpdatedAt     UserField = "updated_at"
)

// Operator compares a field with a value in a UserCondition.
type Operator string

// The operators of UserCondition: comparisons, membership, and the text matches, which ignore
// case and take the value literally (no wildcards).
const (
	OpEq         Operator = "eq"
	OpNe         Operator = "ne"
	OpLt         Operator = "lt"
	OpLte        Operator = "lte"
	OpGt         Operator = "gt"
	OpGte        Operator = "gte"
	OpIn         Operator = "in"
	OpNotIn      Operator = "not_in"
	OpContains   Operator = "contains"
	OpStartsWith Operator = "starts_with"
	OpEndsWith   Operator = "ends_with"
)

// UserCondition is one condition on the user list: Field Op Value. Value is a string, a bool, an
// int64 or a time.Time, or a []any of those for OpIn and OpNotIn; the text operators take a
// string.
type UserCondition struct {
	Field UserField
	Op    Operator
	Value any
}

// UserQuery asks for a page of the live accounts matching every condition, sorted by SortBy
// (then by id, so pages never overlap), Limit of them from Offset.
type UserQuery struct {
	Where  []UserCondition
	SortBy UserField
	Desc   bool
	Limit  int
	Offset int
}

// ListUsers returns the page q asks for and how many accounts match in all.
func (s *Store) ListUsers(ctx context.Context, q UserQuery) ([]User, int64, error) {
	where := func() (*gorm.DB, error) {
		db := s.db.WithContext(ctx).Model(&User{})
		for _, c := range q.Where {
			sql, args, err := c.sql()
			if err != nil {
				return nil, err
			}
			db = db.Where(sql, args...)
		}
		return db, nil
	}
	db, err := where()
	if err != nil {
		return nil, 0, err
	}
	var total int64
	if err := db.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("models: counting accounts: %w", err)
	}
	if db, err = where(); err != nil {
		return nil, 0, err
	}
	sortBy := q.SortBy
	if sortBy == "" {
		sortBy = UserFieldCreatedAt
	}
	if !sortBy.valid() {
		return nil, 0, fmt.Errorf("models: sorting accounts by %q: %w", sortBy, ErrInvalidQuery)
	}
	var users []User
	err = db.Order(clause.OrderByColumn{Column: clause.Column{Name: string(sortBy)}, Desc: q.Desc}).
		Order(clause.OrderByColumn{Column: clause.Column{Name: "id"}, Desc: q.Desc}).
		Limit(q.Limit).Offset(q.Offset).Find(&users).Error
	if err != nil {
		return nil, 0, fmt.Errorf("models: listing accounts: %w", err)
	}
	for i := range users {
		users[i].utc()
	}
	return users, total, nil
}

// text reports whether f is a text column, the only kind the text operators (contains,
// starts_with, ends_with) compare: PostgreSQL has no LOWER of a uuid, a boolean or a time.
func (f UserField) text() bool {
	return f == UserFieldEmail || f == UserFieldName || f == UserFieldRole
}

func (f UserField) valid() bool {
	switch f {
	case UserFieldID, UserFieldEmail, UserFieldName, UserFieldEmailVerified, UserFieldRole, UserFieldBanned,
		UserFieldBanExpires, UserFieldCreatedAt, UserFieldUpdatedAt:
		return true
	}
	return false
}

// sql is the condition as a WHERE clause of a whitelisted column and bound values.
func (c UserCondition) sql() (string, []any, error) {
	if !c.Field.valid() {
		return "", nil, fmt.Errorf("models: a condition on %q: %w", c.Field, ErrInvalidQuery)
	}
	col := string(c.Field)
	switch c.Op {
	case OpEq, OpNe, OpLt, OpLte, OpGt, OpGte:
		if _, list := c.Value.([]any); list {
			break
		}
		return col + " " + map[Operator]string{OpEq: "=", OpNe: "<>", OpLt: "<", OpLte: "<=", OpGt: ">", OpGte: ">="}[c.Op] + " ?",
			[]any{c.Value}, nil
	case OpIn, OpNotIn:
		values, ok := c.Value.([]any)
		if !ok || len(values) == 0 {
			break
		}
		if c.Op == OpIn {
			return col + " IN ?", []any{values}, nil
		}
		return col + " NOT IN ?", []any{values}, nil
	case OpContains, OpStartsWith, OpEndsWith:
		text, ok := c.Value.(string)
		if !ok || !c.Field.text() {
			break
		}
		pattern := likeEscaper.Replace(strings.ToLower(text))
		switch c.Op {
		case OpContains:
			pattern = "%" + pattern + "%"
		case OpStartsWith:
			pattern += "%"
		default:
			pattern = "%" + pattern
		}
		return "LOWER(" + col + `) LIKE ? ESCAPE '\'`, []any{pattern}, nil
	}
	return "", nil, fmt.Errorf("models: %q with %T on %q: %w", c.Op, c.Value, c.Field, ErrInvalidQuery)
}

// likeEscaper makes text match itself in a LIKE pattern whose escape character is '\'.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// utc reads the account's times in UTC, as both databases hand them back in their own zones.
func (u *User) utc() {
	u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
	if u.BanExpires != nil {
		t := u.BanExpires.UTC()
		u.BanExpires = &t
	}
}

// SetRole sets the live account id's role, and returns the account and the sessions that ended:
// an account that loses the admin role loses the sessions it opened as others (impersonations).
// With keepAdmin it refuses (ErrLastAdmin) to take the role from the last admin in force.
// ErrNotFound when there is no such account.
func (s *Store) SetRole(ctx context.Context, id, role string, now time.Time, keepAdmin bool) (User, []string, error) {
	var u User
	var ended []string
	demoted := !slices.Contains(strings.Split(role, ","), RoleAdmin)
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		if keepAdmin && demoted {
			if err := keepAnAdmin(tx, id, now); err != nil {
				return err
			}
		}
		var err error
		if u, err = updateUserIn(tx, id, map[string]any{"role": role, "updated_at": now}); err != nil {
			return err
		}
		if demoted {
			ended, err = endImpersonations(tx, id, ReasonRevokedByAdmin)
		}
		return err
	})
	return u, ended, err
}

// keepAnAdmin refuses (ErrLastAdmin) a change that would leave no admin in force when id is the
// only one: an account with the admin role and no ban in force. It locks those accounts' rows
// (in id order, so two such changes cannot deadlock), so of two admins banning or demoting each
// other at once the second sees the first's change and is refused.
func keepAnAdmin(tx *gorm.DB, id string, now time.Time) error {
	var admins []string
	err := forUpdate(tx.Model(&User{})).
		Where("(',' || role || ',') LIKE ? AND (banned = ? OR ban_expires <= ?)", "%,"+RoleAdmin+",%", false, now).
		Order("id").Pluck("id", &admins).Error
	if err != nil {
		return fmt.Errorf("models: reading the admins: %w", err)
	}
	if len(admins) == 1 && admins[0] == id {
		return ErrLastAdmin
	}
	return nil
}

// updateUser applies set to the live account id and reads it back, in one transaction.
func (s *Store) updateUser(ctx context.Context, id string, set map[string]any) (User, error) {
	var u User
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var err error
		u, err = updateUserIn(tx, id, set)
		return err
	})
	return u, err
}

// updateUserIn applies set to the live account id inside tx and reads it back; ErrNotFound when
// there is none.
func updateUserIn(tx *gorm.DB, id string, set map[string]any) (User, error) {
	res := tx.Model(&User{}).Where("id = ?", id).Updates(set)
	if res.Error != nil {
		return User{}, fmt.Errorf("models: changing an account: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return User{}, ErrNotFound
	}
	return readUser(tx, id)
}

// Ban bans the live account id (reason and expires may be nil: no reason given, for good) and
// ends every session of it, in one transaction, returning the account and the sessions ended.
// The account's row is written before its sessions are deleted, so a sign-in under way either
// finished first (and its session is among those deleted) or waits for the ban and sees it. The
// sessions an admin opened as others (impersonations) end too. With keepAdmin it refuses
// (ErrLastAdmin) to ban the last admin in force.
func (s *Store) Ban(ctx context.Context, id string, reason *string, expires *time.Time, now time.Time, keepAdmin bool) (User, []string, error) {
	var u User
	var ended []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		if keepAdmin {
			if err := keepAnAdmin(tx, id, now); err != nil {
				return err
			}
		}
		res := tx.Model(&User{}).Where("id = ?", id).
			Updates(map[string]any{"banned": true, "ban_reason": reason, "ban_expires": expires, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("models: banning an account: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrNotFound
		}
		note(tx, Event{Type: EventUserBanned, UserID: id, Data: map[string]any{"reason": reason, "expiresAt": expires}})
		var err error
		if ended, err = endSessions(tx, id, "", ReasonBanned); err != nil {
			return err
		}
		u, err = readUser(tx, id)
		return err
	})
	return u, ended, err
}

// Unban lifts the ban of the live account id; ErrNotFound when there is none.
func (s *Store) Unban(ctx context.Context, id string, now time.Time) (User, error) {
	return s.updateUser(ctx, id, map[string]any{"banned": false, "ban_reason": nil, "ban_expires": nil, "updated_at": now})
}

// RemoveAccount erases the account id at once, whether live or in its deletion grace period, as
// the purge of a deleted account does (purgeUsers), and returns its sessions, and those it
// opened as others (impersonations), which ended with it; ErrNotFound when there is no such
// account. With keepAdmin it refuses (ErrLastAdmin) to remove the last admin in force.
func (s *Store) RemoveAccount(ctx context.Context, id string, now time.Time, keepAdmin bool) ([]string, error) {
	var ended []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		if keepAdmin {
			if err := keepAnAdmin(tx, id, now); err != nil {
				return err
			}
		}
		var users []User
		if err := forUpdate(tx.Unscoped()).Where("id = ?", id).Find(&users).Error; err != nil {
			return fmt.Errorf("models: locking an account to remove: %w", err)
		}
		if len(users) == 0 {
			return ErrNotFound
		}
		var err error
		if ended, err = endSessions(tx, id, "", ReasonAccountRemoved); err != nil {
			return err
		}
		return eraseUsers(tx, users)
	})
	return ended, err
}

// EndSessionByHandle deletes the session with the id, or, when id is "", the one whose token
// hashes to tokenHash, whichever account it belongs to, and returns its id and its account's;
// "" when there is none.
func (s *Store) EndSessionByHandle(ctx context.Context, id, tokenHash string) (ended, userID string, err error) {
	query, key := "DELETE FROM sessions WHERE id = ? RETURNING id", id
	if id == "" {
		query, key = "DELETE FROM sessions WHERE token = ? RETURNING id", tokenHash
	}
	var found []struct{ ID, UserID string }
	err = s.emitting(ctx, func(db *gorm.DB) error {
		if err := db.Raw(query+", user_id", key).Scan(&found).Error; err != nil {
			return fmt.Errorf("models: ending a session: %w", err)
		}
		for _, e := range found {
			note(db, revokedEvents(e.UserID, ReasonRevokedByAdmin, []string{e.ID})...)
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return "", "", err
	}
	return found[0].ID, found[0].UserID, nil
}

// CreateSession stores a session opened outside a sign-in (an admin's impersonation) for a live
// account not banned at now and not an admin; ErrNotFound when the account is not live,
// ErrBanned when a ban is in force, ErrIsAdmin when it is an admin. For an impersonation, the
// admin (sess.ImpersonatedBy) must still be a live admin in force: ErrNoAuthority otherwise.
func (s *Store) CreateSession(ctx context.Context, sess Session, now time.Time) error {
	return s.transaction(ctx, func(tx *gorm.DB) error {
		// Both accounts' rows are locked and read here (in id order, as keepAnAdmin locks), so a
		// ban, demotion or removal of either under way either finished first (and is seen here)
		// or waits for the session and ends it.
		ids := []string{sess.UserID}
		if sess.ImpersonatedBy != nil {
			ids = append(ids, *sess.ImpersonatedBy)
		}
		var users []User
		if err := forUpdate(tx.Model(&User{})).Select("id", "role", "banned", "ban_expires").Where("id IN ?", ids).Order("id").Find(&users).Error; err != nil {
			return fmt.Errorf("models: reading an account: %w", err)
		}
		banned := func(u User) bool { return u.Banned && (u.BanExpires == nil || u.BanExpires.After(now)) }
		isAdmin := func(u User) bool { return slices.Contains(strings.Split(u.Role, ","), RoleAdmin) }
		var target, admin *User
		for i := range users {
			if users[i].ID == sess.UserID {
				target = &users[i]
			}
			if sess.ImpersonatedBy != nil && users[i].ID == *sess.ImpersonatedBy {
				admin = &users[i]
			}
		}
		switch {
		case target == nil:
			return ErrNotFound
		case banned(*target):
			return ErrBanned
		case sess.ImpersonatedBy != nil && isAdmin(*target):
			return ErrIsAdmin
		case sess.ImpersonatedBy != nil && (admin == nil || !isAdmin(*admin) || banned(*admin)):
			return ErrNoAuthority
		}
		if err := tx.Create(&sess).Error; err != nil {
			return fmt.Errorf("models: creating a session: %w", err)
		}
		note(tx, sessionCreated(sess))
		return nil
	})
}
