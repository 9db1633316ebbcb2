package auth

import (
	"context"
	"time"

	"codeauth/models"

	"github.com/google/uuid"
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

// sessionStore is the storage of sessions: models.Store implements it.
type sessionStore interface {
	ReadSession(ctx context.Context, hash string, sess *models.Session, user *models.User) (bool, error)
	SessionQueries() int64
	DeleteSession(ctx context.Context, id string) error
	RefreshSession(ctx context.Context, id string, expires, now time.Time) (bool, error)
	EndSession(ctx context.Context, hash string) (id, userID string, err error)
	ListSessions(ctx context.Context, userID string, now time.Time) ([]models.Session, error)
	EndUserSession(ctx context.Context, userID, id, tokenHash, reason string) (string, error)
	EndUserSessions(ctx context.Context, userID, keep, reason string) ([]string, error)
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
	// CachedAt is, for a Cached state, when the cache was sealed: when the database last
	// vouched for the session, as far as this request knows.
	CachedAt time.Time
}

// SessionQuery is the credential a request presented and how it may be checked.
type SessionQuery struct {
	// Token is the raw token, its signature already verified when it arrived signed.
	Token string
	// Cache is the session_data cookie value, or empty. It is read only during Session, so it
	// may be the request's own bytes, not a copy.
	Cache []byte
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
	if !WellFormedToken(q.Token) {
		return nil, nil
	}
	now := s.now()
	if len(q.Cache) != 0 && !q.FromDatabase {
		if st, ok := s.decodeCache(q.Cache, q.Token, now); ok && !s.revoked.has(st.Session.ID, now) &&
			(q.NoRefresh || now.Before(st.Session.UpdatedAt.Add(SessionRefreshAge))) {
			s.stats.cookieCacheReads.Add(1)
			return st, nil
		}
	}
	st, err := s.loadSession(ctx, q.Token)
	if err != nil || st == nil {
		return nil, err
	}
	if !now.Before(st.Session.ExpiresAt) || !now.Before(st.Session.AbsoluteExpiresAt) {
		if err := s.store.DeleteSession(ctx, st.Session.ID); err != nil {
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
			live, err := s.store.RefreshSession(ctx, st.Session.ID, expires, now)
			switch {
			case err != nil:
				// The session was just read, live: a refresh that cannot be written (a
				// read-only database during a failover, a lock) waits for a later request,
				// and this one is answered: the session is live until its expiry all the same.
				if s.refreshWarned.Allow(now) {
					s.log.WarnContext(ctx, "refreshing a session failed; answered without the refresh (said at most once a minute)", "error", err)
				}
			case !live:
				return nil, nil // signed out meanwhile
			default:
				st.Session.ExpiresAt, st.Session.UpdatedAt, st.Refreshed = expires, now, true
			}
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

// loadSession reads the live session of token from the database, or nil when there is none.
func (s *Service) loadSession(ctx context.Context, token string) (*SessionState, error) {
	st := &SessionState{Token: token}
	s.stats.sessionReads.Add(1)
	found, err := s.store.ReadSession(ctx, hashToken(token), &st.Session, &st.User)
	if err != nil || !found {
		return nil, err
	}
	return st, nil
}

// newSession makes a new session for the client, to be stored with the sign-in that opens it (its
// user is set there), and returns it with its raw token.
func (s *Service) newSession(meta ClientMeta) (string, models.Session, error) {
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
	return token, models.Session{
		ID:                newID(),
		Token:             hash,
		ExpiresAt:         expires,
		AbsoluteExpiresAt: absolute,
		IPAddress:         cleanText(meta.IPAddress, 64),
		UserAgent:         cleanText(meta.UserAgent, 512),
		CreatedAt:         now,
		UpdatedAt:         now,
	}, nil
}

// SignOut ends the session of token, wherever it is used: cookie and bearer alike. An unknown
// token is not an error; signing out is always allowed.
func (s *Service) SignOut(ctx context.Context, token string) error {
	if !WellFormedToken(token) {
		return nil
	}
	id, userID, err := s.store.EndSession(ctx, hashToken(token))
	if err != nil || id == "" {
		return err
	}
	// Cookie caches issued by this instance stop answering for it at once.
	s.revokeLocally([]string{id})
	s.record(ctx, AuditSignOut, userID, userID, map[string]any{"session": id})
	return nil
}

// ClientMeta describes the client a session is created for.
type ClientMeta struct {
	IPAddress string
	UserAgent string
}

// ListSessions returns the live sessions of st's account, newest first, but those an admin opened
// as the account (impersonate-user), which better-auth's admin plugin leaves out of the
// account's own list too: an admin's list-user-sessions shows them.
func (s *Service) ListSessions(ctx context.Context, st *SessionState) ([]models.Session, error) {
	sessions, err := s.store.ListSessions(ctx, st.User.ID, s.now())
	if err != nil {
		return nil, err
	}
	own := sessions[:0]
	for _, sess := range sessions {
		if sess.ImpersonatedBy == nil || sess.ID == st.Session.ID {
			own = append(own, sess)
		}
	}
	return own, nil
}

// RevokeSession ends one session of st's account, named by its handle (the id list-sessions
// gives as its token) or by its raw token, on every device at once, and reports whether it was
// st's own. A handle that names no session of the account, another account's included, is
// ErrSessionNotFound: the two cannot be told apart.
func (s *Service) RevokeSession(ctx context.Context, st *SessionState, handle string) (current bool, err error) {
	var id, hash string
	switch {
	case canonicalUUID(handle):
		id = handle
	case WellFormedToken(handle):
		hash = hashToken(handle)
	default:
		return false, ErrSessionNotFound
	}
	ended, err := s.store.EndUserSession(ctx, st.User.ID, id, hash, models.ReasonRevoked)
	if err != nil {
		return false, err
	}
	if ended == "" {
		return false, ErrSessionNotFound
	}
	s.revokeLocally([]string{ended})
	s.record(ctx, AuditSessionRevoked, st.User.ID, st.User.ID, map[string]any{"sessions": []string{ended}})
	return ended == st.Session.ID, nil
}

// RevokeSessions ends every session of st's account, st's own too unless keepCurrent.
func (s *Service) RevokeSessions(ctx context.Context, st *SessionState, keepCurrent bool) error {
	keep := ""
	if keepCurrent {
		keep = st.Session.ID
	}
	ended, err := s.store.EndUserSessions(ctx, st.User.ID, keep, models.ReasonRevoked)
	if err != nil {
		return err
	}
	s.revokeLocally(ended)
	if len(ended) > 0 {
		s.record(ctx, AuditSessionRevoked, st.User.ID, st.User.ID, map[string]any{"sessions": ended})
	}
	return nil
}

// canonicalUUID reports whether s is a UUID in the form the service writes them: lower-case, with
// hyphens. uuid.Validate also takes {braces}, urn:uuid: and other forms, which the two databases
// would read differently (PostgreSQL's uuid type parses some, refuses others, SQLite compares
// text), so a handle in any other form names no session.
func canonicalUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}
