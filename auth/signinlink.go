package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// The optional sign-in link of the code e-mail (AUTH_SIGNIN_LINK). The link carries the code
// itself, sealed with a key of its own, so it is bound to the same code, expiry and attempt
// budget as the code typed by hand and is used up with it: opening the link only shows a page,
// and the sign-in happens when the person presses its button (a POST), so the mail scanners that
// open every link in an e-mail cannot use it. The link also says which browser asked for the code
// (a random value the sign-in page keeps in a cookie, of which the link holds the hash) and what
// device it was: opened in that browser it signs in at once, opened elsewhere it asks the person
// to confirm that they asked, naming the device that did.

// SignInLinkPath is the page the code e-mail's sign-in link opens (GET) and that signs in (POST).
const SignInLinkPath = "/auth/sign-in-link"

// linkPayload is what a sign-in link seals.
type linkPayload struct {
	Email   string `json:"e"`
	Code    string `json:"c"`
	CodeID  string `json:"v,omitempty"` // the code's row: a link to a replaced code spends nothing of the next
	Expires int64  `json:"x"`           // the code's expiry, Unix seconds
	Asked   int64  `json:"a"`           // when the code was asked for, Unix seconds
	Browser []byte `json:"b,omitempty"`
	// The asking device's browser (or app) and platform (Device), and network address.
	Agent    string `json:"d,omitempty"`
	Platform string `json:"p,omitempty"`
	IP       string `json:"i,omitempty"`
}

// linkAD is the additional data of every sealed sign-in link: a link's ciphertext opens as
// nothing else.
var linkAD = []byte("codeauth sign-in link v1")

// NewBrowserBinding returns a random value for the sign-in page to keep in a cookie while a code
// is on its way: the code e-mail's link, opened in the browser holding it, signs in without
// asking where the code was asked for.
func NewBrowserBinding() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auth: reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// SignInLinks reports whether code e-mails carry a sign-in link (AUTH_SIGNIN_LINK).
func (s *Service) SignInLinks() bool { return s.signInLinks }

// bindingHash is what a link keeps of a browser binding.
func bindingHash(browser string) []byte {
	h := sha256.Sum256([]byte("codeauth browser binding\x00" + browser))
	return h[:16]
}

// signInLink seals the sign-in link of a code for email, asked for at asked from the request in
// ctx (its device and address) by the browser holding browser ("" for none), and returns the URL
// the e-mail carries.
func (s *Service) signInLink(ctx context.Context, email, code, codeID, browser string, asked, expires time.Time) (string, error) {
	p := linkPayload{Email: email, Code: code, CodeID: codeID, Expires: expires.Unix(), Asked: asked.Unix()}
	if browser != "" {
		p.Browser = bindingHash(browser)
	}
	if src := RequestFrom(ctx); src != nil {
		d := DeviceOf(src.UserAgent())
		p.Agent, p.Platform = d.Browser, d.Platform()
		p.IP = cleanText(src.VouchedIP(), 64)
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("auth: encoding a sign-in link: %w", err)
	}
	sealed := make([]byte, s.keys.link.NonceSize(), s.keys.link.NonceSize()+len(plain)+s.keys.link.Overhead())
	if _, err := rand.Read(sealed); err != nil {
		return "", fmt.Errorf("auth: reading random bytes: %w", err)
	}
	sealed = s.keys.link.Seal(sealed, sealed, plain, linkAD)
	return s.compose.SiteURL + SignInLinkPath + "?token=" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// SignInLink is what the sign-in link's page shows before the person signs in: the address, and
// whether the link was opened in the browser that asked for the code; if not, the device that
// asked (its browser and platform, as Device has them, for the page to name in its language), its
// network address and when, for the person to confirm it was them.
type SignInLink struct {
	Email             string
	SameBrowser       bool
	Browser, Platform string
	IP                string
	AskedAt           time.Time
	ExpiresAt         time.Time
}

// openLink opens a sign-in link's token: ErrInvalidToken for one this service did not seal (or
// sealed under another AUTH_SECRET), ErrTokenExpired once its code has expired.
func (s *Service) openLink(token string) (linkPayload, error) {
	var p linkPayload
	sealed, err := base64.RawURLEncoding.DecodeString(token)
	ns := s.keys.link.NonceSize()
	if err != nil || len(token) > 2048 || len(sealed) < ns+s.keys.link.Overhead() {
		return p, ErrInvalidToken
	}
	plain, err := s.keys.link.Open(nil, sealed[:ns], sealed[ns:], linkAD)
	if err != nil || json.Unmarshal(plain, &p) != nil || p.Email == "" || !validCodeShape(p.Code) {
		return p, ErrInvalidToken
	}
	if !s.now().Before(time.Unix(p.Expires, 0)) {
		return p, ErrTokenExpired
	}
	return p, nil
}

// OpenSignInLink reads a sign-in link for its page, without using it: browser is the value the
// request's browser holds ("" for none). A link whose code was used, replaced or exhausted opens
// too; signing in with it then fails as the code would.
func (s *Service) OpenSignInLink(token, browser string) (SignInLink, error) {
	if !s.signInLinks {
		return SignInLink{}, ErrInvalidToken
	}
	p, err := s.openLink(token)
	if err != nil {
		return SignInLink{}, err
	}
	same := browser != "" && len(p.Browser) > 0 && subtle.ConstantTimeCompare(bindingHash(browser), p.Browser) == 1
	return SignInLink{Email: p.Email, SameBrowser: same, Browser: p.Agent, Platform: p.Platform, IP: p.IP,
		AskedAt: time.Unix(p.Asked, 0).UTC(), ExpiresAt: time.Unix(p.Expires, 0).UTC()}, nil
}

// SignInWithLink signs in with a sign-in link, as SignIn does with its address and code: the same
// attempt budget, single use, the same errors; locale is the request's, for an account it creates.
func (s *Service) SignInWithLink(ctx context.Context, token, locale string, client ClientMeta) (*SignInResult, error) {
	if !s.signInLinks {
		return nil, ErrInvalidToken
	}
	p, err := s.openLink(token)
	if err != nil {
		return nil, err
	}
	return s.SignIn(ctx, SignInInput{Email: p.Email, Code: p.Code, Locale: locale, Client: client, codeID: p.CodeID, method: "email-link"})
}
