package models

import (
	"context"
	"fmt"
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

// SetRole sets the live account id's role; ErrNotFound when there is none.
func (s *Store) SetRole(ctx context.Context, id, role string, now time.Time) (User, error) {
	return s.updateUser(ctx, id, map[string]any{"role": role, "updated_at": now})
}

// updateUser applies set to the live account id and reads it back, in one transaction.
func (s *Store) updateUser(ctx context.Context, id string, set map[string]any) (User, error) {
	var u User
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&User{}).Where("id = ?", id).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("models: changing an account: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrNotFound
		}
		var err error
		u, err = readUser(tx, id)
		return err
	})
	return u, err
}

// Ban bans the live account id (reason and expires may be nil: no reason given, for good) and
// ends every session of it, in one transaction, returning the account and the sessions ended.
// The account's row is written before its sessions are deleted, so a sign-in under way either
// finished first (and its session is among those deleted) or waits for the ban and sees it.
func (s *Store) Ban(ctx context.Context, id string, reason *string, expires *time.Time, now time.Time) (User, []string, error) {
	var u User
	var ended []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
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
// the purge of a deleted account does (purgeUsers), and returns its sessions, which ended with
// it; ErrNotFound when there is no such account.
func (s *Store) RemoveAccount(ctx context.Context, id string) ([]string, error) {
	var ended []string
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var users []User
		if err := forUpdate(tx.Unscoped()).Where("id = ?", id).Find(&users).Error; err != nil {
			return fmt.Errorf("models: locking an account to remove: %w", err)
		}
		if len(users) == 0 {
			return ErrNotFound
		}
		if err := tx.Model(&Session{}).Where("user_id = ?", id).Pluck("id", &ended).Error; err != nil {
			return fmt.Errorf("models: reading the sessions of an account to remove: %w", err)
		}
		note(tx, revokedEvents(id, ReasonAccountRemoved, ended)...)
		return eraseUsers(tx, users)
	})
	return ended, err
}

// EndSessionByHandle deletes the session with the id, or, when id is "", the one whose token
// hashes to tokenHash, whichever account it belongs to, and returns its id; "" when there is
// none.
func (s *Store) EndSessionByHandle(ctx context.Context, id, tokenHash string) (string, error) {
	query, key := "DELETE FROM sessions WHERE id = ? RETURNING id", id
	if id == "" {
		query, key = "DELETE FROM sessions WHERE token = ? RETURNING id", tokenHash
	}
	var ended []struct{ ID, UserID string }
	err := s.emitting(ctx, func(db *gorm.DB) error {
		if err := db.Raw(query+", user_id", key).Scan(&ended).Error; err != nil {
			return fmt.Errorf("models: ending a session: %w", err)
		}
		for _, e := range ended {
			note(db, revokedEvents(e.UserID, ReasonRevokedByAdmin, []string{e.ID})...)
		}
		return nil
	})
	if err != nil || len(ended) == 0 {
		return "", err
	}
	return ended[0].ID, nil
}

// CreateSession stores a session opened outside a sign-in (an admin's impersonation) for a live
// account; ErrNotFound when the account is not live.
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	return s.transaction(ctx, func(tx *gorm.DB) error {
		// The account's row is locked, so a ban or a removal under way either finished first
		// (and the account is refused here) or waits for the session and ends it.
		var ids []string
		if err := forUpdate(tx.Model(&User{})).Where("id = ?", sess.UserID).Pluck("id", &ids).Error; err != nil {
			return fmt.Errorf("models: reading an account: %w", err)
		}
		if len(ids) == 0 {
			return ErrNotFound
		}
		if err := tx.Create(&sess).Error; err != nil {
			return fmt.Errorf("models: creating a session: %w", err)
		}
		note(tx, sessionCreated(sess))
		return nil
	})
}
