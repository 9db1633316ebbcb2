package auth

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxEmailLength is the longest address accepted (RFC 5321 path limit less the angle brackets).
const MaxEmailLength = 254

const maxLocalLength = 64

// idnaProfile converts internationalised domain names to their ASCII (punycode) form with the
// rules browsers use for lookups, so "exämple.test" and "xn--exmple-cua.test" are one domain.
var idnaProfile = idna.New(idna.MapForLookup(), idna.StrictDomainName(true), idna.Transitional(false), idna.VerifyDNSLength(true))

// NormalizeEmail returns the canonical form of an address, the identity used everywhere: spaces
// and tabs around it are trimmed, the domain is lower-cased and converted to punycode, and the
// local part is lower-cased.
//
// Only a bare addr-spec with a dot-atom local part of ASCII characters is accepted. Quoted local
// parts, comments, display names, domain literals, a second '@', control characters and any
// non-ASCII local part are rejected, as are RFC 2047 encoded-words. That is stricter than RFC 5322 on purpose: it leaves one
// spelling per mailbox, so Unicode case tricks ("K" KELVIN SIGN, dotless i) cannot reach someone
// else's account, and nothing that a mail system might read as a header or a second recipient
// gets through. net/mail.ParseAddress is not used: it accepts display names and comments.
func NormalizeEmail(raw string) (string, error) {
	// Refuse long input before doing any work on it.
	if len(raw) > MaxEmailLength+64 {
		return "", ErrInvalidEmail
	}
	s := strings.Trim(raw, " \t")
	if s == "" || len(s) > MaxEmailLength || !utf8.ValidString(s) {
		return "", ErrInvalidEmail
	}
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || at == len(s)-1 {
		return "", ErrInvalidEmail
	}
	local, domain := s[:at], s[at+1:]
	// "=?" opens an RFC 2047 encoded-word, which some mail software decodes into another address.
	if len(local) > maxLocalLength || !isDotAtom(local) || strings.Contains(local, "=?") {
		return "", ErrInvalidEmail
	}
	domain, ok := normalizeDomain(domain)
	if !ok {
		return "", ErrInvalidEmail
	}
	out := strings.ToLower(local) + "@" + domain
	if len(out) > MaxEmailLength {
		return "", ErrInvalidEmail
	}
	return out, nil
}

// isDotAtom reports whether s is atext characters separated by single dots (RFC 5322 3.2.3).
func isDotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	prevDot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if prevDot {
				return false
			}
			prevDot = true
			continue
		}
		prevDot = false
		if !isAtext(c) {
			return false
		}
	}
	return true
}

func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

// normalizeDomain returns the lower-case ASCII form of a host name with at least two labels and
// a top-level label that is not all digits (so IP addresses are refused).
func normalizeDomain(d string) (string, bool) {
	for i := 0; i < len(d); i++ {
		// Control characters, spaces and anything that could end a header or a list.
		if c := d[i]; c <= ' ' || c == 0x7f || strings.IndexByte("()<>[]:;,\\\"@", c) >= 0 {
			return "", false
		}
	}
	ascii, err := idnaProfile.ToASCII(d)
	if err != nil {
		return "", false
	}
	ascii = strings.ToLower(ascii)
	// A punycode label must decode to a valid name that encodes back to itself; otherwise two
	// spellings could name one domain.
	if again, err := idnaProfile.ToASCII(ascii); err != nil || again != ascii {
		return "", false
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	tld := labels[len(labels)-1]
	allDigits := true
	for i := 0; i < len(tld); i++ {
		if tld[i] < '0' || tld[i] > '9' {
			allDigits = false
			break
		}
	}
	return ascii, !allDigits
}
