package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"codeauth/models"

	"gorm.io/gorm"
)

// Session timing (CONTRACT.md "Sessions and tokens").
const (
	// SessionLifetime is how long a session lives without being refreshed.
	SessionLifetime = 60 * 24 * time.Hour
	// SessionRefreshAge is how long after its last refresh a used session is extended again.
	SessionRefreshAge = 24 * time.Hour
	// CookieCacheTTL is how long the session_data cookie may answer for the database.
	CookieCacheTTL = 300 * time.Second
	// FreshAge is how recently the session must have been signed in for the operations that could
	// hand the account to someone else: asking to change its address and deleting it. An older
	// session signs in again first, with a code to the current address (catalogue J84: ASVS 5.0
	// 7.5.1; SP 800-63B-4 asks for an authentication at most 20 minutes old).
	FreshAge = 20 * time.Minute
)

// ErrSessionNotFresh means the session was signed in longer ago than FreshAge: sign in again.
var ErrSessionNotFresh = errors.New("auth: session is not fresh")

// Fresh reports whether the session was signed in at most FreshAge ago.
func (s *Service) Fresh(st *SessionState) bool {
	return st != nil && !s.now().After(st.Session.CreatedAt.Add(FreshAge))
}

// requireFresh is ErrSessionNotFresh unless the session is fresh.
func (s *Service) requireFresh(st *SessionState) error {
	if !s.Fresh(st) {
		return ErrSessionNotFresh
	}
	return nil
}

// SessionState is a live session with its user, as one request sees it.
type SessionState struct {
	Session models.Session
	User    models.User
	// Token is the raw session token the request presented.
	Token string
	// Refreshed means this request extended the session: the cookie and set-auth-token must be
	// sent again.
	Refreshed bool
	// Cached means the answer came from the cookie cache, without the database.
	Cached bool
}

// SessionQuery is the credential a request presented and how it may be checked.
type SessionQuery struct {
	// Token is the raw token, its signature already verified when it arrived signed.
	Token string
	// Cache is the session_data cookie value, or "".
	Cache string
	// FromDatabase skips the cookie cache: routes that change the account use it.
	FromDatabase bool
	// NoRefresh leaves the expiry alone even when a refresh is due.
	NoRefresh bool
}

// Session returns the live session for q, or nil when there is none: an unknown, expired or
// revoked token, or a deleted account. A valid cookie cache answers without the database unless
// the session is due for a refresh. Otherwise it is one indexed query, plus one UPDATE when the
// session is refreshed.
func (s *Service) Session(ctx context.Context, q SessionQuery) (*SessionState, error) {
	if !wellFormedToken(q.Token) {
		return nil, nil
	}
	now := s.now()
	if q.Cache != "" && !q.FromDatabase {
		if st, ok := s.decodeCache(q.Cache, q.Token, now); ok && !s.revoked.has(st.Session.ID, now) &&
			(q.NoRefresh || now.Before(st.Session.UpdatedAt.Add(SessionRefreshAge))) {
			return st, nil
		}
	}
	st, err := s.loadSession(ctx, q.Token)
	if err != nil || st == nil {
		return nil, err
	}
	if !now.Before(st.Session.ExpiresAt) || !now.Before(st.Session.AbsoluteExpiresAt) {
		if err := s.sessions.DeleteSession(ctx, st.Session.ID); err != nil {
			s.log.WarnContext(ctx, "deleting an expired session failed", "error", err)
		}
		return nil, nil
	}
	if !q.NoRefresh && !now.Before(st.Session.UpdatedAt.Add(SessionRefreshAge)) {
		expires := now.Add(SessionLifetime)
		if expires.After(st.Session.AbsoluteExpiresAt) {
			expires = st.Session.AbsoluteExpiresAt
		}
		if expires.After(st.Session.ExpiresAt) {
			live, err := s.sessions.RefreshSession(ctx, st.Session.ID, expires, now)
			if err != nil {
				return nil, fmt.Errorf("auth: refreshing a session: %w", err)
			}
			if !live {
				return nil, nil // signed out meanwhile
			}
			st.Session.ExpiresAt, st.Session.UpdatedAt, st.Refreshed = expires, now, true
		}
	}
	return st, nil
}

// CookieMaxAge is the session cookie's Max-Age: SessionLifetime (CONTRACT.md's 5184000), cut
// short when the absolute cap is nearer, so the cookie never outlives every use of the session.
func (s *Service) CookieMaxAge(st *SessionState) time.Duration {
	d := st.Session.AbsoluteExpiresAt.Sub(s.now())
	if d > SessionLifetime {
		return SessionLifetime
	}
	if d < 0 {
		return 0
	}
	return d
}

// sessionStore is the storage of sessions that the session checks and sign-out need.
type sessionStore interface {
	// ReadSession fills sess and user from the session of tokenHash and its live user; found is
	// false when there is none. It is the hot path of every check the cookie cache cannot answer.
	ReadSession(ctx context.Context, tokenHash string, sess *models.Session, user *models.User) (found bool, err error)
	// SessionQueries counts the queries that answered ReadSession (Stats.SessionQueries).
	SessionQueries() int64
	// RefreshSession extends the session id; false means it was signed out meanwhile.
	RefreshSession(ctx context.Context, id string, expires, now time.Time) (bool, error)
	// DeleteSession deletes the session id.
	DeleteSession(ctx context.Context, id string) error
	// DeleteSessionByToken deletes the session of tokenHash and returns its id, if there was one.
	DeleteSessionByToken(ctx context.Context, tokenHash string) (id string, found bool, err error)
}

func (s *Service) loadSession(ctx context.Context, token string) (*SessionState, error) {
	st := &SessionState{Token: token}
	sess, user := &st.Session, &st.User
	s.stats.sessionReads.Add(1)
	found, err := s.sessions.ReadSession(ctx, hashToken(token), sess, user)
	if err != nil {
		return nil, fmt.Errorf("auth: reading a session: %w", err)
	}
	if !found {
		return nil, nil
	}
	return st, nil
}

// createSession stores a new session for userID inside tx and returns its raw token.
func (s *Service) createSession(tx *gorm.DB, userID string, meta ClientMeta) (string, models.Session, error) {
	token, hash, err := newToken()
	if err != nil {
		return "", models.Session{}, err
	}
	now := s.now()
	absolute := now.Add(s.sessionMaxAge)
	expires := now.Add(SessionLifetime)
	if expires.After(absolute) {
		expires = absolute
	}
	sess := models.Session{
		ID:                newID(),
		Token:             hash,
		UserID:            userID,
		ExpiresAt:         expires,
		AbsoluteExpiresAt: absolute,
		IPAddress:         cleanText(meta.IPAddress, 64),
		UserAgent:         cleanText(meta.UserAgent, 512),
		CreatedAt:         now,
		UpdatedAt:         now,
	}
	if err := models.LaterInsert(tx, &sess, ""); err != nil {
		return "", models.Session{}, fmt.Errorf("auth: creating a session: %w", err)
	}
	return token, sess, nil
}

// SignOut ends the session of token, wherever it is used: cookie and bearer alike. An unknown
// token is not an error; signing out is always allowed.
func (s *Service) SignOut(ctx context.Context, token string) error {
	if !wellFormedToken(token) {
		return nil
	}
	id, found, err := s.sessions.DeleteSessionByToken(ctx, hashToken(token))
	if err != nil {
		return fmt.Errorf("auth: deleting a session: %w", err)
	}
	if !found {
		return nil
	}
	// Cookie caches issued by this instance stop answering for it at once.
	s.revokeLocally([]string{id})
	return nil
}

// ClientMeta describes the client a session is created for.
type ClientMeta struct {
	IPAddress string
	UserAgent string
}

// cleanText makes client-supplied text (a User-Agent header) safe to store and show: invalid
// UTF-8 becomes U+FFFD, control characters (NUL, which PostgreSQL refuses in text, among them)
// are dropped, and the result is cut to at most n bytes without splitting a character.
func cleanText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// revocations remembers sessions revoked in this process until any cookie cache that could still
// vouch for them has expired, so a signed-out browser replaying its cache is refused at once.
// Other instances learn of the revocation through the database once the cache expires.
type revocations struct {
	mu    sync.RWMutex
	until map[string]time.Time
	sweep int
}

func newRevocations() *revocations {
	return &revocations{until: map[string]time.Time{}, sweep: 1024}
}

func (r *revocations) add(id string, now, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.until) >= r.sweep {
		for k, t := range r.until {
			if !now.Before(t) {
				delete(r.until, k)
			}
		}
		r.sweep = 2 * len(r.until)
		if r.sweep < 1024 {
			r.sweep = 1024
		}
	}
	r.until[id] = until
}

func (r *revocations) has(id string, now time.Time) bool {
	r.mu.RLock()
	t, ok := r.until[id]
	r.mu.RUnlock()
	return ok && now.Before(t)
}
