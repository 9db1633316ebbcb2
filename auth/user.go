package auth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"unicode/utf8"

	"codeauth/models"
)

// MaxNameLength is the longest display name accepted, in characters.
const MaxNameLength = 100

// maxImageURLLength bounds the profile image URL.
const maxImageURLLength = 2048

// ValidateName returns the name trimmed of surrounding spaces, or a FieldError. A name is shown
// to people and written to logs, so what could forge a line, disguise text or render as nothing
// is refused: control characters, line and paragraph separators, and every invisible format
// character (Unicode's Cf: bidirectional controls, zero-width spaces, U+FEFF, the soft hyphen,
// U+2060-U+2064, tag characters) with the other default-ignorable code points (Hangul fillers,
// U+034F) and unassigned code points. Two kinds are needed by real names and allowed where they do their work (names.go):
// the zero-width joiner and non-joiner inside words of the scripts that use them and in emoji
// sequences, and variation selectors after a visible character. A name that is not empty must
// have at least one visible character, so no combination renders blank.
func ValidateName(name string) (string, error) {
	return validateText("name", name, MaxNameLength)
}

// validateText returns text, the value of field, trimmed of surrounding spaces, or a FieldError:
// at most max characters, held to ValidateName's rules.
func validateText(field, text string, max int) (string, error) {
	text = strings.TrimSpace(text)
	if !utf8.ValidString(text) {
		return "", &FieldError{Field: field, Reason: ReasonInvalidUTF8, Max: max}
	}
	if utf8.RuneCountInString(text) > max {
		return "", &FieldError{Field: field, Reason: ReasonTooLong, Max: max}
	}
	runes := []rune(text)
	visible := false
	for i, r := range runes {
		if !nameRuneAllowed(runes, i) {
			return "", &FieldError{Field: field, Reason: ReasonInvisible, Max: max}
		}
		visible = visible || visibleRune(r)
	}
	if text != "" && !visible {
		return "", &FieldError{Field: field, Reason: ReasonNoVisible, Max: max}
	}
	return text, nil
}

// validateImage accepts an absolute http(s) URL of at most maxImageURLLength characters once
// encoded (the form that is stored).
func validateImage(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", &FieldError{Field: "image", Reason: ReasonNotHTTPURL}
	}
	if s := u.String(); len(s) <= maxImageURLLength {
		return s, nil
	}
	return "", &FieldError{Field: "image", Reason: ReasonTooLong, Max: maxImageURLLength}
}

// UserUpdate is a change to a user's profile; nil fields stay as they are.
type UserUpdate struct {
	Name *string
	// Image, when SetImage is true, replaces the image URL; nil clears it.
	SetImage bool
	Image    *string
}

// UpdateUser applies u to the user and returns the updated account.
func (s *Service) UpdateUser(ctx context.Context, userID string, u UserUpdate) (models.User, error) {
	c := models.UserChanges{SetImage: u.SetImage, UpdatedAt: s.now()}
	if u.Name != nil {
		name, err := ValidateName(*u.Name)
		if err != nil {
			return models.User{}, err
		}
		c.Name = &name
	}
	if u.SetImage && u.Image != nil {
		img, err := validateImage(*u.Image)
		if err != nil {
			return models.User{}, err
		}
		c.Image = &img
	}
	user, err := s.store.UpdateUser(ctx, userID, c)
	if errors.Is(err, models.ErrNotFound) {
		return models.User{}, ErrUserNotFound
	}
	return user, err
}

// The roles of better-auth's admin plugin. An account is created a user; AUTH_ADMIN_EMAILS and
// set-role make admins.
const (
	RoleUser  = models.RoleUser
	RoleAdmin = models.RoleAdmin
)
