// Package credential is how a better-auth client carries its session: the cookie names, the
// set-auth-token header and the signed token format. It is a leaf of handlers/betterauth because
// the session transport (middleware.Sessions) reads and writes these too, and betterauth itself
// imports middleware: the names live here so both can use them without a cycle.
package credential

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/url"
	"strings"
	"sync"

	"codeauth/auth"
)

// The names better-auth clients and servers agree on.
const (
	// SetAuthTokenHeader carries the signed session token to bearer clients.
	SetAuthTokenHeader = "set-auth-token"
	// SetAuthJWTHeader carries a JWT of the session on every get-session answer that has one
	// (better-auth's jwt plugin), for clients that hand it to other back ends.
	SetAuthJWTHeader = "set-auth-jwt"
	// SecureCookiePrefix starts the cookie names over https, so browsers only accept the cookies
	// from a secure origin.
	SecureCookiePrefix = "__Secure-"
	// HostCookiePrefix starts the names of the cookies of our own (not better-auth's) that only
	// this host may set, over https: a browser accepts them only from a secure origin, for path /,
	// without a Domain.
	HostCookiePrefix = "__Host-"
	// TokenCookieSuffix follows the cookie prefix in the name of the cookie that holds the signed
	// token: "better-auth.session_token" under better-auth's default prefix.
	TokenCookieSuffix = ".session_token"
	// DataCookieSuffix follows the cookie prefix in the name of the cookie cache.
	DataCookieSuffix = ".session_data"
	// AdminCookieSuffix follows the cookie prefix in the name of the cookie that keeps an
	// admin's own signed session token while the admin impersonates someone (admin plugin).
	AdminCookieSuffix = ".admin_session"
	// BrowserCookieSuffix follows the cookie prefix in the name of the cookie that marks the
	// browser a sign-in code was asked from, for the code e-mail's sign-in link (ours, not
	// better-auth's).
	BrowserCookieSuffix = ".signin_browser"
)

// CookieNames returns the names of the session token cookie and of the cookie cache for the
// cookie prefix (AUTH_COOKIE_PREFIX); secure is true when the service is served over https.
func CookieNames(prefix string, secure bool) (token, data string) {
	if secure {
		prefix = SecureCookiePrefix + prefix
	}
	return prefix + TokenCookieSuffix, prefix + DataCookieSuffix
}

// AdminCookieName is the name of the admin session cookie for the cookie prefix.
func AdminCookieName(prefix string, secure bool) string {
	return cookieName(prefix, secure, AdminCookieSuffix)
}

// BrowserCookieName is the name of the sign-in link's browser cookie for the cookie prefix:
// over https marked __Host-, so that no other host of the domain (a sibling subdomain) can plant
// a value of its choosing in a browser for this site.
func BrowserCookieName(prefix string, secure bool) string {
	if secure {
		return HostCookiePrefix + prefix + BrowserCookieSuffix
	}
	return prefix + BrowserCookieSuffix
}

// cookieName is the prefix, marked __Secure- over https, and the suffix.
func cookieName(prefix string, secure bool, suffix string) string {
	if secure {
		prefix = SecureCookiePrefix + prefix
	}
	return prefix + suffix
}

// signatureLength is the length of the padded standard-base64 HMAC-SHA256 signature.
var signatureLength = base64.StdEncoding.EncodedLen(sha256.Size)

// Signer signs and verifies session tokens in better-auth's format, "token.signature": the
// signature is the standard, padded base64 of HMAC-SHA256(AUTH_SECRET, token). The secret itself
// is the key, not one derived from it, because that is what the tokens existing clients carry
// were signed with.
type Signer struct {
	// macs are reusable HMACs keyed with the secret: the check runs on every request, and keying
	// a fresh HMAC costs more than the hash itself.
	macs sync.Pool
}

// NewSigner returns the Signer for AUTH_SECRET.
func NewSigner(secret []byte) *Signer {
	key := append([]byte(nil), secret...)
	return &Signer{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// sum appends the HMAC of token to b.
func (s *Signer) sum(b []byte, token string) []byte {
	h := s.macs.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(token))
	b = h.Sum(b)
	s.macs.Put(h)
	return b
}

// Sign returns the signed form of a token, carried by the session cookie (URL-encoded there)
// and by the set-auth-token header.
func (s *Signer) Sign(token string) string {
	var sum [sha256.Size]byte
	return token + "." + base64.StdEncoding.EncodeToString(s.sum(sum[:0], token))
}

// Verify returns the token inside a signed value, or false when the value is not one this
// service signed. URL-encoded values (as cookies carry them) and decoded ones (as Expo and
// bearer clients send them) are both accepted; the signature may use either base64 alphabet.
func (s *Signer) Verify(value string) (string, bool) {
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
	if !auth.WellFormedToken(token) || len(sig) != signatureLength {
		return "", false
	}
	var got, want [sha256.Size + 2]byte // base64 decoding needs room for the padding's bytes
	n, err := base64.StdEncoding.Decode(got[:], []byte(sig))
	if err != nil {
		if n, err = base64.URLEncoding.Decode(got[:], []byte(sig)); err != nil {
			return "", false
		}
	}
	if !hmac.Equal(got[:n], s.sum(want[:0], token)) {
		return "", false
	}
	return token, true
}

// Bearer returns the token in an Authorization bearer credential, which may be the signed value
// of set-auth-token or the raw token of the sign-in response body.
func (s *Signer) Bearer(credential string) (string, bool) {
	if strings.IndexByte(credential, '.') >= 0 || strings.IndexByte(credential, '%') >= 0 {
		return s.Verify(credential)
	}
	if auth.WellFormedToken(credential) {
		return credential, true
	}
	return "", false
}
