package handlers_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// jwt:rotate --now, for a key that may have leaked: the new key signs at once, every other key
// leaves the JWKS, and no instance hands out a JWT of an old key again once it has read the keys.
func TestJWT_RotateNowReplacesEveryKey(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		sib := e.Sibling()
		s := e.SignIn("leak@example.com")
		old := getToken(t, e, s.Bearer)
		oldFromSibling := getToken(t, sib, s.Bearer)
		oldSet := fetchJWKS(t, e)
		oldKid, _, err := verifyJWT(t, oldSet, old)
		if err != nil {
			t.Fatal(err)
		}
		// A scheduled rotation under way is replaced too.
		if _, err := e.Auth.RotateJWTKey(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		r, err := e.Auth.RotateJWTKeyNow(context.Background())
		if err != nil || r.Added == "" || r.Removed != 2 || !r.ActiveFrom.Equal(e.Clock.Now().Truncate(time.Microsecond)) {
			t.Fatalf("RotateJWTKeyNow = %+v, %v", r, err)
		}
		set := fetchJWKS(t, e)
		if got := kids(set); len(got) != 1 || got[0] != r.Added {
			t.Fatalf("the JWKS after --now: %v, want only %s", got, r.Added)
		}
		if _, _, err := verifyJWT(t, set, old); err == nil {
			t.Fatal("a JWT of the replaced key still verifies against the JWKS")
		}
		// This instance signs with the new key at once, its cached JWT of the old key dropped.
		if kid, _, err := verifyJWT(t, set, getToken(t, e, s.Bearer)); err != nil || kid != r.Added {
			t.Fatalf("after --now this instance signs with %s (%v)", kid, err)
		}
		// The sibling, by its next read of the keys (a minute).
		if k, _, _ := verifyJWT(t, oldSet, oldFromSibling); k != oldKid {
			t.Fatalf("the sibling's JWT was of key %s", k)
		}
		e.Clock.Advance(61 * time.Second)
		if kid, _, err := verifyJWT(t, set, getToken(t, sib, s.Bearer)); err != nil || kid != r.Added {
			t.Fatalf("a minute after --now the sibling signs with %s (%v)", kid, err)
		}
	})
}

// A key table holding only rows the service cannot use (another algorithm, a generation taken)
// does not stop it from making its own key.
func TestJWT_ForeignKeyRowsDoNotBlock(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		now := e.Clock.Now()
		for i, alg := range []string{"RS256", "ES256"} {
			row := models.SigningKey{ID: "foreign-" + alg, Generation: int64(i + 1), Algorithm: alg, PublicKey: pub,
				PrivateKey: []byte("x"), ActiveFrom: now, CreatedAt: now}
			if err := e.DB.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
		s := e.SignIn("foreign@example.com")
		kid, _, err := verifyJWT(t, fetchJWKS(t, e), getToken(t, e, s.Bearer))
		if err != nil {
			t.Fatalf("no JWT beside foreign keys: %v", err)
		}
		var made models.SigningKey
		e.DB.Take(&made, "id = ?", kid)
		if made.Generation != 3 || made.Algorithm != "EdDSA" {
			t.Fatalf("the key made: %+v", made)
		}
		if r, err := e.Auth.RotateJWTKey(context.Background(), true); err != nil || r.Added == "" {
			t.Fatalf("a rotation beside foreign keys: %+v, %v", r, err)
		}
	})
}
