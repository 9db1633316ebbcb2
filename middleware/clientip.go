package middleware

import (
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// clientAddr is what the resolver found for one request.
type clientAddr struct {
	addr netip.Addr
	ok   bool
	// configured: the resolver was told where the client is (AUTH_TRUSTED_PROXIES, or none), so
	// the client cannot have chosen addr (see VouchedIP).
	configured bool
}

const clientAddrKey = "codeauth.client"

// IPResolver works out the client's address, the one place this is done (rate limits, the
// session's ipAddress and the access log all read its answer).
//
// Without trusted proxies: x-forwarded-for when it holds exactly one valid address; without
// x-forwarded-for, x-real-ip when it holds one; with neither header, the connection's peer. A
// forwarded-for chain of several hops cannot be resolved without knowing the proxies: such a
// request has no client address (it is not guessed from a header the client may have written),
// unless x-real-ip names the chain's last hop, the one the nearest proxy appended.
//
// With no proxy in front (AUTH_TRUSTED_PROXIES=none): the connection's peer is the client, and
// the forwarding headers, which only the client could have written, are ignored.
//
// With trusted proxies (AUTH_TRUSTED_PROXIES): a peer outside them is the client itself and its
// headers are ignored. Behind a trusted peer, the x-forwarded-for chain is walked from the right
// past trusted hops and the first untrusted hop is the client; a malformed hop makes the address
// unresolvable (fail closed). An empty chain falls back to x-real-ip, then the peer.
//
// IPv4-mapped IPv6 addresses are IPv4. Rate limits group IPv6 addresses by /64 (RateKey).
type IPResolver struct {
	trusted []netip.Prefix
	direct  bool
	log     *slog.Logger
	warn    sync.Once
}

// NewIPResolver returns a resolver that trusts the given proxy networks, or, with direct, takes
// every connection's peer as the client.
func NewIPResolver(trusted []netip.Prefix, direct bool, log *slog.Logger) *IPResolver {
	return &IPResolver{trusted: trusted, direct: direct, log: log}
}

// Handler resolves the address of each request once and keeps it for ClientIP and RateKey.
func (r *IPResolver) Handler() fiber.Handler {
	return func(c *fiber.Ctx) error {
		r.note(c)
		return c.Next()
	}
}

// note resolves c's client address and keeps it in c's locals (ClientIP, VouchedIP).
func (r *IPResolver) note(c *fiber.Ctx) {
	addr, ok := r.resolve(c)
	if !ok {
		r.warn.Do(func() {
			r.log.WarnContext(c.UserContext(), "a client address could not be resolved: x-forwarded-for holds several "+
				"addresses and AUTH_TRUSTED_PROXIES does not cover them; such requests share one rate-limit bucket per route")
		})
	}
	c.Locals(clientAddrKey, clientAddr{addr: addr, ok: ok, configured: r.direct || len(r.trusted) > 0})
}

func (r *IPResolver) resolve(c *fiber.Ctx) (netip.Addr, bool) {
	h := &c.Context().Request.Header
	xff := h.PeekAll(fiber.HeaderXForwardedFor)
	peer, peerOK := netip.AddrFromSlice(c.Context().RemoteIP())
	peer = peer.Unmap()

	if r.direct {
		return peer, peerOK
	}
	if len(r.trusted) > 0 {
		if !peerOK || !r.isTrusted(peer) {
			return peer, peerOK
		}
		var hops []string
		for _, v := range xff {
			hops = append(hops, strings.Split(string(v), ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			a, ok := parseIP(hops[i])
			if !ok {
				return netip.Addr{}, false
			}
			if !r.isTrusted(a) {
				return a, true
			}
		}
		if len(hops) > 0 {
			// Every hop is a trusted proxy: the leftmost is as far back as the chain goes.
			a, _ := parseIP(hops[0])
			return a, true
		}
		if a, ok := singleIP(h.Peek("X-Real-Ip")); ok {
			return a, true
		}
		return peer, true
	}

	if len(xff) == 1 {
		if a, ok := singleIP(xff[0]); ok {
			return a, true
		}
	}
	realIP, realOK := singleIP(h.Peek("X-Real-Ip"))
	if len(xff) == 0 {
		if realOK {
			return realIP, true
		}
		if len(h.Peek("X-Real-Ip")) == 0 && peerOK {
			return peer, true
		}
		return netip.Addr{}, false
	}
	// A chain of several hops: x-real-ip is believed only when it names the hop the nearest
	// proxy appended, the last one. A proxy that appends to x-forwarded-for and sets x-real-ip
	// from the connection makes them agree; a client writing x-real-ip itself cannot choose a
	// different address, since the last hop is its own.
	if realOK {
		var last string
		for _, v := range xff {
			parts := strings.Split(string(v), ",")
			last = parts[len(parts)-1]
		}
		if a, ok := parseIP(last); ok && a == realIP {
			return realIP, true
		}
	}
	return netip.Addr{}, false
}

func (r *IPResolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// singleIP parses a header value that must be exactly one IP address.
func singleIP(v []byte) (netip.Addr, bool) {
	if len(v) == 0 || strings.IndexByte(string(v), ',') >= 0 {
		return netip.Addr{}, false
	}
	return parseIP(string(v))
}

// parseIP parses one address of a forwarding header: no port, no zone, no brackets.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// ClientIP is the client's address as text, or "" when it could not be resolved.
func ClientIP(c *fiber.Ctx) string {
	if ca, ok := c.Locals(clientAddrKey).(clientAddr); ok && ca.ok {
		return ca.addr.String()
	}
	return ""
}

// VouchedIP is ClientIP when the client cannot have chosen the address: the connection's peer,
// or a forwarding header under AUTH_TRUSTED_PROXIES; "" when the address came from a header the
// client may have written (no trusted proxies named). Pages show a person this one.
func VouchedIP(c *fiber.Ctx) string {
	ca, ok := c.Locals(clientAddrKey).(clientAddr)
	if !ok || !ca.ok {
		return ""
	}
	// Without AUTH_TRUSTED_PROXIES a forwarding header is believed for the limits (it is all
	// there is behind an unnamed proxy), but it may be the client's own writing. Looked at only
	// here, not in the resolver that every request runs.
	h := &c.Context().Request.Header
	if !ca.configured && (len(h.Peek(fiber.HeaderXForwardedFor)) > 0 || len(h.Peek("X-Real-Ip")) > 0) {
		return ""
	}
	return ca.addr.String()
}

// RateKey is the client's rate-limit identity: the IPv4 address, or the /64 network of an IPv6
// address (one host usually holds a whole /64, so single addresses would be free to rotate). It
// is "" when the address could not be resolved.
func RateKey(c *fiber.Ctx) string {
	ca, ok := c.Locals(clientAddrKey).(clientAddr)
	if !ok || !ca.ok {
		return ""
	}
	if ca.addr.Is6() {
		p, _ := ca.addr.Prefix(64)
		return p.String()
	}
	return ca.addr.String()
}
