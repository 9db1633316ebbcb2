package middleware

import (
	"bytes"

	"github.com/gofiber/fiber/v2"
)

// Framing refuses, with refuse and a closed connection, a request whose length another HTTP
// server on the way could read differently from fasthttp: more than one Content-Length (fasthttp
// takes the last), a Transfer-Encoding beside a Content-Length (fasthttp takes the
// Transfer-Encoding), more than one Transfer-Encoding, a Transfer-Encoding other than "chunked"
// (fasthttp reads anything but "identity" as chunked; RFC 9112 6.3 asks for 400), a
// Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1), folded header lines (obs-fold,
// which fasthttp joins to the line before and others may not; RFC 9112 5.2), and header lines
// ended by a bare LF, which fasthttp accepts and others may read as part of the line (RFC 9112
// 2.2). A proxy that took
// another reading would see the rest of the body as a second request, smuggled past it; closing
// the connection drops whatever was sent after the refused request (catalogue #118, ASVS 4.2.1).
//
// fasthttp has read the body by its own reading when this runs, and it keeps the header block as
// received, so the check reads that block once, without allocating. Requests fasthttp refuses
// itself (a malformed Content-Length, a space before a colon) never get here.
func Framing(refuse error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		h := &c.Request().Header
		if ambiguousFraming(h.RawHeaders(), h.IsHTTP11()) {
			c.Context().SetConnectionClose()
			return refuse
		}
		return c.Next()
	}
}

// ambiguousFraming reports whether the raw header block of a request (as received, one header a
// line) frames its body in a way two servers could read differently; see Framing.
func ambiguousFraming(raw []byte, http11 bool) bool {
	const contentLength, transferEncoding = "content-length", "transfer-encoding"
	lengths, encodings := 0, 0
	// Only the first bytes of each line are looked at, and only lines that start like the two
	// names (or with white space) further: most lines cost one search for their end.
	for line := raw; len(line) > 0; {
		switch c := line[0]; {
		case c == ' ' || c == '\t':
			return true // obs-fold: the continuation of the line before
		case c|0x20 == 'c': // ASCII lower case
			if len(line) > len(contentLength) && line[len(contentLength)] == ':' &&
				equalFoldASCII(line[:len(contentLength)], contentLength) {
				lengths++
			}
		case c|0x20 == 't':
			if len(line) > len(transferEncoding) && line[len(transferEncoding)] == ':' &&
				equalFoldASCII(line[:len(transferEncoding)], transferEncoding) {
				encodings++
				value := line[len(transferEncoding)+1:]
				if end := bytes.IndexByte(value, '\n'); end >= 0 {
					value = value[:end]
				}
				if !equalFoldASCII(trimOWS(value), "chunked") {
					return true
				}
			}
		}
		end := bytes.IndexByte(line, '\n')
		if end < 0 {
			break
		}
		if end == 0 || line[end-1] != '\r' {
			return true // a bare LF ends the line: fasthttp takes it, others may not
		}
		line = line[end+1:]
	}
	return lengths > 1 || encodings > 1 || (encodings > 0 && (lengths > 0 || !http11))
}

// trimOWS trims the spaces and tabs around a header value, and the carriage return ending its
// line.
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[len(v)-1] == '\r' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	return v
}
