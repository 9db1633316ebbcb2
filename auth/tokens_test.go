package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"codeauth/models"
)

// testService builds a Service with keys only; these tests do not touch the database.
func testService(t testing.TB, secret string) *Service {
	t.Helper()
	k, err := newKeys([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &Service{keys: k, clock: func() time.Time { return now }, revoked: newRevocations()}
}

const secretA = "secret-a-0123456789-0123456789-01"

func TestNewToken(t *testing.T) {
	token, hash, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	if !WellFormedToken(token) || hash == token || hash != hashToken(token) {
		t.Fatalf("token %q, hash %q", token, hash)
	}
}

func TestCookieCache_RoundTripAndTampering(t *testing.T) {
	s := testService(t, secretA)
	now := s.now()
	st := &SessionState{
		Token: strings.Repeat("T", tokenLength),
		Session: models.Session{ID: "sid", UserID: "uid", ExpiresAt: now.Add(SessionLifetime), AbsoluteExpiresAt: now.Add(365 * 24 * time.Hour),
			IPAddress: "203.0.113.9", UserAgent: "test", CreatedAt: now, UpdatedAt: now},
		User: models.User{ID: "uid", Email: "alice@example.com", Name: "Alice", EmailVerified: true, CreatedAt: now, UpdatedAt: now},
	}
	value, err := s.EncodeCache(st)
	if err != nil {
		t.Fatal(err)
	}
	// Catalogue I83: the cookie holds neither the token nor readable personal data.
	raw, _ := base64.RawURLEncoding.DecodeString(value)
	for _, secret := range []string{st.Token, "alice@example.com", "203.0.113.9"} {
		if strings.Contains(value, secret) || strings.Contains(string(raw), secret) {
			t.Fatalf("cache exposes %q", secret)
		}
	}
	got, ok := s.decodeCache([]byte(value), st.Token, now)
	if !ok || got.User.Email != "alice@example.com" || got.Session.ID != "sid" || !got.Session.ExpiresAt.Equal(st.Session.ExpiresAt) || !got.Cached {
		t.Fatalf("decode = %+v, %v", got, ok)
	}
	// Catalogue I78, I79, I81, I82.
	if _, ok := s.decodeCache([]byte(value), strings.Repeat("U", tokenLength), now); ok {
		t.Fatal("cache opened for another token")
	}
	for i := 0; i < len(value); i += 7 {
		b := []byte(value)
		b[i] ^= 1
		if _, ok := s.decodeCache(b, st.Token, now); ok {
			t.Fatalf("tampered cache (byte %d) accepted", i)
		}
	}
	if _, ok := s.decodeCache([]byte(value), st.Token, now.Add(CookieCacheTTL)); ok {
		t.Fatal("stale cache accepted")
	}
	if _, ok := testService(t, "secret-b-0123456789-0123456789-01").decodeCache([]byte(value), st.Token, now); ok {
		t.Fatal("cache accepted under another secret")
	}
	expired := *st
	expired.Session.ExpiresAt = now.Add(time.Second)
	v2, _ := s.EncodeCache(&expired)
	if _, ok := s.decodeCache([]byte(v2), st.Token, now.Add(2*time.Second)); ok {
		t.Fatal("cache of an expired session accepted")
	}
}

// The binary cache layout gives back every field as it went in, with and without an image; an
// authentic payload of another layout (version 1 was JSON) or with a broken layout is refused
// without panicking.
func TestCookieCache_Layout(t *testing.T) {
	s := testService(t, secretA)
	now := s.now()
	image := "https://example.com/a.png"
	for _, img := range []*string{nil, &image} {
		st := &SessionState{
			Token: strings.Repeat("T", tokenLength),
			Session: models.Session{ID: "sid", UserID: "uid", ExpiresAt: now.Add(SessionLifetime), AbsoluteExpiresAt: now.Add(400 * 24 * time.Hour),
				IPAddress: "2001:db8::1", UserAgent: "agent \x00 ü", CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Minute)},
			User: models.User{ID: "uid", Email: "a@example.com", Name: "", EmailVerified: img != nil, Image: img,
				CreatedAt: now.Add(-48 * time.Hour), UpdatedAt: now.Add(-2 * time.Hour), Role: "admin"},
		}
		if img != nil {
			admin := "admin-id"
			st.Session.ImpersonatedBy = &admin
		}
		value, err := s.EncodeCache(st)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.decodeCache([]byte(value), st.Token, now)
		if !ok {
			t.Fatal("not decoded")
		}
		want := *st
		want.Cached = true
		if !reflect.DeepEqual(got.Session, want.Session) || got.User.Email != want.User.Email || got.User.Name != want.User.Name ||
			got.User.EmailVerified != want.User.EmailVerified || !got.User.CreatedAt.Equal(want.User.CreatedAt) ||
			!got.User.UpdatedAt.Equal(want.User.UpdatedAt) || got.User.ID != "uid" || (img == nil) != (got.User.Image == nil) ||
			(img != nil && *got.User.Image != image) || got.User.Role != "admin" {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
		}
	}
	seal := func(plain []byte) string {
		aead := s.keys.cache
		out := make([]byte, aead.NonceSize())
		return base64.RawURLEncoding.EncodeToString(aead.Seal(out, out, plain, []byte(strings.Repeat("T", tokenLength))))
	}
	far := binary.AppendVarint(nil, now.Add(time.Hour).UnixMicro())
	valid := append([]byte{cacheVersion, 0}, bytes.Repeat(far, 7)...)
	for i := 0; i < 7; i++ {
		valid = append(valid, 1, 'x')
	}
	if _, ok := s.decodeCache([]byte(seal(valid)), strings.Repeat("T", tokenLength), now); !ok {
		t.Fatal("a well-formed hand-made payload was refused: the checks below would prove nothing")
	}
	for name, plain := range map[string][]byte{
		"version 1":               []byte(`{"v":1,"e":99999999999999999,"s":{},"u":{}}`),
		"empty":                   {},
		"version only":            {cacheVersion},
		"short times":             {cacheVersion, 0, 0x80},
		"missing strings":         valid[:len(valid)-2],
		"trailing bytes":          append(append([]byte{}, valid...), 0),
		"string too long":         append(append([]byte{}, valid[:len(valid)-2]...), 200, 'x'),
		"image flag, none":        append([]byte{cacheVersion, cacheHasImage}, valid[2:]...),
		"impersonator flag, none": append([]byte{cacheVersion, cacheImpersonated}, valid[2:]...),
	} {
		if _, ok := s.decodeCache([]byte(seal(plain)), strings.Repeat("T", tokenLength), now); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkDecodeCache measures answering a session from the cookie cache.
func BenchmarkDecodeCache(b *testing.B) {
	s := testService(b, secretA)
	now := s.now()
	st := &SessionState{Token: strings.Repeat("T", tokenLength),
		Session: models.Session{ID: "sid", UserID: "uid", ExpiresAt: now.Add(time.Hour), AbsoluteExpiresAt: now.Add(time.Hour), UpdatedAt: now},
		User:    models.User{ID: "uid", Email: "alice@example.com"}}
	value, _ := s.EncodeCache(st)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.decodeCache([]byte(value), st.Token, now); !ok {
			b.Fatal("not decoded")
		}
	}
}
