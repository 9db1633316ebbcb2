package betterauth

import (
	"strconv"
	"time"
	"unicode/utf8"

	"codeauth/auth"
	"codeauth/models"
)

// isoTime marshals as JavaScript's Date.toISOString does ("2026-11-21T09:30:00.000Z"), the form
// better-auth's client turns back into Date objects.
type isoTime time.Time

func (t isoTime) MarshalJSON() ([]byte, error) {
	return appendISOTime(make([]byte, 0, 26), time.Time(t)), nil
}

// userJSON is the User object of the wire contract.
type userJSON struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Email         string  `json:"email"`
	EmailVerified bool    `json:"emailVerified"`
	Image         *string `json:"image"`
	CreatedAt     isoTime `json:"createdAt"`
	UpdatedAt     isoTime `json:"updatedAt"`
	// The fields of better-auth's admin plugin. A user with a live session is never banned (a
	// ban ends every session, and a banned account cannot sign in), so outside the admin routes
	// they read false and null.
	Role       string   `json:"role"`
	Banned     bool     `json:"banned"`
	BanReason  *string  `json:"banReason"`
	BanExpires *isoTime `json:"banExpires"`
}

// sessionJSON is the Session object of the wire contract. Token is the raw token the caller
// presented; the database only has its hash.
type sessionJSON struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	Token     string  `json:"token"`
	ExpiresAt isoTime `json:"expiresAt"`
	IPAddress string  `json:"ipAddress"`
	UserAgent string  `json:"userAgent"`
	CreatedAt isoTime `json:"createdAt"`
	UpdatedAt isoTime `json:"updatedAt"`
	// ImpersonatedBy is the admin who opened the session as its user (admin plugin), or null.
	ImpersonatedBy *string `json:"impersonatedBy"`
}

func toUserJSON(u models.User) userJSON {
	out := userJSON{
		ID: u.ID, Name: u.Name, Email: u.Email, EmailVerified: u.EmailVerified, Image: u.Image,
		CreatedAt: isoTime(u.CreatedAt), UpdatedAt: isoTime(u.UpdatedAt),
		Role: u.Role, Banned: u.Banned, BanReason: u.BanReason,
	}
	if out.Role == "" {
		out.Role = auth.RoleUser
	}
	if u.BanExpires != nil {
		t := isoTime(*u.BanExpires)
		out.BanExpires = &t
	}
	return out
}

func toSessionJSON(st *auth.SessionState) sessionJSON {
	s := st.Session
	return sessionJSON{
		ID: s.ID, UserID: s.UserID, Token: st.Token, ExpiresAt: isoTime(s.ExpiresAt),
		IPAddress: s.IPAddress, UserAgent: s.UserAgent, CreatedAt: isoTime(s.CreatedAt), UpdatedAt: isoTime(s.UpdatedAt),
		ImpersonatedBy: s.ImpersonatedBy,
	}
}

// sessionResponse is the answer of get-session when a session exists.
type sessionResponse struct {
	Session sessionJSON `json:"session"`
	User    userJSON    `json:"user"`
}

// signInResponse is the answer of a successful verification.
type signInResponse struct {
	Token string   `json:"token"`
	User  userJSON `json:"user"`
}

// preferencesJSON is the service's own per-user record in /api/me.
type preferencesJSON struct {
	MarketingOptIn  bool `json:"marketingOptIn"`
	IsTrialEligible bool `json:"isTrialEligible"`
}

// meResponse is the answer of GET /api/me.
type meResponse struct {
	User        userJSON        `json:"user"`
	Preferences preferencesJSON `json:"preferences"`
}

// tokenResponse is {"token": "<JWT>"}, the answer of GET /token.
type tokenResponse struct {
	Token string `json:"token"`
}

// successResponse is {"success":true}.
type successResponse struct {
	Success bool `json:"success"`
}

// deleteUserResponse is the answer of POST /delete-user.
type deleteUserResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// accountJSON is an entry of GET /list-accounts: an account of another provider linked to the
// user (better-auth's shape).
type accountJSON struct {
	ID         string   `json:"id"`
	ProviderID string   `json:"providerId"`
	CreatedAt  isoTime  `json:"createdAt"`
	UpdatedAt  isoTime  `json:"updatedAt"`
	AccountID  string   `json:"accountId"`
	UserID     string   `json:"userId"`
	Scopes     []string `json:"scopes"`
}

// statusResponse is {"status":true}.
type statusResponse struct {
	Status bool `json:"status"`
}

// okResponse is the answer of better-auth's liveness probe, GET /ok.
type okResponse struct {
	OK bool `json:"ok"`
}

// verifyEmailResponse is the answer of GET /verify-email without a callbackURL.
type verifyEmailResponse struct {
	Status bool     `json:"status"`
	User   userJSON `json:"user"`
}

// deleteAccountResponse is the answer of POST /api/account/delete: signing in before DeleteAt
// restores the account.
type deleteAccountResponse struct {
	DeleteAt isoTime `json:"deleteAt"`
	Success  bool    `json:"success"`
}

// The session answer is written by hand: get-session is the route every app calls on every
// screen, and encoding/json's reflection and its re-validation of MarshalJSON output cost more
// than the rest of the answer. TestSessionJSONMatchesEncodingJSON holds the two to the same bytes.

// appendJSON appends the session answer as encoding/json would write it.
func (r *sessionResponse) appendJSON(b []byte) []byte {
	s := &r.Session
	b = append(b, `{"session":{"id":`...)
	b = appendJSONString(b, s.ID)
	b = append(b, `,"userId":`...)
	b = appendJSONString(b, s.UserID)
	b = append(b, `,"token":`...)
	b = appendJSONString(b, s.Token)
	b = append(b, `,"expiresAt":`...)
	b = appendISOTime(b, time.Time(s.ExpiresAt))
	b = append(b, `,"ipAddress":`...)
	b = appendJSONString(b, s.IPAddress)
	b = append(b, `,"userAgent":`...)
	b = appendJSONString(b, s.UserAgent)
	b = append(b, `,"createdAt":`...)
	b = appendISOTime(b, time.Time(s.CreatedAt))
	b = append(b, `,"updatedAt":`...)
	b = appendISOTime(b, time.Time(s.UpdatedAt))
	b = append(b, `,"impersonatedBy":`...)
	b = appendNullableString(b, s.ImpersonatedBy)
	b = append(b, `},"user":`...)
	b = r.User.appendJSON(b)
	return append(b, '}')
}

// appendJSON appends the user as encoding/json would write it.
func (u *userJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, u.ID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, u.Name)
	b = append(b, `,"email":`...)
	b = appendJSONString(b, u.Email)
	b = append(b, `,"emailVerified":`...)
	b = strconv.AppendBool(b, u.EmailVerified)
	b = append(b, `,"image":`...)
	b = appendNullableString(b, u.Image)
	b = append(b, `,"createdAt":`...)
	b = appendISOTime(b, time.Time(u.CreatedAt))
	b = append(b, `,"updatedAt":`...)
	b = appendISOTime(b, time.Time(u.UpdatedAt))
	b = append(b, `,"role":`...)
	b = appendJSONString(b, u.Role)
	b = append(b, `,"banned":`...)
	b = strconv.AppendBool(b, u.Banned)
	b = append(b, `,"banReason":`...)
	b = appendNullableString(b, u.BanReason)
	b = append(b, `,"banExpires":`...)
	if u.BanExpires == nil {
		b = append(b, "null"...)
	} else {
		b = appendISOTime(b, time.Time(*u.BanExpires))
	}
	return append(b, '}')
}

// appendNullableString appends *s as a JSON string, or null.
func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendISOTime appends t as a quoted JavaScript Date.toISOString() value, in UTC with
// milliseconds: "2026-11-21T09:30:00.000Z" (years 0 to 9999).
func appendISOTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = append(b, '"')
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/int(time.Millisecond), 3)
	return append(b, 'Z', '"')
}

// appendDigits appends n zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var buf [8]byte
	i := len(buf)
	for ; width > 0 || n > 0; width-- {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[i:]...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json writes it: HTML-safe
// (<, > and & escaped), U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
