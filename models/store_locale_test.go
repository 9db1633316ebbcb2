package models

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"
)

// An account's language: set by the sign-up, kept by later sign-ins whatever their language,
// taken from the next sign-in by an account that has none, changed by SetUserLocale; and a code
// send makes its e-mail in the language of the address's account, or "" for an address without.
func TestStoreKeepsTheAccountsLanguage(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		signIn := func(email, locale string) User {
			t.Helper()
			v := testCode(email, now)
			db.Create(&v)
			in := testSignIn(email, v, now)
			in.Fresh.Locale = locale
			done, err := s.CompleteSignIn(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			return done.User
		}
		if u := signIn("de@x.io", "de"); u.Locale != "de" {
			t.Fatalf("sign-up: %q", u.Locale)
		}
		if u := signIn("de@x.io", "fr"); u.Locale != "de" {
			t.Fatalf("a later sign-in in French changed the account's language to %q", u.Locale)
		}
		// An account made before accounts had a language.
		old := User{ID: "00000000-0000-4000-8000-000000000001", Email: "old@x.io", Name: "", EmailVerified: true, CreatedAt: now, UpdatedAt: now}
		if err := db.Create(&old).Error; err != nil {
			t.Fatal(err)
		}
		if u := signIn("old@x.io", "es"); u.Locale != "es" {
			t.Fatalf("an account without a language signing in in Spanish: %q", u.Locale)
		}
		u := signIn("de@x.io", "de")
		if err := s.SetUserLocale(ctx, u.ID, "fr"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.User(ctx, u.ID); got.Locale != "fr" || !got.UpdatedAt.Equal(u.UpdatedAt) {
			t.Fatalf("after SetUserLocale: %q, updated %v (was %v)", got.Locale, got.UpdatedAt, u.UpdatedAt)
		}
		if err := s.SetUserLocale(ctx, "00000000-0000-4000-8000-000000000009", "fr"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no such account: %v", err)
		}

		for email, want := range map[string]string{"de@x.io": "fr", "nobody@x.io": ""} {
			var got []string
			send := SendCode{
				Count: Count{Key: "send:" + email, ResetAt: now.Add(time.Minute), Now: now},
				Limit: 5, Code: testCode(email, now), MaxAttempts: 5,
				Mail: func(locale string) (OutboxMessage, error) {
					got = append(got, locale)
					return testMail(email, "sign-in-code:"+email, now), nil
				},
			}
			if _, err := s.IssueCode(ctx, send); err != nil {
				t.Fatal(err)
			}
			// A resend of the live code is made in the same language.
			send.Code, send.Reuse = testCode(email, now), func(_ Verification, locale string) (OutboxMessage, error) {
				got = append(got, "reuse:"+locale)
				return testMail(email, "sign-in-code:"+email, now), nil
			}
			db.Model(&Verification{}).Where("email = ?", email).Update("sealed_code", []byte("sealed"))
			if _, err := s.IssueCode(ctx, send); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0] != want || got[1] != "reuse:"+want {
				t.Fatalf("%s: the e-mails were made in %q, want %q", email, got, want)
			}
		}
	})
}
