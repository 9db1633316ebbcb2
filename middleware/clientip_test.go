package middleware

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// resolveWith runs the resolver in a tiny app and returns ClientIP and RateKey for a request
// with the given header pairs. app.Test connects from 0.0.0.0.
func resolveWith(t *testing.T, trusted []string, header ...string) (ip, key string) {
	t.Helper()
	return resolve(t, trusted, false, header...)
}

// resolve is resolveWith, with direct as AUTH_TRUSTED_PROXIES=none.
func resolve(t *testing.T, trusted []string, direct bool, header ...string) (ip, key string) {
	t.Helper()
	var prefixes []netip.Prefix
	for _, p := range trusted {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	r := NewIPResolver(prefixes, direct, slog.New(slog.NewTextHandler(io.Discard, nil)))
	app := fiber.New(fiber.Config{ReadBufferSize: 16384})
	app.Use(r.Handler())
	app.Get("/", func(c *fiber.Ctx) error {
		return c.SendString(ClientIP(c) + "|" + RateKey(c))
	})
	req := httptest.NewRequest("GET", "/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	ip, key, _ = strings.Cut(string(b), "|")
	return ip, key
}

// Catalogue D35-D39: which address counts as the client's, without trusted proxies.
func TestClientIP_WithoutTrustedProxies(t *testing.T) {
	cases := []struct {
		name    string
		header  []string
		ip, key string
	}{
		{"no headers: the peer", nil, "0.0.0.0", "0.0.0.0"},
		{"one forwarded address", []string{"X-Forwarded-For", "203.0.113.7"}, "203.0.113.7", "203.0.113.7"},
		{"spaces around it", []string{"X-Forwarded-For", " 203.0.113.7 "}, "203.0.113.7", "203.0.113.7"},
		{"IPv4-mapped IPv6", []string{"X-Forwarded-For", "::ffff:1.2.3.4"}, "1.2.3.4", "1.2.3.4"},
		{"IPv6 grouped by /64", []string{"X-Forwarded-For", "2001:DB8:1:2:0:0:0:1"}, "2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"chain: unresolved", []string{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}, "", ""},
		{"chain, x-real-ip is the last hop", []string{"X-Forwarded-For", "198.51.100.1, 203.0.113.7", "X-Real-Ip", "203.0.113.7"}, "203.0.113.7", "203.0.113.7"},
		{"chain, x-real-ip chosen by the client", []string{"X-Forwarded-For", "198.51.100.1, 203.0.113.7", "X-Real-Ip", "203.0.113.9"}, "", ""},
		{"invalid x-forwarded-for, x-real-ip", []string{"X-Forwarded-For", "unknown", "X-Real-Ip", "203.0.113.9"}, "", ""},
		{"invalid x-real-ip alone", []string{"X-Real-Ip", "nope"}, "", ""},
		{"x-real-ip alone", []string{"X-Real-Ip", "203.0.113.9"}, "203.0.113.9", "203.0.113.9"},
		{"two forwarded headers", []string{"X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "203.0.113.7"}, "", ""},
		{"unknown", []string{"X-Forwarded-For", "unknown"}, "", ""},
		{"with a port", []string{"X-Forwarded-For", "1.2.3.4:80"}, "", ""},
		{"out of range", []string{"X-Forwarded-For", "999.1.1.1"}, "", ""},
		{"empty hop", []string{"X-Forwarded-For", "1.2.3.4, , 5.6.7.8"}, "", ""},
		{"zone", []string{"X-Forwarded-For", "fe80::1%eth0"}, "", ""},
		{"bracketed", []string{"X-Forwarded-For", "[2001:db8::1]"}, "", ""},
		{"8 KB", []string{"X-Forwarded-For", strings.Repeat("1", 7000)}, "", ""},
	}
	for _, c := range cases {
		ip, key := resolveWith(t, nil, c.header...)
		if ip != c.ip || key != c.key {
			t.Errorf("%s: got %q/%q, want %q/%q", c.name, ip, key, c.ip, c.key)
		}
	}
}

// Catalogue D37: with AUTH_TRUSTED_PROXIES the chain is walked from the right past trusted hops;
// a peer that is not a trusted proxy is the client whatever its headers say.
func TestClientIP_WithTrustedProxies(t *testing.T) {
	proxies := []string{"0.0.0.0/32", "10.0.0.0/8"}
	cases := []struct {
		name   string
		header []string
		ip     string
	}{
		{"rightmost untrusted hop", []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.5"}, "203.0.113.7"},
		{"spoofed left part ignored", []string{"X-Forwarded-For", "7.7.7.7, 203.0.113.7, 10.0.0.5"}, "203.0.113.7"},
		{"split over headers", []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7", "X-Forwarded-For", "10.0.0.5"}, "203.0.113.7"},
		{"malformed hop fails closed", []string{"X-Forwarded-For", "203.0.113.7, garbage, 10.0.0.5"}, ""},
		{"all hops trusted: leftmost", []string{"X-Forwarded-For", "10.1.1.1, 10.0.0.5"}, "10.1.1.1"},
		{"no chain: x-real-ip", []string{"X-Real-Ip", "203.0.113.9"}, "203.0.113.9"},
		{"no headers: the proxy itself", nil, "0.0.0.0"},
	}
	for _, c := range cases {
		if ip, _ := resolveWith(t, proxies, c.header...); ip != c.ip {
			t.Errorf("%s: got %q, want %q", c.name, ip, c.ip)
		}
	}
	// A peer outside the trusted proxies is the client; its forwarding headers are ignored.
	if ip, _ := resolveWith(t, []string{"10.0.0.0/8"}, "X-Forwarded-For", "203.0.113.7"); ip != "0.0.0.0" {
		t.Errorf("untrusted peer: got %q, want the peer", ip)
	}
}

// Catalogue D35, ASVS 4.1.3: with AUTH_TRUSTED_PROXIES=none clients connect directly, so every
// forwarding header is the client's own words and the connection's address is the client's.
func TestClientIP_NoProxy(t *testing.T) {
	for _, header := range [][]string{
		nil,
		{"X-Forwarded-For", "203.0.113.7"},
		{"X-Real-Ip", "203.0.113.9"},
		{"X-Forwarded-For", "198.51.100.1, 203.0.113.7", "X-Real-Ip", "203.0.113.7"},
		{"X-Forwarded-For", "unknown"},
		{"Forwarded", "for=203.0.113.7"},
	} {
		if ip, key := resolve(t, nil, true, header...); ip != "0.0.0.0" || key != "0.0.0.0" {
			t.Errorf("%q: got %q/%q, want the peer 0.0.0.0", header, ip, key)
		}
	}
}

// FuzzClientIP checks that no header value crashes the resolver, and that an address it resolves
// is a valid, unmapped, zone-free IP (catalogue R13).
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4, 5.6.7.8", "::ffff:1.2.3.4", "unknown", "2001:db8::1", ", ,"} {
		f.Add(s, "10.0.0.1")
	}
	app := fiber.New()
	r := NewIPResolver([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/32")}, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	app.Use(r.Handler())
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString(ClientIP(c)) })
	f.Fuzz(func(t *testing.T, xff, realIP string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header["X-Forwarded-For"] = []string{xff}
		req.Header["X-Real-Ip"] = []string{realIP}
		resp, err := app.Test(req, -1)
		if err != nil {
			return // a header the HTTP layer itself refuses
		}
		b, _ := io.ReadAll(resp.Body)
		if len(b) == 0 {
			return
		}
		a, err := netip.ParseAddr(string(b))
		if err != nil || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("resolved %q from %q / %q", b, xff, realIP)
		}
	})
}
