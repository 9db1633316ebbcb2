package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"

	"codeauth/models"

	"github.com/google/uuid"
)

// Link tokens: the one-time links of the address change (to the new address) and of its undo (to
// the old one). A link is a code row like any other (models.Verification), with a 256-bit secret
// in place of the short code.

// restoreSubject is the subject of the restore link of one old address of the user: each old
// address keeps its own link.
func restoreSubject(userID, oldEmail string) string { return userID + ":" + oldEmail }

// newLink makes a link token for purpose and subject, sent to email, and the row that stores it
// (replacing any live one for purpose and subject). The token is "<row id>.<32 random bytes,
// base64url>"; only an HMAC of the secret is kept, bound to purpose, subject, email and bind.
func (s *Service) newLink(purpose, subject, email, bind string, ttl time.Duration) (string, models.Verification, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", models.Verification{}, err
	}
	secret := base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	v := models.Verification{
		ID: newID(), Purpose: purpose, Subject: subject, Email: email,
		CodeHash: s.keys.codeHash(purpose, subject, email+"\x00"+bind, secret), ExpiresAt: now.Add(ttl), CreatedAt: now,
	}
	return v.ID + "." + secret, v, nil
}

// findLink looks a link token up by its id; the caller checks the secret.
func (s *Service) findLink(ctx context.Context, purpose, token string) (*models.Verification, string, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || uuid.Validate(id) != nil || !wellFormedToken(secret) {
		return nil, "", ErrInvalidToken
	}
	v, err := s.store.CodeByID(ctx, id, purpose)
	if err != nil {
		return nil, "", notFoundAs(err, ErrInvalidToken, "reading a link")
	}
	if !s.now().Before(v.ExpiresAt) {
		return nil, "", ErrTokenExpired
	}
	return &v, secret, nil
}
