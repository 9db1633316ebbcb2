package handlers_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/models"

	"github.com/go-jose/go-jose/v4"
)

// jwtClaims are the claims a back end reads from our JWTs.
type jwtClaims struct {
	Iss           string `json:"iss"`
	Aud           string `json:"aud"`
	Sub           string `json:"sub"`
	Sid           string `json:"sid"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"emailVerified"`
	Iat           int64  `json:"iat"`
	Exp           int64  `json:"exp"`
	Act           *struct {
		Sub string `json:"sub"`
	} `json:"act"`
}

// fetchJWKS reads GET /api/auth/jwks as a verifier would.
func fetchJWKS(t *testing.T, e *testkit.Env) jose.JSONWebKeySet {
	t.Helper()
	r := e.Get("/api/auth/jwks")
	if r.Status != http.StatusOK {
		t.Fatalf("jwks: %d %s", r.Status, r.Body)
	}
	var set jose.JSONWebKeySet
	r.Decode(t, &set)
	return set
}

// kids lists the key ids of set.
func kids(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

// verifyJWT checks token as a back end does with a stock JOSE library and our JWKS alone: the
// algorithm, the key named by kid, the signature; then it returns the header's kid and the claims.
func verifyJWT(t *testing.T, set jose.JSONWebKeySet, token string) (string, jwtClaims, error) {
	t.Helper()
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return "", jwtClaims{}, err
	}
	h := jws.Signatures[0].Header
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		return h.KeyID, jwtClaims{}, errors.New("no key for kid " + h.KeyID)
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		return h.KeyID, jwtClaims{}, err
	}
	if typ, _ := h.ExtraHeaders["typ"].(string); typ != "JWT" {
		t.Errorf("typ = %q, want JWT", typ)
	}
	var c jwtClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return h.KeyID, c, nil
}

// getToken calls GET /api/auth/token with a bearer token and returns the JWT.
func getToken(t *testing.T, e *testkit.Env, bearer string) string {
	t.Helper()
	r := e.Get("/api/auth/token", "Authorization", "Bearer "+bearer)
	if r.Status != http.StatusOK {
		t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	var body struct {
		Token string `json:"token"`
	}
	r.Decode(t, &body)
	return body.Token
}

func TestJWT_TokenRoute(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		e.Get("/api/auth/token").ExpectError(t, http.StatusUnauthorized, "UNAUTHORIZED")
		e.Get("/api/auth/token", "Authorization", "Bearer nonsense").ExpectError(t, http.StatusUnauthorized, "UNAUTHORIZED")

		s := e.SignIn("jwt@example.com")
		token := getToken(t, e, s.Bearer)
		kid, c, err := verifyJWT(t, fetchJWKS(t, e), token)
		if err != nil {
			t.Fatalf("our JWT does not verify against our JWKS: %v", err)
		}
		now := e.Clock.Now().Unix()
		want := jwtClaims{Iss: e.URL, Aud: e.URL, Sub: s.UserID, Email: "jwt@example.com", EmailVerified: true,
			Iat: now, Exp: now + int64(auth.JWTLifetime/time.Second), Sid: c.Sid}
		if c != want || c.Sid == "" || kid == "" {
			t.Fatalf("claims %+v (kid %q), want %+v with a sid and a kid", c, kid, want)
		}
		if n := e.Count(&models.Session{}, "id = ?", c.Sid); n != 1 {
			t.Fatalf("sid %q names %d sessions, want 1", c.Sid, n)
		}

		// The cookie works too, and gets the same JWT: it is the same session, within half the
		// JWT's lifetime.
		r := e.Do(testkit.Request{Path: "/api/auth/token", Cookies: s.Cookies()})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), token) {
			t.Fatalf("token by cookie: %d %s, want the same JWT", r.Status, r.Body)
		}

		// Signed out, there is no token (the database is asked), though the JWT itself lives on.
		e.Post("/api/auth/sign-out", map[string]any{}, "Authorization", "Bearer "+s.Bearer)
		e.Get("/api/auth/token", "Authorization", "Bearer "+s.Bearer).ExpectError(t, http.StatusUnauthorized, "UNAUTHORIZED")
		if _, _, err := verifyJWT(t, fetchJWKS(t, e), token); err != nil {
			t.Fatalf("a JWT stops verifying at sign-out, but back ends cannot know: %v", err)
		}
	})
}

func TestJWT_Claims_Configured(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_JWT_ISSUER", "https://issuer.example"),
		testkit.WithEnv("AUTH_JWT_AUDIENCE", "api://orders"))
	s := e.SignIn("aud@example.com")
	_, c, err := verifyJWT(t, fetchJWKS(t, e), getToken(t, e, s.Bearer))
	if err != nil || c.Iss != "https://issuer.example" || c.Aud != "api://orders" {
		t.Fatalf("iss %q aud %q (%v), want the configured ones", c.Iss, c.Aud, err)
	}
}

func TestJWKS_PublicKeysOnly(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r := e.Get("/api/auth/jwks")
		if r.Status != http.StatusOK || r.Header.Get("Cache-Control") != "public, max-age=300" {
			t.Fatalf("jwks: %d, Cache-Control %q, want 200 and public, max-age=300", r.Status, r.Header.Get("Cache-Control"))
		}
		var raw struct {
			Keys []map[string]any `json:"keys"`
		}
		r.Decode(t, &raw)
		if len(raw.Keys) != 1 {
			t.Fatalf("keys: %s, want one", r.Body)
		}
		for _, k := range raw.Keys {
			for _, private := range []string{"d", "p", "q", "dp", "dq", "qi"} {
				if _, ok := k[private]; ok {
					t.Fatalf("the JWKS holds the private member %q: %s", private, r.Body)
				}
			}
			if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] == "" || k["x"] == "" {
				t.Fatalf("key %v, want an Ed25519 signing key with a kid", k)
			}
		}
		set := fetchJWKS(t, e)
		if !set.Keys[0].IsPublic() {
			t.Fatal("the JWKS key is not public")
		}
	})
}

func TestGetSession_SetAuthJWT(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		if r := e.Get(getSessionPath); r.Header.Get("set-auth-jwt") != "" {
			t.Fatal("set-auth-jwt without a session")
		}
		s := e.SignIn("header@example.com")
		byBearer := getSession(e, nil, "Authorization", "Bearer "+s.Bearer)
		expectSession(t, byBearer, s.UserID)
		first := byBearer.Header.Get("set-auth-jwt")
		if first == "" || !strings.Contains(byBearer.Header.Get("Access-Control-Expose-Headers"), "set-auth-jwt") {
			t.Fatalf("set-auth-jwt %q, exposed %q", first, byBearer.Header.Get("Access-Control-Expose-Headers"))
		}
		if _, c, err := verifyJWT(t, fetchJWKS(t, e), first); err != nil || c.Sub != s.UserID {
			t.Fatalf("set-auth-jwt does not verify (%v) or names %q", err, c.Sub)
		}
		// The cookie cache answers without the database, and still with the JWT (signed again at
		// the same instant: the same bytes; from this second JWT on, the session's is kept).
		byCookie := getSession(e, s.Cookies())
		expectSession(t, byCookie, s.UserID)
		if got := byCookie.Header.Get("set-auth-jwt"); got != first {
			t.Fatalf("get-session by cookie gave another JWT at the same instant")
		}
		// A minute later, within the JWT's half-life, the kept JWT is handed out again: one signed
		// now would say a later iat.
		e.Clock.Advance(time.Minute)
		if got := getSession(e, nil, "Authorization", "Bearer "+s.Bearer).Header.Get("set-auth-jwt"); got != first {
			t.Fatalf("get-session signed anew within the JWT's half-life")
		}

		// An altered JWT is refused: a claim changed, or the signature.
		parts := strings.Split(first, ".")
		forged := parts[0] + "." + strings.TrimRight(parts[1], "A") + "B." + parts[2]
		if _, _, err := verifyJWT(t, fetchJWKS(t, e), forged); err == nil {
			t.Fatal("an altered JWT verified")
		}
	})
}

func TestJWT_ReusedUntilHalfLife(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("reuse@example.com")
		// A session's JWT is kept from its second on (a session read once takes no place); at
		// one instant both are the same bytes.
		if first, again := getToken(t, e, s.Bearer), getToken(t, e, s.Bearer); again != first {
			t.Fatal("two JWTs of one session at one instant differ")
		}
		first := getToken(t, e, s.Bearer)
		e.Clock.Advance(auth.JWTLifetime/2 - time.Second)
		if got := getToken(t, e, s.Bearer); got != first {
			t.Fatal("a JWT less than half its lifetime old was not reused")
		}
		e.Clock.Advance(time.Second)
		second := getToken(t, e, s.Bearer)
		if second == first {
			t.Fatal("a JWT half its lifetime old was reused")
		}
		_, c, err := verifyJWT(t, fetchJWKS(t, e), second)
		if err != nil || c.Iat != e.Clock.Now().Unix() {
			t.Fatalf("the new JWT: iat %d (%v), want now", c.Iat, err)
		}
		// A change to the user is a new JWT at once.
		if r := e.Post("/api/auth/update-user", map[string]any{"name": "Renamed"}, "Authorization", "Bearer "+s.Bearer); r.Status != http.StatusOK {
			t.Fatalf("update-user: %d %s", r.Status, r.Body)
		}
		if got := getToken(t, e, s.Bearer); got == second {
			t.Fatal("the JWT of a renamed user was reused")
		}
	})
}

func TestJWT_Rotation(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		ctx := context.Background()
		s := e.SignIn("rotate@example.com")
		old := getToken(t, e, s.Bearer)
		oldKid, _, err := verifyJWT(t, fetchJWKS(t, e), old)
		if err != nil {
			t.Fatal(err)
		}
		// Not due: the scheduled job adds nothing.
		if r, err := e.Auth.RotateJWTKey(ctx, false); err != nil || r.Added != "" {
			t.Fatalf("rotation before it is due: %+v, %v", r, err)
		}

		// Due: the next key is published at once, and signs only once verifiers can have it.
		e.Clock.Advance(auth.DefaultJWTRotation)
		r, err := e.Auth.RotateJWTKey(ctx, false)
		if err != nil || r.Added == "" || r.Added == oldKid {
			t.Fatalf("rotation when due: %+v, %v", r, err)
		}
		if got := kids(fetchJWKS(t, e)); len(got) != 2 {
			t.Fatalf("JWKS during the rotation: %v, want the old and the next key", got)
		}
		s = e.SignIn("rotate@example.com") // a session whose JWT is new
		if kid, _, _ := verifyJWT(t, fetchJWKS(t, e), getToken(t, e, s.Bearer)); kid != oldKid {
			t.Fatalf("signed with %s before the next key's time, want the old key", kid)
		}
		lastOld := getToken(t, e, s.Bearer)
		e.Clock.Advance(r.ActiveFrom.Sub(e.Clock.Now()))
		s = e.SignIn("rotate@example.com")
		if kid, _, _ := verifyJWT(t, fetchJWKS(t, e), getToken(t, e, s.Bearer)); kid != r.Added {
			t.Fatalf("signed with %s once the next key's time came, want %s", kid, r.Added)
		}

		// The old key verifies every JWT it signed until the last of them has expired.
		e.Clock.Advance(auth.JWTLifetime)
		if _, _, err := verifyJWT(t, fetchJWKS(t, e), lastOld); err != nil {
			t.Fatalf("the last JWT of the old key, at its expiry: %v", err)
		}
		e.Clock.Advance(2 * time.Minute)
		if got := kids(fetchJWKS(t, e)); len(got) != 1 || got[0] != r.Added {
			t.Fatalf("JWKS after the old key's JWTs expired: %v, want only %s", got, r.Added)
		}
		if _, _, err := verifyJWT(t, fetchJWKS(t, e), old); err == nil {
			t.Fatal("a JWT of the dropped key still verifies")
		}
		// The job removes the row.
		if r, err := e.Auth.RotateJWTKey(ctx, false); err != nil || r.Removed != 1 || e.Count(&models.SigningKey{}) != 1 {
			t.Fatalf("clean-up: %+v, %v, %d rows", r, err, e.Count(&models.SigningKey{}))
		}

		// By hand, the command's forced rotation, at any age; twice in a row is one rotation.
		if r, err := e.Auth.RotateJWTKey(ctx, true); err != nil || r.Added == "" {
			t.Fatalf("forced rotation: %+v, %v", r, err)
		}
		if r, err := e.Auth.RotateJWTKey(ctx, true); err != nil || r.Added != "" {
			t.Fatalf("forced rotation while one is under way: %+v, %v", r, err)
		}
	})
}

func TestJWT_InstancesAgree(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		sib := e.Sibling()
		// Both instances make the first key at once: one wins, both use it.
		var wg sync.WaitGroup
		sets := make([][]string, 8)
		for i := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inst := e
				if i%2 == 1 {
					inst = sib
				}
				set, err := inst.Auth.JWKS(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				sets[i] = kids(set)
			}()
		}
		wg.Wait()
		for _, got := range sets {
			if len(got) != 1 || got[0] != sets[0][0] {
				t.Fatalf("instances disagree on the first key: %v", sets)
			}
		}
		if n := e.Count(&models.SigningKey{}); n != 1 {
			t.Fatalf("%d keys stored, want 1", n)
		}
		s := e.SignIn("fleet@example.com")
		kid, _, err := verifyJWT(t, fetchJWKS(t, sib), getToken(t, e, s.Bearer))
		if err != nil || kid != sets[0][0] {
			t.Fatalf("a JWT of one instance against the other's JWKS: kid %s, %v", kid, err)
		}

		// A rotation on one instance reaches the other before the new key signs.
		r, err := e.Auth.RotateJWTKey(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(r.ActiveFrom.Sub(e.Clock.Now()))
		s = sib.SignIn("fleet@example.com")
		if kid, _, err := verifyJWT(t, fetchJWKS(t, e), getToken(t, sib, s.Bearer)); err != nil || kid != r.Added {
			t.Fatalf("the sibling signs with %s (%v), want the rotated key %s", kid, err, r.Added)
		}
	})
}

func TestJWT_PrivateKeySealed(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("sealed@example.com")
		getToken(t, e, s.Bearer)
		var rows []models.SigningKey
		if err := e.DB.Find(&rows).Error; err != nil || len(rows) != 1 {
			t.Fatalf("%d keys, %v", len(rows), err)
		}
		row := rows[0]
		// No 32 bytes of the stored value are the seed of the public key.
		for i := 0; i+ed25519.SeedSize <= len(row.PrivateKey); i++ {
			priv := ed25519.NewKeyFromSeed(row.PrivateKey[i : i+ed25519.SeedSize])
			if priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(row.PublicKey)) {
				t.Fatal("the table holds the private key in the clear")
			}
		}
		// Under another AUTH_SECRET the key does not open: no JWT, but the session still reads.
		// (The raw token of the sign-in body is a bearer credential under any secret.)
		other := e.Sibling(testkit.WithEnv("AUTH_SECRET", "another-secret-0123456789-abcdefghijkl"))
		r := getSession(other, nil, "Authorization", "Bearer "+s.Token)
		expectSession(t, r, s.UserID)
		if r.Header.Get("set-auth-jwt") != "" {
			t.Fatal("a JWT signed with a key that should not open")
		}
		other.Get("/api/auth/token", "Authorization", "Bearer "+s.Token).ExpectError(t, http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE")
		// The scheduled rotation does not wait a month: a key that does not open is replaced at
		// its next run, and the new key signs once it has been published long enough.
		r2, err := other.Auth.RotateJWTKey(context.Background(), false)
		if err != nil || r2.Added == "" {
			t.Fatalf("the rotation job left the unopenable key signing: %+v, %v", r2, err)
		}
		e.Clock.Advance(7 * time.Minute)
		if tok := getToken(t, other, s.Token); tok == "" {
			t.Fatal("no JWT under the new secret after the rotation")
		}
	})
}

// A JWT made while the session was near its end (so cut short to it) is renewed half-way through
// its own life: once a refresh extends the session, /token never hands out an expired JWT.
func TestJWT_CutShortByTheSessionEndIsRenewedInTime(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("nearend@example.com")
		e.Clock.Advance(60*24*time.Hour - 2*time.Minute) // the session ends in 2 minutes
		r := e.Get("/api/auth/get-session?disableCookieCache=true&disableRefresh=true", bearer(s)...)
		first := r.Header.Get("set-auth-jwt")
		if first == "" {
			t.Fatalf("no JWT: %d %s", r.Status, r.Body)
		}
		// An ordinary read refreshes the session for 60 more days.
		r = e.Get("/api/auth/get-session?disableCookieCache=true", bearer(s)...)
		if string(r.Body) == "null" {
			t.Fatal("session gone")
		}
		e.Clock.Advance(3 * time.Minute)
		tok := getToken(t, e, s.Bearer)
		_, c, err := verifyJWT(t, fetchJWKS(t, e), tok)
		if err != nil {
			t.Fatal(err)
		}
		if c.Exp <= e.Clock.Now().Unix() {
			t.Fatalf("GET /token handed out a JWT that expired %ds ago for a session live for 60 more days (same as first: %v)",
				e.Clock.Now().Unix()-c.Exp, tok == first)
		}
	})
}
