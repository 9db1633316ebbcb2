package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
		if err := s.db.WithContext(ctx).Where("id = ?", st.Session.ID).Delete(&models.Session{}).Error; err != nil {
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
			res := s.db.WithContext(ctx).Model(&models.Session{}).Where("id = ?", st.Session.ID).
				Updates(map[string]any{"expires_at": expires, "updated_at": now})
			if res.Error != nil {
				return nil, fmt.Errorf("auth: refreshing a session: %w", res.Error)
			}
			if res.RowsAffected == 0 {
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

// sessionFrom is the session query from its columns on: a session, found by the hash of its token
// through the unique index, joined to its live user. It is the one query of every protected
// request that the cookie cache cannot answer; sessionQuery asks it for one hash, and on
// PostgreSQL sessionBatchQuery for many requests at once.
const sessionFrom = ` s.id, s.user_id, s.expires_at, s.absolute_expires_at, s.ip_address, s.user_agent,
 s.created_at, s.updated_at, u.email, u.name, u.email_verified, u.created_at, u.updated_at, u.image
 FROM sessions s JOIN users u ON u.id = s.user_id
 WHERE u.deleted_at IS NULL AND s.token`

// sessionQuery is the session query for one token hash, as SQLite's stmtReader prepares it.
const sessionQuery = "SELECT" + sessionFrom + " = ?"

// sessionColumns are the scan targets of the session query's columns after the hash and before
// the image, which each database scans its own way.
func sessionColumns(sess *models.Session, user *models.User) []any {
	return []any{&sess.ID, &sess.UserID, &sess.ExpiresAt, &sess.AbsoluteExpiresAt, &sess.IPAddress, &sess.UserAgent,
		&sess.CreatedAt, &sess.UpdatedAt, &user.Email, &user.Name, &user.EmailVerified, &user.CreatedAt, &user.UpdatedAt}
}

// sessionReader reads the session of one token hash and its user, or returns sql.ErrNoRows. Its
// readers bypass GORM: on the hottest path, GORM's statement building, reflection and rendering
// of the SQL for its logger cost more CPU than the database's own work.
type sessionReader interface {
	read(ctx context.Context, hash string, sess *models.Session, user *models.User) error
}

// newSessionReader picks the reader for the database, which counts its queries in queries. On
// PostgreSQL it is a batchReader, which queries through pgx itself (its statement cache prepares
// the query once per connection, and its scanning skips database/sql's conversions); elsewhere it
// is a stmtReader.
func newSessionReader(db *gorm.DB, queries *atomic.Int64) (sessionReader, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if db.Dialector.Name() == "postgres" {
		r := &batchReader{db: sqlDB, queries: queries}
		r.timeout.Store(int64(sessionReadTimeout))
		return r, nil
	}
	stmt, err := sqlDB.Prepare(sessionQuery)
	if err != nil {
		return nil, fmt.Errorf("auth: preparing the session query: %w", err)
	}
	return &stmtReader{stmt: stmt, queries: queries}, nil
}

// stmtReader runs sessionQuery as a statement prepared once through database/sql, which
// prepares it again on each pooled connection: one query per read.
type stmtReader struct {
	stmt    *sql.Stmt
	queries *atomic.Int64
}

func (r *stmtReader) read(ctx context.Context, hash string, sess *models.Session, user *models.User) error {
	r.queries.Add(1)
	var image sql.NullString
	if err := r.stmt.QueryRowContext(ctx, hash).Scan(append(sessionColumns(sess, user), &image)...); err != nil {
		return err
	}
	if image.Valid {
		user.Image = &image.String
	}
	return nil
}

func (s *Service) loadSession(ctx context.Context, token string) (*SessionState, error) {
	st := &SessionState{Token: token}
	sess, user := &st.Session, &st.User
	s.stats.sessionReads.Add(1)
	err := s.readSession.read(ctx, hashToken(token), sess, user)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: reading a session: %w", err)
	}
	user.ID = sess.UserID
	for _, t := range []*time.Time{&sess.ExpiresAt, &sess.AbsoluteExpiresAt, &sess.CreatedAt, &sess.UpdatedAt, &user.CreatedAt, &user.UpdatedAt} {
		*t = t.UTC()
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
	if !wellFormedToken(token) {
		return nil
	}
	db := s.db.WithContext(ctx)
	var sess models.Session
	err := db.Select("id").Where("token = ?", hashToken(token)).Take(&sess).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: finding a session: %w", err)
	}
	if err := db.Where("id = ?", sess.ID).Delete(&models.Session{}).Error; err != nil {
		return fmt.Errorf("auth: deleting a session: %w", err)
	}
	// Cookie caches issued by this instance stop answering for it at once.
	s.revokeLocally([]string{sess.ID})
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
