package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"sync"
	"time"

	"codeauth/models"
)

// cacheVersion is the first byte of every cache payload; it is bumped whenever the layout
// changes, and caches of another version are ignored (the database answers and a new cache is
// made). Version 1 was JSON; version 2 is the binary layout below, which decodes several times
// faster: the cookie cache answers most browser requests, so its decoding is the hot path.
// Version 3 adds the role and the impersonator.
const cacheVersion = 3

// The version 3 payload, sealed (see EncodeCache):
//
//	version                       1 byte
//	flags                         1 byte: cacheVerified, cacheHasImage, cacheImpersonated
//	7 times, zig-zag varints      cache expiry, session expiry, absolute expiry, session
//	                              created and updated, user created and updated (unix µs)
//	7 to 9 strings, each a        session id, user id, IP address, user agent, e-mail, name,
//	uvarint length and its bytes  role, then the image URL and the impersonating admin's id
//	                              when there are
const (
	cacheVerified = 1 << iota
	cacheHasImage
	cacheImpersonated
)

// cacheStrings is the most strings a payload holds.
const cacheStrings = 9

// EncodeCache seals st into a session_data cookie value valid for CookieCacheTTL.
//
// The value is AES-256-GCM with a key derived from AUTH_SECRET: authenticated like a signature,
// and also unreadable, so the e-mail and IP address inside are not exposed in cleartext. The
// session token is the additional authenticated data: the cache opens only next to the very
// session cookie it was made for, and it never contains the token itself.
func (s *Service) EncodeCache(st *SessionState) (string, error) {
	sess, user := &st.Session, &st.User
	flags := byte(0)
	if user.EmailVerified {
		flags |= cacheVerified
	}
	strs := make([]string, 0, cacheStrings)
	strs = append(strs, sess.ID, sess.UserID, sess.IPAddress, sess.UserAgent, user.Email, user.Name, user.Role)
	if user.Image != nil {
		flags |= cacheHasImage
		strs = append(strs, *user.Image)
	}
	if sess.ImpersonatedBy != nil {
		flags |= cacheImpersonated
		strs = append(strs, *sess.ImpersonatedBy)
	}
	size := 2 + 7*binary.MaxVarintLen64
	for _, str := range strs {
		size += binary.MaxVarintLen64 + len(str)
	}
	aead := s.keys.cache
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+size+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", err
	}
	plain := append(out[len(out):], cacheVersion, flags)
	for _, t := range []time.Time{s.now().Add(CookieCacheTTL), sess.ExpiresAt, sess.AbsoluteExpiresAt, sess.CreatedAt,
		sess.UpdatedAt, user.CreatedAt, user.UpdatedAt} {
		plain = binary.AppendVarint(plain, t.UnixMicro())
	}
	for _, str := range strs {
		plain = binary.AppendUvarint(plain, uint64(len(str)))
		plain = append(plain, str...)
	}
	if base64.RawURLEncoding.EncodedLen(aead.NonceSize()+len(plain)+aead.Overhead()) > maxCacheLength {
		// A very long image URL or user agent: browsers would drop a cookie this big, so there
		// is no cache and the database answers.
		return "", ErrCacheTooLarge
	}
	out = aead.Seal(out, out, plain, []byte(st.Token))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// maxCacheLength is the longest session_data value made or read: with its name and attributes
// the cookie stays under the 4096 bytes browsers keep. It also bounds the work spent on a value
// before it is authenticated.
const maxCacheLength = 3900

// cacheBuffers hold decoded cache values while they are opened; the strings kept are copies.
var cacheBuffers = sync.Pool{New: func() any { b := make([]byte, maxCacheLength); return &b }}

// decodeCache opens a session_data value made for token. It fails for anything tampered with,
// made with another key or for another token or in another layout, stale, sealed before this
// process started (a session revoked before a restart is in no revocation list of this one), or
// for a session past its expiry. The state it returns shares no memory with value.
func (s *Service) decodeCache(value []byte, token string, now time.Time) (*SessionState, bool) {
	if len(value) > maxCacheLength {
		return nil, false
	}
	bp := cacheBuffers.Get().(*[]byte)
	defer cacheBuffers.Put(bp)
	buf := *bp
	n, err := base64.RawURLEncoding.Decode(buf, value)
	aead := s.keys.cache
	if err != nil || n < aead.NonceSize()+aead.Overhead() {
		return nil, false
	}
	nonce, sealed := buf[:aead.NonceSize()], buf[aead.NonceSize():n]
	plain, err := aead.Open(sealed[:0], nonce, sealed, []byte(token))
	if err != nil || len(plain) < 2 || plain[0] != cacheVersion {
		return nil, false
	}
	flags, rest := plain[1], plain[2:]
	var times [7]int64
	for i := range times {
		v, k := binary.Varint(rest)
		if k <= 0 {
			return nil, false
		}
		times[i], rest = v, rest[k:]
	}
	micro := now.UnixMicro()
	if micro >= times[0] || micro >= times[1] || micro >= times[2] || times[0]-CookieCacheTTL.Microseconds() < s.started.UnixMicro() {
		return nil, false
	}
	// One string holds every text field; the fields are slices of it.
	count := 7
	if flags&cacheHasImage != 0 {
		count++
	}
	if flags&cacheImpersonated != 0 {
		count++
	}
	all := string(rest)
	var strs [cacheStrings]string
	at := 0
	for i := 0; i < count; i++ {
		l, k := binary.Uvarint(rest[at:])
		if k <= 0 || l > uint64(len(rest)-at-k) {
			return nil, false
		}
		at += k
		strs[i] = all[at : at+int(l)]
		at += int(l)
	}
	if at != len(rest) {
		return nil, false
	}
	t := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	st := &SessionState{
		Token:    token,
		Cached:   true,
		CachedAt: t(times[0] - CookieCacheTTL.Microseconds()),
		Session: models.Session{
			ID: strs[0], UserID: strs[1], ExpiresAt: t(times[1]), AbsoluteExpiresAt: t(times[2]),
			IPAddress: strs[2], UserAgent: strs[3], CreatedAt: t(times[3]), UpdatedAt: t(times[4]),
		},
		User: models.User{
			ID: strs[1], Email: strs[4], Name: strs[5], EmailVerified: flags&cacheVerified != 0,
			CreatedAt: t(times[5]), UpdatedAt: t(times[6]), Role: strs[6],
		},
	}
	next := 7
	// Each optional field gets a string of its own to point to: a pointer into strs would move
	// the whole array to the heap on every read.
	if flags&cacheHasImage != 0 {
		image := strs[next]
		st.User.Image = &image
		next++
	}
	if flags&cacheImpersonated != 0 {
		by := strs[next]
		st.Session.ImpersonatedBy = &by
	}
	return st, true
}
