package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"codeauth/models"
)

// cacheVersion is bumped whenever the payload changes shape; older caches are then ignored.
const cacheVersion = 1

// cachePayload is what the session_data cookie holds: enough to answer for the session and its
// user without the database, for CookieCacheTTL.
type cachePayload struct {
	V   int          `json:"v"`
	Exp int64        `json:"e"` // unix microseconds after which the cache is stale
	S   cacheSession `json:"s"`
	U   cacheUser    `json:"u"`
}

type cacheSession struct {
	ID        string `json:"i"`
	UserID    string `json:"u"`
	ExpiresAt int64  `json:"e"`
	Absolute  int64  `json:"a"`
	IP        string `json:"ip,omitempty"`
	UA        string `json:"ua,omitempty"`
	CreatedAt int64  `json:"c"`
	UpdatedAt int64  `json:"m"`
}

type cacheUser struct {
	Email         string  `json:"e"`
	Name          string  `json:"n"`
	EmailVerified bool    `json:"v"`
	Image         *string `json:"i,omitempty"`
	CreatedAt     int64   `json:"c"`
	UpdatedAt     int64   `json:"m"`
}

// EncodeCache seals st into a session_data cookie value valid for CookieCacheTTL.
//
// The value is AES-256-GCM with a key derived from AUTH_SECRET: authenticated like a signature,
// and also unreadable, so the e-mail and IP address inside are not exposed in cleartext. The
// session token is the additional authenticated data: the cache opens only next to the very
// session cookie it was made for, and it never contains the token itself.
func (s *Service) EncodeCache(st *SessionState) (string, error) {
	p := cachePayload{
		V:   cacheVersion,
		Exp: s.now().Add(CookieCacheTTL).UnixMicro(),
		S: cacheSession{
			ID: st.Session.ID, UserID: st.Session.UserID,
			ExpiresAt: st.Session.ExpiresAt.UnixMicro(), Absolute: st.Session.AbsoluteExpiresAt.UnixMicro(),
			IP: st.Session.IPAddress, UA: st.Session.UserAgent,
			CreatedAt: st.Session.CreatedAt.UnixMicro(), UpdatedAt: st.Session.UpdatedAt.UnixMicro(),
		},
		U: cacheUser{
			Email: st.User.Email, Name: st.User.Name, EmailVerified: st.User.EmailVerified, Image: st.User.Image,
			CreatedAt: st.User.CreatedAt.UnixMicro(), UpdatedAt: st.User.UpdatedAt.UnixMicro(),
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the value is sealed, never shown; escaping only makes it larger
	if err := enc.Encode(p); err != nil {
		return "", err
	}
	plain := buf.Bytes()
	if base64.RawURLEncoding.EncodedLen(len(plain)+28) > maxCacheLength {
		// A very long image URL or user agent: browsers would drop a cookie this big, so there
		// is no cache and the database answers.
		return "", ErrCacheTooLarge
	}
	aead := s.keys.cache
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", err
	}
	out = aead.Seal(out, out, plain, []byte(st.Token))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// maxCacheLength is the longest session_data value made or read: with its name and attributes
// the cookie stays under the 4096 bytes browsers keep. It also bounds the work spent on a value
// before it is authenticated.
const maxCacheLength = 3900

// ErrCacheTooLarge means the session is too big for the cookie cache; it is simply not cached.
var ErrCacheTooLarge = errors.New("auth: session too large for the cookie cache")

// decodeCache opens a session_data value made for token. It fails for anything tampered with,
// made with another key or for another token, stale, or for a session past its expiry.
func (s *Service) decodeCache(value, token string, now time.Time) (*SessionState, bool) {
	if len(value) > maxCacheLength {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	aead := s.keys.cache
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, false
	}
	nonce, sealed := raw[:aead.NonceSize()], raw[aead.NonceSize():]
	plain, err := aead.Open(sealed[:0], nonce, sealed, []byte(token))
	if err != nil {
		return nil, false
	}
	var p cachePayload
	if err := json.Unmarshal(plain, &p); err != nil || p.V != cacheVersion {
		return nil, false
	}
	micro := now.UnixMicro()
	if micro >= p.Exp || micro >= p.S.ExpiresAt || micro >= p.S.Absolute {
		return nil, false
	}
	t := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	return &SessionState{
		Token:  token,
		Cached: true,
		Session: models.Session{
			ID: p.S.ID, UserID: p.S.UserID, ExpiresAt: t(p.S.ExpiresAt), AbsoluteExpiresAt: t(p.S.Absolute),
			IPAddress: p.S.IP, UserAgent: p.S.UA, CreatedAt: t(p.S.CreatedAt), UpdatedAt: t(p.S.UpdatedAt),
		},
		User: models.User{
			ID: p.S.UserID, Email: p.U.Email, Name: p.U.Name, EmailVerified: p.U.EmailVerified, Image: p.U.Image,
			CreatedAt: t(p.U.CreatedAt), UpdatedAt: t(p.U.UpdatedAt),
		},
	}, true
}
