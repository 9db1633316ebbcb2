package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"codeauth/auth/useragent"
	"codeauth/i18n"
	"codeauth/models"
)

// Devices: a session as a person reads it ("Chrome on macOS"), for the account page's devices
// card and the new-device notice. User agents are read by auth/useragent, which gives
// github.com/medama-io/go-useragent's answers from a table embedded in the binary, in under a
// microsecond and without an allocation.

// Device is what a User-Agent header says about the device a session is used from.
type Device struct {
	// Browser is the browser's family ("Chrome", "Safari"), or, for a client that is no known
	// browser, the product its header names first ("okhttp", "curl"); empty when the header
	// names nothing.
	Browser string
	// OS is the operating system as people write it ("macOS", "Windows", "iOS"), or empty.
	OS string
	// Kind is "phone", "tablet", "tv" or "" (a computer, or unknown).
	Kind string
}

// DeviceOf reads a User-Agent header. The answers for the headers seen most recently are kept
// (devices): a service sees the same few hundred headers again and again, and reading one walks
// a table too large for the processor's caches while PostgreSQL shares them (about 10 µs under a
// flow's load, against a map's lookup).
func DeviceOf(userAgent string) Device {
	userAgent = strings.TrimSpace(userAgent)
	if userAgent == "" {
		return Device{}
	}
	if d, ok := devices.get(userAgent); ok {
		return d
	}
	// A copy, read and kept: the header may be a view of a request buffer that the server reuses
	// (Fiber's strings are), and the answer's names can be cut from it (productOf).
	userAgent = strings.Clone(userAgent)
	d := readDevice(userAgent)
	devices.put(userAgent, d)
	return d
}

// deviceCacheSize bounds the headers devices keeps, and maxCachedUserAgent the length of one:
// at most about 1 MB. A client that sends a new header each time only makes the cache start
// afresh more often.
const (
	deviceCacheSize    = 2048
	maxCachedUserAgent = 512
)

// deviceCache keeps DeviceOf's answers by header, up to deviceCacheSize of them; when full, it
// starts afresh.
type deviceCache struct {
	mu sync.RWMutex
	m  map[string]Device
}

// devices is DeviceOf's cache: its answers depend on the header alone.
var devices deviceCache

// get is the answer kept for the header ua, if there is one.
func (c *deviceCache) get(ua string) (Device, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d, ok := c.m[ua]
	return d, ok
}

// put keeps the answer d for the header ua, which must be no view of a buffer that changes.
func (c *deviceCache) put(ua string, d Device) {
	if len(ua) > maxCachedUserAgent {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= deviceCacheSize {
		c.m = make(map[string]Device, 64)
	}
	c.m[ua] = d
}

// readDevice reads a User-Agent header that is not empty (DeviceOf, without the cache).
func readDevice(userAgent string) Device {
	ua := useragent.Parse(userAgent)
	d := Device{Browser: ua.Browser, OS: osName(ua.OS)}
	switch ua.Device {
	case useragent.DeviceMobile:
		d.Kind = "phone"
	case useragent.DeviceTablet:
		d.Kind = "tablet"
	case useragent.DeviceTV:
		d.Kind = "tv"
	}
	if d.Browser == "" {
		d.Browser = productOf(userAgent)
	}
	return d
}

// Platform is what the device runs on as people name it: its system ("macOS", "Windows"), or
// for iOS the device itself ("iPhone", "iPad"); "" when unknown.
func (d Device) Platform() string {
	if d.OS == "iOS" {
		switch d.Kind {
		case "phone":
			return "iPhone"
		case "tablet":
			return "iPad"
		}
	}
	return d.OS
}

// Name is the device as a person reads it, in English: "Chrome on macOS", "Safari on iPhone",
// "okhttp", or "Unknown device". Pages and e-mails say it in their language
// (i18n.Locale.DeviceName).
func (d Device) Name() string { return i18n.English().DeviceName(d.Browser, d.Platform()) }

// KnownDeviceWindow is how long an account remembers a device it signed in from: a sign-in from
// a device not seen for longer is new, and the account is told (the new-device notice).
const KnownDeviceWindow = 90 * 24 * time.Hour

// deviceSeenPrecision is how stale a known device's last sign-in may be before a sign-in writes
// it again: the window is counted in days, so a device used within the day needs no write.
const deviceSeenPrecision = 24 * time.Hour

// deviceKey is the keyed hash of d's family that known_devices stores: it says which sign-ins
// came from the same device without saying what the device is.
func (k *keys) deviceKey(d Device) string {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(k.device.sum(sum[:0], d.family()))
}

// family is what makes two sign-ins the same device for the new-device notice: the browser's
// family and the operating system, not their versions, which change with every update.
func (d Device) family() string { return d.Browser + "\x00" + d.OS }

// osName is the operating system as people write it: the parser's "MacOS" is "macOS".
func osName(os string) string {
	if os == "MacOS" {
		return "macOS"
	}
	return os
}

// productOf is the product of a header that names no known browser: the name before the first
// "/" ("okhttp/4.12" gives "okhttp"), or the whole header ("node"). It must be one word of letters,
// digits and ".-_" of at most 32 bytes, so a hostile header cannot put words of its own on a
// page or in an e-mail. "Mozilla" says nothing and gives "".
func productOf(userAgent string) string {
	end := strings.IndexByte(userAgent, '/')
	if end < 0 {
		end = len(userAgent)
	}
	product := userAgent[:end]
	if len(product) > 32 || strings.EqualFold(product, "Mozilla") {
		return ""
	}
	for _, r := range product {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_", r)) {
			return ""
		}
	}
	return product
}

// DeviceSession is one of an account's sessions as the devices card shows it.
type DeviceSession struct {
	// ID is the session's handle, the one revoke-session takes.
	ID     string
	Device Device
	// IPAddress is the address the session was signed in from.
	IPAddress string
	// SignedInAt is when the session was created.
	SignedInAt time.Time
	// ActiveAt is the latest time the session is known to have been used. A session is written
	// at most once per SessionRefreshAge (a day) when it is used, so its last use lies between
	// ActiveAt and a day later; Recent says that day has not passed.
	ActiveAt time.Time
	// Recent means the session may have been used at any moment up to now: its last write is
	// less than SessionRefreshAge ago.
	Recent bool
	// IdleFor is how long ago ActiveAt was, by the service's clock.
	IdleFor time.Duration
	// Current is the session of the request asking.
	Current bool
}

// Devices lists the live sessions of st's account as devices: the session of st first, marked
// Current, then the others newest first.
func (s *Service) Devices(ctx context.Context, st *SessionState) ([]DeviceSession, error) {
	sessions, err := s.ListSessions(ctx, st)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]DeviceSession, len(sessions))
	for i, sess := range sessions {
		out[i] = deviceSession(sess, st.Session.ID, now)
	}
	// The list is newest first; a stable sort keeps that order behind the current session.
	slices.SortStableFunc(out, func(a, b DeviceSession) int {
		switch {
		case a.Current == b.Current:
			return 0
		case a.Current:
			return -1
		}
		return 1
	})
	return out, nil
}

func deviceSession(sess models.Session, current string, now time.Time) DeviceSession {
	return DeviceSession{
		ID: sess.ID, Device: DeviceOf(sess.UserAgent), IPAddress: sess.IPAddress,
		SignedInAt: sess.CreatedAt, ActiveAt: sess.UpdatedAt,
		Recent:  now.Before(sess.UpdatedAt.Add(SessionRefreshAge)),
		IdleFor: max(now.Sub(sess.UpdatedAt), 0),
		Current: sess.ID == current,
	}
}
