package auth

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// cleanText makes client-supplied text (a User-Agent header) safe to store and show: invalid
// UTF-8 becomes U+FFFD, control characters (NUL, which PostgreSQL refuses in text, among them)
// are dropped, and the result is cut to at most n bytes without splitting a character.
func cleanText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
