package auth

import (
	"context"
	"errors"

	"codeauth/i18n"
	"codeauth/models"
)

// An account's language: the language of its e-mails. It is the language of the request that
// created the account, and changes when the person picks another with the pages' language
// switch. E-mails sent before an account exists (a sign-in code to a new address) are in the
// request's language.

// localeStore is the storage of an account's language: models.Store implements it.
type localeStore interface {
	SetUserLocale(ctx context.Context, id, locale string) error
}

// localeCode is code when the service speaks that language, else the default language's
// (AUTH_DEFAULT_LOCALE).
func (s *Service) localeCode(code string) string {
	if l, ok := i18n.Lookup(code); ok {
		return l.Code()
	}
	return s.defaultLocale
}

// accountLocale is the language of the account userID's e-mails, or "" when it has none (an
// account made before accounts had one), which the Composer writes in the default language.
func (s *Service) accountLocale(ctx context.Context, userID string) (string, error) {
	u, err := s.store.UserWithDeleted(ctx, userID)
	if err != nil {
		return "", notFoundAs(err, ErrUserNotFound, "reading an account's language")
	}
	return u.Locale, nil
}

// SetLocale makes code (a language the service speaks) the language of st's account's e-mails.
// A session an admin opened as the account cannot (ErrImpersonated): the language is the
// person's own.
func (s *Service) SetLocale(ctx context.Context, st *SessionState, code string) error {
	l, ok := i18n.Lookup(code)
	if !ok {
		return &FieldError{Field: "locale", Reason: ReasonUnknownLocale}
	}
	if st.Session.ImpersonatedBy != nil {
		return ErrImpersonated
	}
	err := s.store.SetUserLocale(ctx, st.User.ID, l.Code())
	if errors.Is(err, models.ErrNotFound) {
		return ErrUserNotFound
	}
	return err
}
