package betterauth

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"
)

// The hand-written session answer is byte for byte what encoding/json writes, for hostile strings
// (quotes, control characters, HTML, line separators, invalid UTF-8), a nil and a set image, and
// times with and without milliseconds, in and out of UTC.
func TestSessionJSONMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `"quoted" \back\slash`, "tab\tnew\nline\rcr\b\f\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "line\u2028para\u2029", "bad \xff\xfe utf8 \xe2\x82", "émoji 🙂 漢字", "end\\"}
	image := "https://example.com/a.png?x=<1>&y=2"
	times := []time.Time{
		time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("X", -7*3600)),
		time.Date(999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
	}
	random := func() string {
		var n [1]byte
		rand.Read(n[:])
		b := make([]byte, n[0]%24)
		rand.Read(b)
		return string(b)
	}
	for i := 0; i < 2000; i++ {
		str := func(k int) string {
			if i < len(strs) {
				return strs[(i+k)%len(strs)]
			}
			return random()
		}
		r := sessionResponse{
			Session: sessionJSON{ID: str(0), UserID: str(1), Token: str(2), ExpiresAt: isoTime(times[i%3]), IPAddress: str(3),
				UserAgent: str(4), CreatedAt: isoTime(times[(i+1)%3]), UpdatedAt: isoTime(times[(i+2)%3])},
			User: userJSON{ID: str(5), Name: str(6), Email: str(7), EmailVerified: i%2 == 0,
				CreatedAt: isoTime(times[(i+2)%3]), UpdatedAt: isoTime(times[i%3])},
		}
		if i%3 == 0 {
			r.User.Image = &image
		} else if i%3 == 1 {
			s := str(8)
			r.User.Image = &s
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func BenchmarkSessionJSON(b *testing.B) {
	image := "https://example.com/a.png"
	now := time.Now()
	r := sessionResponse{
		Session: sessionJSON{ID: "0d9e3d5a-8f0e-4f5e-9a63-0e7a9c1c2b11", UserID: "7f0e3d5a-8f0e-4f5e-9a63-0e7a9c1c2b11",
			Token: "Xk2m9Qe7rT1pL8wZ3vB6nH4jF0sD5aG2", ExpiresAt: isoTime(now), IPAddress: "203.0.113.7",
			UserAgent: "Mozilla/5.0 (X11; Linux x86_64)", CreatedAt: isoTime(now), UpdatedAt: isoTime(now)},
		User: userJSON{ID: "7f0e3d5a-8f0e-4f5e-9a63-0e7a9c1c2b11", Name: "Alice", Email: "alice@example.com",
			EmailVerified: true, Image: &image, CreatedAt: isoTime(now), UpdatedAt: isoTime(now)},
	}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = r.appendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(r)
		}
	})
}
