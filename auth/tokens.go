package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// tokenBytes is the size of a session token: 256 bits from crypto/rand.
const tokenBytes = 32

// tokenLength is the length of a token in its base64url form.
var tokenLength = base64.RawURLEncoding.EncodedLen(tokenBytes)

// signatureLength is the length of the padded standard-base64 HMAC-SHA256 signature.
var signatureLength = base64.StdEncoding.EncodedLen(sha256.Size)

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

// wellFormedToken reports whether s has the shape of a token this service issues, so garbage is
// turned away before any hashing or database work.
func wellFormedToken(s string) bool {
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

// SignToken returns the signed form of a token, "token.signature", carried by the session
// cookie (URL-encoded there) and by the set-auth-token header. The signature is the standard,
// padded base64 of HMAC-SHA256(AUTH_SECRET, token): better-auth's format.
func (s *Service) SignToken(token string) string {
	var sum [sha256.Size]byte
	return token + "." + base64.StdEncoding.EncodeToString(s.keys.cookie.sum(sum[:0], token))
}

// VerifySignedToken returns the token inside a signed value, or false when the value is not one
// this service signed. URL-encoded values (as cookies carry them) and decoded ones (as Expo and
// bearer clients send them) are both accepted; the signature may use either base64 alphabet.
func (s *Service) VerifySignedToken(value string) (string, bool) {
	if len(value) > 256 {
		return "", false
	}
	if strings.IndexByte(value, '%') >= 0 {
		decoded, err := url.PathUnescape(value)
		if err != nil {
			return "", false
		}
		value = decoded
	}
	dot := strings.LastIndexByte(value, '.')
	if dot < 0 {
		return "", false
	}
	token, sig := value[:dot], value[dot+1:]
	if !wellFormedToken(token) || len(sig) != signatureLength {
		return "", false
	}
	var got, want [sha256.Size + 2]byte // base64 decoding needs room for the padding's bytes
	n, err := base64.StdEncoding.Decode(got[:], []byte(sig))
	if err != nil {
		if n, err = base64.URLEncoding.Decode(got[:], []byte(sig)); err != nil {
			return "", false
		}
	}
	if !hmac.Equal(got[:n], s.keys.cookie.sum(want[:0], token)) {
		return "", false
	}
	return token, true
}

// BearerToken returns the token in an Authorization bearer credential, which may be the signed
// value of set-auth-token or the raw token of the sign-in response body.
func (s *Service) BearerToken(credential string) (string, bool) {
	if strings.IndexByte(credential, '.') >= 0 || strings.IndexByte(credential, '%') >= 0 {
		return s.VerifySignedToken(credential)
	}
	if wellFormedToken(credential) {
		return credential, true
	}
	return "", false
}
