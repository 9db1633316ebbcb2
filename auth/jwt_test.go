package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codeauth/models"

	"github.com/go-jose/go-jose/v4"
)

// jwtTestService is a Service with one signing key in memory, read just now, so signing needs no
// database: the benchmarks measure the signature and the claims, not a query.
func jwtTestService(t testing.TB) (*Service, *SessionState) {
	t.Helper()
	s := testService(t, secretA)
	s.jwt = &jwts{opts: JWTOptions{Issuer: "https://auth.example.com", Audience: "https://auth.example.com", Rotation: DefaultJWTRotation}}
	now := s.now()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	row := models.SigningKey{ID: "kid-1", Generation: 1, Algorithm: jwtAlgorithm, PublicKey: pub, ActiveFrom: now, CreatedAt: now}
	if row.PrivateKey, err = s.sealKey(row.ID, priv.Seed()); err != nil {
		t.Fatal(err)
	}
	k, err := s.useKey(row)
	if err != nil || k.signer == nil {
		t.Fatalf("the key does not open: %v", err)
	}
	s.jwt.keys.Store(&keyset{readAt: now, goodAt: now, keys: []signingKey{k}, maxGeneration: 1})
	st := &SessionState{Token: strings.Repeat("T", tokenLength),
		Session: models.Session{ID: "5b0c6a64-2d7e-4f0e-9a53-0d6f4c1e2b3a", UserID: "0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a",
			ExpiresAt: now.Add(time.Hour), AbsoluteExpiresAt: now.Add(time.Hour), UpdatedAt: now},
		User: models.User{ID: "0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a", Email: "alice@example.com", Name: "Alice", EmailVerified: true}}
	return s, st
}

func TestSignJWT_ExpiresWithTheSession(t *testing.T) {
	s, st := jwtTestService(t)
	st.Session.ExpiresAt = s.now().Add(time.Minute)
	token, _, _, err := s.signJWT(context.Background(), st, s.now())
	if err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var c jwtClaims
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Expiry, st.Session.ExpiresAt.Unix(); got != want {
		t.Fatalf("exp = %d, want the session's end %d", got, want)
	}
}

// The JWT carries the user as better-auth's default payload does (the session's user object,
// with the admin plugin's fields, dates as Date.toISOString writes them), so a back end written
// for better-auth's JWTs reads payload.id or payload.role the same; and a change to any of them
// makes a new JWT rather than reusing the one kept.
func TestSessionJWT_CarriesTheUserAsBetterAuths(t *testing.T) {
	s, st := jwtTestService(t)
	image := "https://example.com/a.png"
	st.User.Image, st.User.Role = &image, "admin"
	st.User.CreatedAt = time.Date(2026, 11, 21, 9, 30, 0, 123456000, time.UTC)
	st.User.UpdatedAt = st.User.CreatedAt.Add(time.Hour)
	ctx := context.Background()
	token, err := s.SessionJWT(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(token string) map[string]any {
		t.Helper()
		jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := claims(token)
	for k, want := range map[string]any{
		"sub": st.User.ID, "id": st.User.ID, "sid": st.Session.ID, "email": "alice@example.com", "name": "Alice",
		"emailVerified": true, "image": image, "role": "admin", "banned": false, "banReason": nil, "banExpires": nil,
		"createdAt": "2026-11-21T09:30:00.123Z", "updatedAt": "2026-11-21T10:30:00.123Z",
	} {
		if got, ok := c[k]; !ok || got != want {
			t.Errorf("claim %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	// Kept and reused while nothing it says has changed (a session's second JWT is kept).
	kept, err := s.SessionJWT(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.SessionJWT(ctx, st); again != kept {
		t.Fatal("an unchanged user got a new JWT")
	}
	st.User.Role = "user"
	demoted, err := s.SessionJWT(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if demoted == kept || claims(demoted)["role"] != "user" {
		t.Fatalf("after the role changed the JWT says role %v", claims(demoted)["role"])
	}
	other := "https://example.com/b.png"
	st.User.Image = &other
	if next, _ := s.SessionJWT(ctx, st); claims(next)["image"] != other {
		t.Fatal("after the image changed the JWT kept the old one")
	}
}

// BenchmarkSignJWT is making a session's JWT: the claims and one Ed25519 signature. Session reads
// pay it once per session per half JWT lifetime, not per read (BenchmarkSessionJWTReused).
func BenchmarkSignJWT(b *testing.B) {
	s, st := jwtTestService(b)
	ctx, now := context.Background(), s.now()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := s.signJWT(ctx, st, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionJWTReused is what get-session pays for set-auth-jwt on most reads: the JWT
// made earlier for the session, from the per-session cache.
func BenchmarkSessionJWTReused(b *testing.B) {
	s, st := jwtTestService(b)
	ctx := context.Background()
	for range 2 { // a session's JWT is kept from its second on
		if _, err := s.SessionJWT(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.SessionJWT(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyJWT is what a back end pays to check one of our JWTs locally with a stock JOSE
// library (go-jose here) and the JWKS key: parse, verify the signature, decode the claims.
func BenchmarkVerifyJWT(b *testing.B) {
	s, st := jwtTestService(b)
	token, _, _, err := s.signJWT(context.Background(), st, s.now())
	if err != nil {
		b.Fatal(err)
	}
	key := s.jwt.keys.Load().keys[0].public
	b.ReportAllocs()
	for b.Loop() {
		jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			b.Fatal(err)
		}
		payload, err := jws.Verify(key)
		if err != nil {
			b.Fatal(err)
		}
		var c jwtClaims
		if err := json.Unmarshal(payload, &c); err != nil || c.Subject != st.User.ID {
			b.Fatal("bad claims", err)
		}
	}
}

// An instance that cannot read the key table signs with the keys it read last only while every
// JWT it makes is sure to verify: up to jwtKeyLead after its last good read; then signing fails
// as the database's unavailability (503 on /token, no JWT header on get-session).
func TestSignJWT_StaleKeysStopSigning(t *testing.T) {
	s, st := jwtTestService(t)
	now := s.now()
	ks := *s.jwt.keys.Load()
	ks.readAt, ks.goodAt = now, now.Add(-jwtKeyLead+time.Second) // tried just now, failed
	s.jwt.keys.Store(&ks)
	if _, _, _, err := s.signJWT(context.Background(), st, now); err != nil {
		t.Fatalf("within the lead: %v", err)
	}
	ks.goodAt = now.Add(-jwtKeyLead - time.Second)
	s.jwt.keys.Store(&ks)
	if _, _, _, err := s.signJWT(context.Background(), st, now); !models.Unavailable(err) {
		t.Fatalf("past the lead: %v, want the database's unavailability", err)
	}
}

// The reuse cache is split in shards, each bounded, and a JWT is found again in its shard.
func TestJWTCache_Shards(t *testing.T) {
	var c jwtCache
	now := time.Now()
	st := &SessionState{User: models.User{ID: "u"}}
	for i := range jwtCacheSize * 2 {
		st.Session.ID = fmt.Sprintf("session-%d", i)
		c.put(st, "token", "kid", now.Add(time.Minute)) // seen
		c.put(st, "token", "kid", now.Add(time.Minute)) // kept
	}
	total := 0
	for i := range c.shards {
		sh := &c.shards[i]
		n := len(sh.cur) + len(sh.old)
		if n > jwtCacheSize/jwtCacheShards {
			t.Fatalf("shard %d holds %d, past its bound", i, n)
		}
		total += n
	}
	if total < jwtCacheSize/2 {
		t.Fatalf("the cache holds %d of %d", total, jwtCacheSize)
	}
	st.Session.ID = fmt.Sprintf("session-%d", jwtCacheSize*2-1)
	if token, kid, ok := c.get(st, now); !ok || token != "token" || kid != "kid" {
		t.Fatalf("the last JWT put is not found: %q %q %v", token, kid, ok)
	}
}

// A session's first JWT is not kept, its second is, and a kept JWT's renewal is kept (its note
// among the sessions seen once is gone by then), also once its shard has moved it to the older
// map; a burst of sessions read once each takes no place in the cache.
func TestJWTCache_KeepsFromTheSecondJWT(t *testing.T) {
	var c jwtCache
	now := time.Now()
	st := &SessionState{Session: models.Session{ID: "read-often"}, User: models.User{ID: "u"}}
	c.put(st, "first", "kid", now.Add(time.Minute))
	if _, _, ok := c.get(st, now); ok {
		t.Fatal("the session's first JWT was kept")
	}
	c.put(st, "second", "kid", now.Add(time.Minute))
	if token, _, ok := c.get(st, now); !ok || token != "second" {
		t.Fatalf("the session's second JWT was not kept: %q %v", token, ok)
	}
	c.put(st, "renewed", "kid", now.Add(2*time.Minute))
	if token, _, ok := c.get(st, now); !ok || token != "renewed" {
		t.Fatalf("the renewal of a kept JWT was not kept: %q %v", token, ok)
	}
	sh := c.shard(sessionHash(st.Session.ID))
	sh.old, sh.cur = sh.cur, nil // the shard filled up: the JWT is in the older map now
	c.put(st, "renewed again", "kid", now.Add(3*time.Minute))
	if token, _, ok := c.get(st, now); !ok || token != "renewed again" {
		t.Fatalf("the renewal of a JWT kept in the older map was not kept: %q %v", token, ok)
	}

	var burst jwtCache
	for i := range jwtCacheSize {
		st.Session.ID = fmt.Sprintf("once-%d", i)
		burst.put(st, "token", "kid", now.Add(time.Minute))
	}
	for i := range burst.shards {
		if n := len(burst.shards[i].cur) + len(burst.shards[i].old); n != 0 {
			t.Fatalf("shard %d keeps %d JWTs of sessions signed for once", i, n)
		}
	}
}

// Two sessions whose notes share a slot, read in turns, are both kept from their second JWT: the
// second note takes the other session's other slot instead of pushing the first out (else each
// read would push out the note the next one looks for, and neither would ever be kept).
func TestJWTCache_SessionsSharingASlotAreBothKept(t *testing.T) {
	var c jwtCache
	stFirst, stSecond := sessionsSharingAFirstSlot(&c, func(b1, b2 *atomic.Uint64) bool { return b1 != b2 })
	first, second := stFirst.Session.ID, stSecond.Session.ID
	now := time.Now()
	for range 2 {
		c.put(stFirst, "first", "kid", now.Add(time.Minute))
		c.put(stSecond, "second", "kid", now.Add(time.Minute))
	}
	if _, _, ok := c.get(stFirst, now); !ok {
		t.Fatalf("%s, read in turns with %s whose note shares its slot, was not kept", first, second)
	}
	if _, _, ok := c.get(stSecond, now); !ok {
		t.Fatalf("%s, read in turns with %s whose note shares its slot, was not kept", second, first)
	}
}

// When every slot holds a note of a session read once (after a burst of sign-ins), two sessions
// whose first slots are the same, read in turns, push out each other's notes, but only until the
// table is cleared, after at most jwtSeenSlots/2 notes: then both are kept.
func TestJWTCache_AFullTableIsCleared(t *testing.T) {
	var c jwtCache
	stFirst, stSecond := sessionsSharingAFirstSlot(&c, func(_, _ *atomic.Uint64) bool { return true })
	first, second := stFirst.Session.ID, stSecond.Session.ID
	for i := range c.seen {
		c.seen[i].Store(uint64(i)<<1 | 1) // a note of some other session
	}
	now := time.Now()
	for round := 0; ; round++ {
		c.put(stFirst, "first", "kid", now.Add(time.Minute))
		c.put(stSecond, "second", "kid", now.Add(time.Minute))
		_, _, keptFirst := c.get(stFirst, now)
		_, _, keptSecond := c.get(stSecond, now)
		if keptFirst && keptSecond {
			return
		}
		if round > jwtSeenSlots/4+2 {
			t.Fatalf("after %d rounds: %s kept %v, %s kept %v", round, first, keptFirst, second, keptSecond)
		}
	}
}

// sessionsSharingAFirstSlot returns two sessions, of two users, whose first slots in c's notes are
// the same and whose second slots, b1 and b2, the first's second slot also differing from the
// shared one, satisfy ok.
func sessionsSharingAFirstSlot(c *jwtCache, ok func(b1, b2 *atomic.Uint64) bool) (*SessionState, *SessionState) {
	byFirstSlot := map[*atomic.Uint64]string{}
	for i := 0; ; i++ {
		id := fmt.Sprintf("session-%d", i)
		a, b := c.seenSlots(sessionHash(id))
		if other, found := byFirstSlot[a]; found {
			if _, ob := c.seenSlots(sessionHash(other)); b != a && ok(ob, b) {
				return &SessionState{Session: models.Session{ID: other}, User: models.User{ID: "u1"}},
					&SessionState{Session: models.Session{ID: id}, User: models.User{ID: "u2"}}
			}
			continue
		}
		byFirstSlot[a] = id
	}
}

// BenchmarkSessionJWTReusedParallel is what get-session pays for set-auth-jwt on most reads, from
// every core at once.
func BenchmarkSessionJWTReusedParallel(b *testing.B) {
	s, _ := jwtTestService(b)
	const sessions = 1024
	states := make([]*SessionState, sessions)
	for i := range states {
		_, st := jwtTestService(b)
		st.Session.ID = fmt.Sprintf("%08d-2d7e-4f0e-9a53-0d6f4c1e2b3a", i)
		states[i] = st
		for range 2 { // a session's JWT is kept from its second on
			if _, err := s.SessionJWT(context.Background(), st); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := s.SessionJWT(context.Background(), states[i%sessions]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
