package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// tokenBytes is the size of a session token: 256 bits from crypto/rand.
const tokenBytes = 32

// tokenLength is the length of a token in its base64url form.
var tokenLength = base64.RawURLEncoding.EncodedLen(tokenBytes)

// newToken returns a fresh session token and the hash stored for it.
func newToken() (token, hash string, err error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("auth: reading random bytes: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, hashToken(token), nil
}

// hashToken is what the sessions table stores: SHA-256 of the token, base64url. A plain hash is
// enough because the token has 256 bits of entropy; it also keeps the lookup one indexed query.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// WellFormedToken reports whether s has the shape of a token this service issues, so garbage is
// turned away before any hashing, signature check or database work.
func WellFormedToken(s string) bool {
	if len(s) != tokenLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// wellFormedToken is WellFormedToken. The domain's callers keep this name until the storage move
// of issue 14 has landed, so the two changes do not edit the same lines.
func wellFormedToken(s string) bool { return WellFormedToken(s) }
