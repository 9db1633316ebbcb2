package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codeauth/lograte"
	"codeauth/models"

	"github.com/go-jose/go-jose/v4"
)

// JWTs for other back ends (better-auth's jwt plugin): a short-lived token that says who the
// session's user is, signed with a key whose public half the JWKS publishes, so a back end in
// any language verifies it with a stock JOSE library and never calls us. The price is that a
// JWT outlives a sign-out by at most JWTLifetime: the back end does not ask us.

// JWT timing.
const (
	// JWTLifetime is how long a JWT is valid: better-auth's default, and the longest a JWT
	// outlives the sign-out or revocation of its session.
	JWTLifetime = 15 * time.Minute
	// JWKSMaxAge is how long verifiers may cache the JWKS (its Cache-Control max-age).
	JWKSMaxAge = 5 * time.Minute
	// DefaultJWTRotation is how long a signing key signs before the scheduled job replaces it
	// (AUTH_JWT_ROTATE).
	DefaultJWTRotation = 30 * 24 * time.Hour
	// MinJWTRotation is the shortest AUTH_JWT_ROTATE: a key must sign for longer than it takes
	// to publish its successor and let its own JWTs expire.
	MinJWTRotation = time.Hour
	// jwtKeyReload is how long an instance signs with the keys it read without reading the table
	// again: how late it can learn of a key another instance or the command added.
	jwtKeyReload = time.Minute
	// jwtKeyReadTimeout bounds a read of the key table: it runs on behalf of a get-session whose
	// answer must not wait on a database that is away.
	jwtKeyReadTimeout = 2 * time.Second
	// jwtKeyLead is how long a new key is published in the JWKS before it signs: longer than a
	// verifier caches the JWKS plus how late an instance learns of the key, so no verifier meets
	// a kid it has not been offered.
	jwtKeyLead = JWKSMaxAge + jwtKeyReload
	// jwtClockSkew is the margin kept for verifiers whose clocks run behind ours.
	jwtClockSkew = time.Minute
	// jwtCacheSize bounds the JWTs kept for reuse, per instance; past it the older half goes.
	// An entry is about 800 bytes (the JWT and what it says), so the cache stays under 7 MB, a
	// large part of the heap the default GOMEMLIMIT (config.DefaultMemoryLimit) leaves the
	// service; a session past it is signed for again. Only sessions read more than once take a
	// place (jwtCache).
	jwtCacheSize = 8192
)

// JobRotateJWTKey is the scheduled task that adds the next signing key once the current one has
// signed for AUTH_JWT_ROTATE, and removes keys no live JWT was signed with.
const JobRotateJWTKey = "auth:rotate-jwt-key"

// jwtAlgorithm is the JWS algorithm of every key: Ed25519 signatures, small and fast.
const jwtAlgorithm = string(jose.EdDSA)

// jwtStore is the storage of signing keys: models.Store implements it.
type jwtStore interface {
	SigningKeys(ctx context.Context) ([]models.SigningKey, error)
	AddSigningKey(ctx context.Context, key models.SigningKey) (bool, error)
	DeleteSigningKeys(ctx context.Context, ids []string) (int64, error)
}

// JWTOptions say what the service's JWTs claim and how often their key changes.
type JWTOptions struct {
	// Issuer is the iss claim (AUTH_JWT_ISSUER, by default the AUTH_URL origin).
	Issuer string
	// Audience is the aud claim (AUTH_JWT_AUDIENCE, by default the AUTH_URL origin).
	Audience string
	// Rotation is how long a key signs before the next replaces it (AUTH_JWT_ROTATE).
	Rotation time.Duration
}

// jwts is the service's JWT signer: the keys as last read, and the JWTs made for each session.
type jwts struct {
	opts JWTOptions
	// load serialises reading the key table, so a reload is one query however many requests
	// need it.
	load  sync.Mutex
	keys  atomic.Pointer[keyset]
	cache jwtCache
	// warned keeps a failure to sign to one line a minute: get-session runs on every request,
	// and one line a minute says as much as one per request.
	warned lograte.Limit
}

// keyset is the key table as one instance read it.
type keyset struct {
	// readAt is when the table was last read or, after a failed read, tried: the next read is
	// due jwtKeyReload later. goodAt is when it was last read.
	readAt, goodAt time.Time
	// keys are newest generation first.
	keys []signingKey
	// maxGeneration is the highest generation of any row, of another algorithm or not: the next
	// key made takes the one after it.
	maxGeneration int64
}

// has reports whether the key id is in the set: a JWT it signed may still be handed out.
func (ks *keyset) has(kid string) bool {
	for i := range ks.keys {
		if ks.keys[i].row.ID == kid {
			return true
		}
	}
	return false
}

// signingKey is one key ready to use: the public half for the JWKS and, when the private half
// opened under this AUTH_SECRET, its signer.
type signingKey struct {
	row    models.SigningKey
	public jose.JSONWebKey
	signer jose.Signer
}

// jwtClaims are the claims of a session's JWT: the registered ones, the session id (sid, as
// OpenID Connect names it), and the user as better-auth's default payload carries it (the
// session's user object, with the admin plugin's fields), so a back end that reads payload.id or
// payload.role reads the same here. Dates are strings, as JavaScript's Date.toISOString writes
// them (jsDate). A session an admin opened as the account (impersonate-user) carries the admin as
// the actor (act, RFC 8693 4.1), so a back end can tell who is acting.
type jwtClaims struct {
	Issuer        string    `json:"iss"`
	Audience      string    `json:"aud"`
	Subject       string    `json:"sub"`
	SessionID     string    `json:"sid"`
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	EmailVerified bool      `json:"emailVerified"`
	Name          string    `json:"name"`
	Image         *string   `json:"image"`
	CreatedAt     string    `json:"createdAt"`
	UpdatedAt     string    `json:"updatedAt"`
	Role          string    `json:"role"`
	Banned        bool      `json:"banned"`
	BanReason     *string   `json:"banReason"`
	BanExpires    *string   `json:"banExpires"`
	IssuedAt      int64     `json:"iat"`
	Expiry        int64     `json:"exp"`
	Actor         *jwtActor `json:"act,omitempty"`
}

// jwtActor is the act claim: who acts for the subject.
type jwtActor struct {
	Subject string `json:"sub"`
}

// jsDateLayout is how JavaScript's Date.toISOString writes a time, in UTC: the form better-auth's
// payloads carry dates in.
const jsDateLayout = "2006-01-02T15:04:05.000Z"

// jsDate writes t as jsDateLayout does.
func jsDate(t time.Time) string { return t.UTC().Format(jsDateLayout) }

// SessionJWT returns a JWT for the session st: the one made for it earlier when that is less
// than half its lifetime old, still says the same about the user, and was kept (from the
// session's second JWT on, jwtCache), else a new one. Reuse keeps an Ed25519 signature off most
// session reads, which without one cost about as much.
func (s *Service) SessionJWT(ctx context.Context, st *SessionState) (string, error) {
	now := s.now()
	if token, kid, ok := s.jwt.cache.get(st, now); ok {
		// Reused only while its key is still in the table as last read (jwt:rotate --now
		// removes keys), read again when due, as signing would.
		if ks, err := s.keyset(ctx, now); err == nil && ks.has(kid) {
			return token, nil
		}
	}
	token, kid, exp, err := s.signJWT(ctx, st, now)
	if err != nil {
		if s.jwt.warned.Allow(now) {
			s.log.WarnContext(ctx, "signing a JWT failed (said at most once a minute)", "error", err)
		}
		return "", err
	}
	// Renewed half-way through its own life: a JWT cut short by a session's near end (which a
	// refresh may then push back) is renewed early, never handed out past its expiry.
	s.jwt.cache.put(st, token, kid, now.Add(exp.Sub(now)/2))
	return token, nil
}

// signJWT signs a new JWT for st with the key that signs at now. It expires after JWTLifetime,
// or with the session if that comes first. One signed for a session the cookie cache answered
// for expires JWTLifetime after the cache was sealed: another instance may have ended the session
// since, within the cache's five minutes, and no JWT outlives a revocation by more than
// JWTLifetime, however it was made.
func (s *Service) signJWT(ctx context.Context, st *SessionState, now time.Time) (token, kid string, exp time.Time, err error) {
	ks, err := s.keyset(ctx, now)
	if err != nil {
		return "", "", time.Time{}, err
	}
	if now.Sub(ks.goodAt) > jwtKeyLead {
		// The table could not be read for longer than a new key is published before it signs:
		// another instance may have rotated since, and after the retirement window deleted the
		// key this one holds, so a JWT signed with it might not verify. Until then it is safe: a
		// rotation begun after the last good read signs no earlier than jwtKeyLead after it, and
		// its predecessor stays published JWTLifetime (and a margin) longer still, so every JWT
		// signed with it meanwhile verifies until it expires.
		return "", "", time.Time{}, fmt.Errorf("auth: the signing keys were last read at %s: %w", ks.goodAt, models.ErrUnavailable)
	}
	key := ks.signing(now)
	if key.signer == nil {
		return "", "", time.Time{}, fmt.Errorf("auth: the signing key %s: %w", key.row.ID, ErrSigningKeySealed)
	}
	exp = now.Add(JWTLifetime)
	if st.Session.ExpiresAt.Before(exp) {
		exp = st.Session.ExpiresAt
	}
	if vouched := st.CachedAt.Add(JWTLifetime); st.Cached && vouched.Before(exp) {
		exp = vouched
	}
	u := &st.User
	claims := jwtClaims{
		Issuer: s.jwt.opts.Issuer, Audience: s.jwt.opts.Audience,
		Subject: u.ID, SessionID: st.Session.ID, ID: u.ID,
		Email: u.Email, EmailVerified: u.EmailVerified, Name: u.Name, Image: u.Image,
		CreatedAt: jsDate(u.CreatedAt), UpdatedAt: jsDate(u.UpdatedAt),
		Role: u.Role, Banned: u.Banned, BanReason: u.BanReason,
		IssuedAt: now.Unix(), Expiry: exp.Unix(),
	}
	if u.BanExpires != nil {
		at := jsDate(*u.BanExpires)
		claims.BanExpires = &at
	}
	if admin := st.Session.ImpersonatedBy; admin != nil {
		claims.Actor = &jwtActor{Subject: *admin}
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("auth: encoding JWT claims: %w", err)
	}
	jws, err := key.signer.Sign(payload)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("auth: signing a JWT: %w", err)
	}
	if token, err = jws.CompactSerialize(); err != nil {
		return "", "", time.Time{}, fmt.Errorf("auth: serialising a JWT: %w", err)
	}
	return token, key.row.ID, exp, nil
}

// JWKS returns the public keys a verifier needs: the key that signs now, the next one when a
// rotation has published it ahead, and the previous ones while a JWT they signed may still be
// alive. It never holds a private key.
func (s *Service) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	now := s.now()
	ks, err := s.keyset(ctx, now)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range ks.published(now) {
		set.Keys = append(set.Keys, k.public)
	}
	return set, nil
}

// signing is the key that signs at now: the newest whose time has come. The first key signs
// from its creation, so there is always one.
func (ks *keyset) signing(now time.Time) *signingKey {
	for i := range ks.keys {
		if !ks.keys[i].row.ActiveFrom.After(now) {
			return &ks.keys[i]
		}
	}
	return &ks.keys[len(ks.keys)-1]
}

// published are the keys the JWKS offers at now: those published ahead of signing, the one that
// signs, and each older one until JWTLifetime (and a margin for skewed clocks) after its
// successor took over, when the last JWT it signed has expired.
func (ks *keyset) published(now time.Time) []*signingKey {
	var out []*signingKey
	signing := ks.signing(now)
	for i := range ks.keys {
		k := &ks.keys[i]
		switch {
		case k.row.ActiveFrom.After(now) || k == signing:
			out = append(out, k)
		case i > 0 && now.Before(retiredUntil(ks.keys[i-1].row.ActiveFrom)):
			out = append(out, k)
		}
	}
	return out
}

// retiredUntil is when a key leaves the JWKS, its successor having started signing at took: the
// last JWT it signed has expired by then, even on a verifier whose clock runs a little behind.
func retiredUntil(took time.Time) time.Time { return took.Add(JWTLifetime + jwtClockSkew) }

// keyset returns the keys, read again when the copy in memory is older than jwtKeyReload. The
// first use on an empty table makes the first key.
func (s *Service) keyset(ctx context.Context, now time.Time) (*keyset, error) {
	old := s.jwt.keys.Load()
	if old != nil && fresh(old, now) {
		return old, nil
	}
	if old != nil {
		// A request that finds another reloading the keys signs with the copy it has rather
		// than wait: the JWT header of get-session must never hold the answer up.
		if !s.jwt.load.TryLock() {
			return old, nil
		}
	} else {
		s.jwt.load.Lock()
	}
	defer s.jwt.load.Unlock()
	if ks := s.jwt.keys.Load(); ks != nil && fresh(ks, now) {
		return ks, nil
	}
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwtKeyReadTimeout)
	defer cancel()
	ks, err := s.readKeys(readCtx, now)
	if err != nil {
		if old != nil {
			// Keys change once a month: the copy in memory serves while the database is away,
			// and is tried again a reload interval later, not by every request meanwhile.
			s.log.WarnContext(ctx, "reading the signing keys failed; using those read before", "error", err)
			stale := *old
			stale.readAt = now
			s.jwt.keys.Store(&stale)
			return &stale, nil
		}
		return nil, err
	}
	if len(ks.keys) == 0 {
		if _, err := s.addKey(readCtx, ks.maxGeneration+1, now, now); err != nil {
			return nil, err
		}
		if ks, err = s.readKeys(readCtx, now); err != nil {
			return nil, err
		}
		if len(ks.keys) == 0 {
			return nil, fmt.Errorf("auth: no signing key after adding one")
		}
	}
	s.jwt.keys.Store(ks)
	return ks, nil
}

// fresh reports whether ks was read recently enough to sign with at now.
func fresh(ks *keyset, now time.Time) bool {
	return !now.Before(ks.readAt) && now.Sub(ks.readAt) < jwtKeyReload
}

// readKeys reads the key table and opens each private key.
func (s *Service) readKeys(ctx context.Context, now time.Time) (*keyset, error) {
	rows, err := s.store.SigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	ks := &keyset{readAt: now, goodAt: now, keys: make([]signingKey, 0, len(rows))}
	for _, row := range rows {
		ks.maxGeneration = max(ks.maxGeneration, row.Generation)
		if row.Algorithm != jwtAlgorithm || len(row.PublicKey) != ed25519.PublicKeySize {
			continue // a key of another kind: not ours to use
		}
		k, err := s.useKey(row)
		if err != nil {
			return nil, err
		}
		ks.keys = append(ks.keys, k)
	}
	return ks, nil
}

// useKey makes a stored key ready: its public JWK and, when its private half opens under this
// AUTH_SECRET, its signer (without one, it verifies but does not sign).
func (s *Service) useKey(row models.SigningKey) (signingKey, error) {
	k := signingKey{row: row, public: jose.JSONWebKey{
		Key: ed25519.PublicKey(row.PublicKey), KeyID: row.ID, Algorithm: jwtAlgorithm, Use: "sig",
	}}
	seed, err := s.openKey(row)
	if err != nil {
		return k, nil
	}
	k.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: ed25519.NewKeyFromSeed(seed), KeyID: row.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return k, fmt.Errorf("auth: a signer for key %s: %w", row.ID, err)
	}
	return k, nil
}

// addKey makes the key of generation gen, signing from activeFrom, and stores it unless another
// instance stored that generation first; it reports whether this one was stored.
func (s *Service) addKey(ctx context.Context, gen int64, activeFrom, now time.Time) (bool, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, fmt.Errorf("auth: generating a signing key: %w", err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return false, fmt.Errorf("auth: reading random bytes: %w", err)
	}
	row := models.SigningKey{
		ID: base64.RawURLEncoding.EncodeToString(id[:]), Generation: gen, Algorithm: jwtAlgorithm,
		PublicKey: pub, ActiveFrom: activeFrom, CreatedAt: now,
	}
	if row.PrivateKey, err = s.sealKey(row.ID, priv.Seed()); err != nil {
		return false, err
	}
	return s.store.AddSigningKey(ctx, row)
}

// sealKey seals a private key's seed for the table: AES-256-GCM under a key derived from
// AUTH_SECRET, bound to the key's id, so a row copied under another id does not open.
func (s *Service) sealKey(id string, seed []byte) ([]byte, error) {
	aead := s.keys.jwt
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(seed)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("auth: reading random bytes: %w", err)
	}
	return aead.Seal(out, out, seed, []byte(id)), nil
}

// openKey opens a sealed seed; it fails for a key sealed under another AUTH_SECRET.
func (s *Service) openKey(row models.SigningKey) ([]byte, error) {
	aead := s.keys.jwt
	if len(row.PrivateKey) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrSigningKeySealed
	}
	seed, err := aead.Open(nil, row.PrivateKey[:aead.NonceSize()], row.PrivateKey[aead.NonceSize():], []byte(row.ID))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, ErrSigningKeySealed
	}
	return seed, nil
}

// RotationResult says what a rotation did.
type RotationResult struct {
	// Added is the id of the key added, or "" when none was due.
	Added string
	// ActiveFrom is when the added key starts signing.
	ActiveFrom time.Time
	// Removed counts the keys removed because no live JWT was signed with them.
	Removed int64
}

// RotateJWTKey adds the next signing key when the current one has signed for AUTH_JWT_ROTATE, or
// at once with force (the jwt:rotate command), unless a key added earlier has yet to start
// signing. The new key signs jwtKeyLead from now, once every verifier can have fetched it. It
// also removes the keys the JWKS no longer publishes.
func (s *Service) RotateJWTKey(ctx context.Context, force bool) (RotationResult, error) {
	var r RotationResult
	now := s.now()
	s.jwt.load.Lock()
	defer s.jwt.load.Unlock()
	ks, err := s.readKeys(ctx, now)
	if err != nil {
		return r, err
	}
	switch {
	case len(ks.keys) == 0:
		// Nothing signs yet: the first key signs at once, as on first use.
		r.ActiveFrom = now
		if _, err := s.addKey(ctx, ks.maxGeneration+1, now, now); err != nil {
			return r, err
		}
	case ks.keys[0].row.ActiveFrom.After(now):
		// A rotation is under way already.
	case force || ks.signing(now).signer == nil || !now.Before(ks.keys[0].row.ActiveFrom.Add(s.jwt.opts.Rotation)):
		// Also when the key that signs does not open under this AUTH_SECRET (the secret was
		// changed): without a new key no JWT could be made until the next scheduled rotation.
		r.ActiveFrom = now.Add(jwtKeyLead)
		if _, err := s.addKey(ctx, ks.maxGeneration+1, r.ActiveFrom, now); err != nil {
			return r, err
		}
	}
	if ks, err = s.readKeys(ctx, now); err != nil {
		return r, err
	}
	if !r.ActiveFrom.IsZero() && len(ks.keys) > 0 {
		r.Added = ks.keys[0].row.ID
	}
	published := map[string]bool{}
	for _, k := range ks.published(now) {
		published[k.row.ID] = true
	}
	var gone []string
	kept := ks.keys[:0]
	for _, k := range ks.keys {
		if published[k.row.ID] {
			kept = append(kept, k)
		} else {
			gone = append(gone, k.row.ID)
		}
	}
	if r.Removed, err = s.store.DeleteSigningKeys(ctx, gone); err != nil {
		return r, err
	}
	ks.keys = kept
	s.jwt.keys.Store(ks)
	return r, nil
}

// RotateJWTKeyNow replaces every signing key with a new one that signs at once: for a key that
// may have leaked (`codeauth jwt:rotate --now`). Every other key leaves the table and so the
// JWKS, and JWTs they signed stop verifying as soon as verifiers fetch the JWKS again (it may be
// cached for JWKSMaxAge; most verifiers also fetch it at once on meeting an unknown kid). This
// instance stops handing out JWTs of the old keys at once, other instances at their next read of
// the table (jwtKeyReload). The price: a verifier that cached the JWKS before the new key existed
// meets its kid before it fetches again, where the scheduled rotation publishes a key ahead.
func (s *Service) RotateJWTKeyNow(ctx context.Context) (RotationResult, error) {
	var r RotationResult
	now := s.now()
	s.jwt.load.Lock()
	defer s.jwt.load.Unlock()
	ks, err := s.readKeys(ctx, now)
	if err != nil {
		return r, err
	}
	stored, err := s.addKey(ctx, ks.maxGeneration+1, now, now)
	if err != nil {
		return r, err
	}
	if !stored {
		return r, errors.New("auth: another instance added a signing key at this moment; run the command again")
	}
	rows, err := s.store.SigningKeys(ctx)
	if err != nil {
		return r, err
	}
	var gone []string
	for _, row := range rows {
		if row.Generation == ks.maxGeneration+1 {
			r.Added = row.ID
			continue
		}
		gone = append(gone, row.ID)
	}
	if r.Removed, err = s.store.DeleteSigningKeys(ctx, gone); err != nil {
		return r, err
	}
	if ks, err = s.readKeys(ctx, now); err != nil {
		return r, err
	}
	s.jwt.keys.Store(ks)
	r.ActiveFrom = now
	return r, nil
}

// RotateJWTKeyNowJob is RotateJWTKeyNow as a task run under the rotation job's lock, so it never
// races the scheduled rotation.
func (s *Service) RotateJWTKeyNowJob() Job {
	return Job{Name: JobRotateJWTKey, Run: func(ctx context.Context) error {
		r, err := s.RotateJWTKeyNow(ctx)
		if err != nil {
			return err
		}
		s.log.WarnContext(ctx, "replaced every JWT signing key: JWTs signed before no longer verify", "job", JobRotateJWTKey,
			"kid", r.Added, "removed", r.Removed)
		return nil
	}}
}

// RotateJWTKeyJob is the task JobRotateJWTKey, which the server runs every few minutes
// (server.PruneInterval): cheap when nothing is due, and a rotation is never late by more.
// With force it rotates at once, as `codeauth jwt:rotate` does.
func (s *Service) RotateJWTKeyJob(force bool) Job {
	return Job{Name: JobRotateJWTKey, Run: func(ctx context.Context) error {
		r, err := s.RotateJWTKey(ctx, force)
		if err != nil {
			return err
		}
		switch {
		case r.Added != "":
			s.log.InfoContext(ctx, "rotated the JWT signing key", "job", JobRotateJWTKey, "kid", r.Added,
				"signs_from", r.ActiveFrom, "removed", r.Removed)
		case force:
			s.log.InfoContext(ctx, "a JWT key rotation is under way already: its key signs soon, nothing added",
				"job", JobRotateJWTKey, "removed", r.Removed)
		case r.Removed > 0:
			s.log.InfoContext(ctx, "removed expired JWT signing keys", "job", JobRotateJWTKey, "removed", r.Removed)
		}
		return nil
	}}
}

// jwtCache keeps the JWT last made for each session, bounded, in shards that each have their own
// lock, so parallel session checks do not queue on one mutex. Each shard keeps two maps, and when
// the newer fills to half the shard's bound the older is dropped, so the most recently used JWTs
// stay.
//
// A JWT is kept from the second one made for its session on (or when it renews one kept): a
// session read once, as most are when sign-ins come in bursts, never takes a place, so it pushes
// out none of the JWTs read again and again, and holds no memory. The sessions signed for once are
// noted in seen (seenBefore), a table of their ids' hashes with no pointers for the collector to
// follow. The price is one signature more for each session read more than once, or a few more when
// other sessions' notes push its own out before it is read again.
type jwtCache struct {
	shards [jwtCacheShards]jwtCacheShard
	// seen holds the notes of sessions signed for once and not kept (seenBefore).
	seen [jwtSeenSlots]atomic.Uint64
	// notes counts the notes made since seen was last cleared.
	notes atomic.Int64
}

// jwtCacheShards is how many shards the cache has: enough that two cores rarely meet on one.
const jwtCacheShards = 32

// jwtSeenSlots is how many sessions signed for once the cache remembers at most (8 bytes each).
const jwtSeenSlots = 2 * jwtCacheSize

type jwtCacheShard struct {
	mu       sync.Mutex
	cur, old map[string]cachedJWT
}

// jwtCacheSeed seeds the hash that picks a session's shard and slot.
var jwtCacheSeed = maphash.MakeSeed()

// sessionHash is the hash of a session's id that picks its shard and its slot in seen.
func sessionHash(sessionID string) uint64 { return maphash.String(jwtCacheSeed, sessionID) }

func (c *jwtCache) shard(h uint64) *jwtCacheShard { return &c.shards[h%jwtCacheShards] }

// seenSlots are the two slots of seen where the session of hash h may be noted, picked with
// other bits of h than its shard and than each other.
func (c *jwtCache) seenSlots(h uint64) (a, b *atomic.Uint64) {
	return &c.seen[(h>>8)%jwtSeenSlots], &c.seen[(h>>36)%jwtSeenSlots]
}

// seenBefore reports whether the session of hash h was noted as signed for once, and takes the
// note away if so; else it notes it. A note goes into a free one of the session's two slots, so
// two sessions that share one slot are both noted; only when both hold others' notes does it push
// the first one's out. Every jwtSeenSlots/2 notes the table is cleared (as TinyLFU's doorkeeper
// is reset), so a table full of sessions read once is emptied, and two sessions read in turns
// that push out each other's notes do so only until then.
func (c *jwtCache) seenBefore(h uint64) bool {
	a, b := c.seenSlots(h)
	mark := h | 1 // never 0, a free slot
	if a.CompareAndSwap(mark, 0) || b.CompareAndSwap(mark, 0) {
		return true
	}
	if c.notes.Add(1) > jwtSeenSlots/2 {
		// Two notes at once may both clear the table; each costs a few microseconds, once in
		// thousands of signatures of 30 µs.
		c.notes.Store(0)
		for i := range c.seen {
			c.seen[i].Store(0)
		}
	}
	if !a.CompareAndSwap(0, mark) && !b.CompareAndSwap(0, mark) {
		a.Store(mark)
	}
	return false
}

// cachedJWT is a JWT with what it says about its user, which must still hold for it to be
// reused, the key that signed it, and the time it is due for renewal.
type cachedJWT struct {
	token, kid, userID, email, name string
	verified                        bool
	// rest is userMark of the user it was signed for: the other fields its claims carry.
	rest  uint64
	renew time.Time
}

// userMark sums up the fields of u a JWT carries that cachedJWT does not keep whole (the role,
// the image, the dates, the ban), so a change to any of them makes a new JWT.
func userMark(u *models.User) uint64 {
	var h maphash.Hash
	h.SetSeed(jwtCacheSeed)
	h.WriteString(u.Role)
	h.WriteByte(0)
	if u.Image != nil {
		h.WriteByte(1)
		h.WriteString(*u.Image)
	}
	h.WriteByte(0)
	if u.BanReason != nil {
		h.WriteString(*u.BanReason)
	}
	h.WriteByte(0)
	var b [8]byte
	for _, n := range []int64{u.CreatedAt.UnixMilli(), u.UpdatedAt.UnixMilli(), banMark(u)} {
		for i := range b {
			b[i] = byte(n >> (8 * i))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}

// banMark is the part of userMark that says whether and until when u is banned.
func banMark(u *models.User) int64 {
	switch {
	case !u.Banned:
		return 0
	case u.BanExpires == nil:
		return -1
	default:
		return u.BanExpires.UnixMilli()
	}
}

// get returns the JWT kept for st's session, with the id of its key, if it is not due for
// renewal and the user it names is unchanged. Its expiry, capped by the session's, needs no
// check: a session's expiry only moves later.
func (c *jwtCache) get(st *SessionState, now time.Time) (token, kid string, ok bool) {
	sh := c.shard(sessionHash(st.Session.ID))
	sh.mu.Lock()
	e, ok := sh.findLocked(st.Session.ID)
	sh.mu.Unlock()
	u := &st.User
	if !ok || !now.Before(e.renew) || e.userID != u.ID || e.email != u.Email || e.name != u.Name ||
		e.verified != u.EmailVerified || e.rest != userMark(u) {
		return "", "", false
	}
	return e.token, e.kid, true
}

// put keeps token, signed with the key kid, for st's session until renew, if the session has a
// JWT kept already or was signed for before (seenBefore); else it only notes the session.
func (c *jwtCache) put(st *SessionState, token, kid string, renew time.Time) {
	id := st.Session.ID
	h := sessionHash(id)
	sh := c.shard(h)
	sh.mu.Lock()
	if _, kept := sh.findLocked(id); !kept && !c.seenBefore(h) {
		sh.mu.Unlock()
		return
	}
	u := &st.User
	// Copies: a session read from the cookie cache has its strings cut from one larger string,
	// which the entry would otherwise keep alive.
	sh.putLocked(id, cachedJWT{token: token, kid: kid, userID: strings.Clone(u.ID), email: strings.Clone(u.Email),
		name: strings.Clone(u.Name), verified: u.EmailVerified, rest: userMark(u), renew: renew})
	sh.mu.Unlock()
}

// findLocked returns the entry kept for the session id, moving it to the newer map if it was in
// the older one. sh.mu is held.
func (sh *jwtCacheShard) findLocked(id string) (cachedJWT, bool) {
	e, ok := sh.cur[id]
	if !ok {
		if e, ok = sh.old[id]; ok {
			sh.putLocked(id, e)
		}
	}
	return e, ok
}

func (sh *jwtCacheShard) putLocked(id string, e cachedJWT) {
	if sh.cur == nil || len(sh.cur) >= jwtCacheSize/jwtCacheShards/2 {
		sh.old, sh.cur = sh.cur, make(map[string]cachedJWT)
	}
	sh.cur[id] = e
}
