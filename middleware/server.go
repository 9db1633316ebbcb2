package middleware

import (
	"errors"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// pathLostKey marks, in a request's locals, a request whose path the HTTP server dropped before
// the app saw it (see HookServer).
type pathLostKey struct{}

// errUnknownMethod is a request method the router does not know.
var errUnknownMethod = errors.New("unknown request method")

// HookServer connects srv, the fasthttp server under the app, to the app's own answers for what
// srv refuses before the middleware chain runs: a body over the limit, a malformed request,
// headers too large. Fiber hands those to its ErrorHandler with a context no middleware has
// seen, and fasthttp has by then reset the request whenever reading it failed, so the handler
// would see "GET /" whatever was asked:
//   - a chunked body is the only one that can run over the limit after its headers were read (a
//     Content-Length over it is refused before the request is reset), so the request line of each
//     chunked request is kept while its body is read and put back when the body is too large:
//     the 413 is JSON under /api and a page elsewhere, each with its own headers;
//   - any other request whose line is gone is marked, and KindOf answers it as the API: a request
//     the server could not read is no page view, and JSON with the API's headers is the most
//     restrictive answer;
//   - a method the router does not know, which Fiber answers by itself in plain text without any
//     of the app's headers, goes to the same error handler.
//
// It must be called once, before srv serves.
func HookServer(srv *fasthttp.Server) {
	lines := &chunkedLines{}
	headerReceived := srv.HeaderReceived
	srv.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		// fasthttp reads any Transfer-Encoding but "identity" as chunked: ContentLength is -1.
		if h.ContentLength() == -1 {
			lines.remember(h)
		}
		if headerReceived != nil {
			return headerReceived(h)
		}
		return fasthttp.RequestConfig{}
	}
	serverError := srv.ErrorHandler
	srv.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		// A request that was read has header lines (HTTP/1.1 requires Host, and a request
		// without any has no body that could fail); a reset one has none.
		if h := &ctx.Request.Header; len(h.RawHeaders()) == 0 {
			if !errors.Is(err, fasthttp.ErrBodyTooLarge) || !lines.restore(h) {
				ctx.SetUserValue(pathLostKey{}, true)
			}
		}
		serverError(ctx, err)
	}
	handler := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if !knownMethod(ctx.Method()) {
			srv.ErrorHandler(ctx, errUnknownMethod)
			return
		}
		handler(ctx)
	}
}

// knownMethod reports whether the router knows method (NewApp keeps Fiber's default methods).
func knownMethod(method []byte) bool {
	for _, m := range fiber.DefaultMethods {
		if string(method) == m {
			return true
		}
	}
	return false
}

// chunkedLines keeps the request lines of the latest requests with chunked bodies, by the header
// they belong to (one per connection, reused for each of its requests). It holds a fixed number
// of slots, overwritten in turn, so it needs no cleaning and keeps at most that many headers
// from being collected: a line evicted by more concurrent chunked uploads than slots only makes
// that request's 413 a JSON answer.
type chunkedLines struct {
	mu    sync.Mutex
	slots [64]chunkedLine
	next  int
}

type chunkedLine struct {
	header      *fasthttp.RequestHeader
	method, uri []byte
}

// remember keeps h's request line.
func (l *chunkedLines) remember(h *fasthttp.RequestHeader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.find(h)
	if s == nil {
		s = &l.slots[l.next]
		l.next = (l.next + 1) % len(l.slots)
	}
	s.header = h
	s.method = append(s.method[:0], h.Method()...)
	s.uri = append(s.uri[:0], h.RequestURI()...)
}

// restore puts back the request line kept for h and forgets it; false when there is none.
func (l *chunkedLines) restore(h *fasthttp.RequestHeader) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.find(h)
	if s == nil {
		return false
	}
	h.SetMethodBytes(s.method)
	h.SetRequestURIBytes(s.uri)
	s.header = nil
	return true
}

func (l *chunkedLines) find(h *fasthttp.RequestHeader) *chunkedLine {
	for i := range l.slots {
		if l.slots[i].header == h {
			return &l.slots[i]
		}
	}
	return nil
}
