package auth

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"codeauth/models"
)

// The devices card and the new-device notice name a session's device the way people read it,
// from the header browsers and apps send.
func TestDeviceOf_Names(t *testing.T) {
	for _, tc := range []struct{ ua, want string }{
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome on macOS"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iPhone"},
		{"Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iPad"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox on Windows"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Edge on Windows"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
		{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome on ChromeOS"},
		{"okhttp/4.12.0", "okhttp"},
		{"curl/8.5.0", "curl"},
		{"node", "node"},
		{"", "Unknown device"},
		{"   ", "Unknown device"},
		{"Mozilla/5.0 (compatible)", "Unknown device"},
		// A hostile header puts no words of its own on a page or in an e-mail.
		{"Click<script>here/1.0", "Unknown device"},
		{"Your account is locked, call +1 555/1", "Unknown device"},
		{strings.Repeat("a", 33) + "/1.0", "Unknown device"},
		{"Ünïcode/1.0", "Unknown device"},
	} {
		if got := DeviceOf(tc.ua).Name(); got != tc.want {
			t.Errorf("DeviceOf(%q).Name() = %q, want %q", tc.ua, got, tc.want)
		}
	}
}

// A header read again is answered from DeviceOf's cache exactly as it is read afresh, and the
// cache stays bounded however many headers it is shown.
func TestDeviceOf_CacheAnswersAsAFreshRead(t *testing.T) {
	ua := "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
	first, again := DeviceOf(ua), DeviceOf(" "+ua+" ")
	if want := readDevice(ua); first != want || again != want {
		t.Fatalf("read %+v, then %+v; a fresh read gives %+v", first, again, want)
	}
	if _, ok := devices.get(ua); !ok {
		t.Fatal("the header read is not kept")
	}
	for i := range deviceCacheSize + 10 {
		name := fmt.Sprintf("client%d/1.0", i)
		if d := DeviceOf(name); d.Browser != fmt.Sprintf("client%d", i) {
			t.Fatalf("DeviceOf(%q) = %+v", name, d)
		}
	}
	if n := len(devices.m); n > deviceCacheSize {
		t.Fatalf("the cache holds %d headers; at most %d", n, deviceCacheSize)
	}
	long := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) " + strings.Repeat("x", maxCachedUserAgent)
	if d := DeviceOf(long); d != readDevice(long) {
		t.Fatalf("a long header read %+v", d)
	}
	if _, ok := devices.get(long); ok {
		t.Fatal("a header longer than maxCachedUserAgent is kept")
	}
}

// The notice's notion of the same device ignores versions, which change with every update, but
// not the browser or the system.
func TestDeviceOf_FamilyIgnoresVersions(t *testing.T) {
	chrome130 := DeviceOf("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36")
	chrome131 := DeviceOf("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.86 Safari/537.36")
	chromeWin := DeviceOf("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")
	if chrome130.family() != chrome131.family() {
		t.Errorf("an update made a new device: %q vs %q", chrome130.family(), chrome131.family())
	}
	if chrome131.family() == chromeWin.family() {
		t.Errorf("Chrome on macOS and on Windows are one device: %q", chromeWin.family())
	}
}

// The activity shown is what the session's writes prove: used at ActiveAt, and possibly at any
// moment up to now while that write is less than a day old.
func TestDeviceSession_Activity(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	sess := models.Session{ID: "a", CreatedAt: now.Add(-72 * time.Hour), UpdatedAt: now.Add(-3 * time.Hour), UserAgent: "curl/8"}
	d := deviceSession(sess, "b", now)
	if !d.Recent || d.Current || !d.ActiveAt.Equal(sess.UpdatedAt) || !d.SignedInAt.Equal(sess.CreatedAt) || d.Device.Name() != "curl" {
		t.Errorf("deviceSession = %+v", d)
	}
	sess.UpdatedAt = now.Add(-SessionRefreshAge)
	if d := deviceSession(sess, "a", now); d.Recent || !d.Current {
		t.Errorf("a session last written a day ago: %+v", d)
	}
}

// BenchmarkDeviceOf reads a browser's header: from DeviceOf's cache, and afresh.
func BenchmarkDeviceOf(b *testing.B) {
	ua := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_ = DeviceOf(ua)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			_ = readDevice(ua)
		}
	})
}

// A header read from a request buffer the server reuses (Fiber hands out such views) is kept
// as it was: its answer, cut from it for a client that is no known browser, does not change
// when the buffer does.
func TestDeviceOf_KeepsNoViewOfTheRequest(t *testing.T) {
	buf := []byte("acmeapp/2.1 (build 7)")
	header := unsafe.String(&buf[0], len(buf))
	if d := DeviceOf(header); d.Browser != "acmeapp" {
		t.Fatalf("read %+v", d)
	}
	copy(buf, "Zzzzzzzzzzzzzzzzzzzzz") // the next request
	if d := DeviceOf("acmeapp/2.1 (build 7)"); d.Browser != "acmeapp" {
		t.Fatalf("after the buffer changed, the kept answer reads %+v", d)
	}
	devices.mu.RLock()
	defer devices.mu.RUnlock()
	for ua, d := range devices.m {
		if strings.Contains(ua+d.Browser+d.OS, "Zzz") {
			t.Fatalf("the cache holds a view of the request: %q -> %+v", ua, d)
		}
	}
}
