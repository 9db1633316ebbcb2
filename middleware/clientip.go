package middleware

import (
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// ClientIP is the address of the client that sent the request, the one place it is worked out:
// x-forwarded-for when it holds exactly one valid address, then x-real-ip, then the connection's
// peer address. IPv4-mapped IPv6 addresses are reported as IPv4.
func ClientIP(c *fiber.Ctx) string {
	if a, ok := singleIP(c.Get(fiber.HeaderXForwardedFor)); ok {
		return a.String()
	}
	if a, ok := singleIP(c.Get("X-Real-Ip")); ok {
		return a.String()
	}
	if a, ok := netip.AddrFromSlice(c.Context().RemoteIP()); ok {
		return a.Unmap().String()
	}
	return ""
}

// singleIP parses a header value that must be exactly one IP address.
func singleIP(v string) (netip.Addr, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.IndexByte(v, ',') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
