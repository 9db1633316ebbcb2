package middleware

import (
	"strings"
	"testing"
)

// headerBlock joins header lines as fasthttp keeps them: each ended by CRLF, then an empty line.
func headerBlock(lines ...string) []byte {
	return []byte(strings.Join(lines, "\r\n") + "\r\n\r\n")
}

// Catalogue #118, ASVS 4.2.1: a body length two servers could read differently is refused, and so
// is a header block whose lines two servers could split differently (folded, or ended by a bare
// LF); one Content-Length, or Transfer-Encoding: chunked alone, is not.
func TestAmbiguousFraming(t *testing.T) {
	for name, block := range map[string][]byte{
		"two lengths":            headerBlock("Host: x", "Content-Length: 5", "Content-Length: 2"),
		"two equal lengths":      headerBlock("Host: x", "Content-Length: 2", "content-length: 2"),
		"length and chunked":     headerBlock("Host: x", "Content-Length: 4", "Transfer-Encoding: chunked"),
		"chunked and length":     headerBlock("transfer-encoding: chunked", "CONTENT-LENGTH: 4", "Host: x"),
		"chunked twice":          headerBlock("Host: x", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"),
		"chunked, chunked":       headerBlock("Host: x", "Transfer-Encoding: chunked, chunked"),
		"gzip, chunked":          headerBlock("Host: x", "Transfer-Encoding: gzip, chunked"),
		"identity":               headerBlock("Host: x", "Transfer-Encoding: identity", "Content-Length: 2"),
		"identity alone":         headerBlock("Host: x", "Transfer-Encoding: identity"),
		"xchunked":               headerBlock("Host: x", "Transfer-Encoding: xchunked"),
		"empty encoding":         headerBlock("Host: x", "Transfer-Encoding:"),
		"folded encoding":        headerBlock("Host: x", "Transfer-Encoding: chunked", " , identity"),
		"folded other header":    headerBlock("Host: x", "X-A: a", "\tb", "Content-Length: 2"),
		"bare LF, two lengths":   []byte("Host: x\nContent-Length: 1\nContent-Length: 2\n\n"),
		"no CR, length, chunked": []byte("Content-Length: 4\nTransfer-Encoding: chunked\n\n"),
		"bare LF, one length":    []byte("Host: x\nContent-Length: 1\n\n"),
		"one bare LF":            []byte("Host: x\r\nX-A: a\nContent-Length: 1\r\n\r\n"),
		"bare LF at the end":     []byte("Host: x\r\nContent-Length: 1\r\n\n"),
	} {
		if !ambiguousFraming(block, true) {
			t.Errorf("%s: not refused", name)
		}
	}
	if !ambiguousFraming(headerBlock("Host: x", "Transfer-Encoding: chunked"), false) {
		t.Error("chunked in HTTP/1.0: not refused")
	}
	for name, block := range map[string][]byte{
		"nothing":               nil,
		"no body":               headerBlock("Host: x", "Accept: */*"),
		"one length":            headerBlock("Host: x", "Content-Type: application/json", "Content-Length: 2"),
		"chunked":               headerBlock("Host: x", "Transfer-Encoding: chunked"),
		"Chunked, spaced":       headerBlock("Host: x", "transfer-encoding:   Chunked \t"),
		"lookalike names":       headerBlock("Host: x", "Content-Length-X: 1", "Content-Lengths: 2", "Content-Length: 3", "Transfer-Encodings: gzip", "TE: trailers"),
		"length in a value":     headerBlock("Host: x", "X-Note: Content-Length: 9", "Content-Length: 3"),
		"cookie and type first": headerBlock("Cookie: content-length: 1", "Content-Type: text/plain", "Content-Length: 3"),
	} {
		if ambiguousFraming(block, true) {
			t.Errorf("%s: refused", name)
		}
	}
}

// BenchmarkAmbiguousFraming measures the check on the header blocks of a browser's form post and
// of an API client's request. It runs once for every request.
func BenchmarkAmbiguousFraming(b *testing.B) {
	for name, block := range map[string][]byte{
		"browser": headerBlock(
			"Host: auth.example.com",
			"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
			"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
			"Accept-Language: en-GB,en;q=0.5",
			"Accept-Encoding: gzip, deflate, br, zstd",
			"Content-Type: application/x-www-form-urlencoded",
			"Content-Length: 64",
			"Origin: https://auth.example.com",
			"Connection: keep-alive",
			"Referer: https://auth.example.com/auth/sign-in",
			"Cookie: auth.session_token=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl",
			"Upgrade-Insecure-Requests: 1",
			"Sec-Fetch-Dest: document",
			"Sec-Fetch-Mode: navigate",
			"Sec-Fetch-Site: same-origin",
			"Sec-Fetch-User: ?1",
			"Priority: u=0, i",
		),
		"api": headerBlock(
			"Host: auth.example.com",
			"User-Agent: okhttp/4.12.0",
			"Authorization: Bearer Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4.c2lnbmF0dXJl",
			"Content-Type: application/json",
			"Content-Length: 48",
			"Accept-Encoding: gzip",
		),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(block)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if ambiguousFraming(block, true) {
					b.Fatal("refused")
				}
			}
		})
	}
}
