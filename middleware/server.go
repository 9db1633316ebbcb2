package middleware

import (
	"errors"
	"net"
	"syscall"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// pathLostKey marks, in a request's locals, a request whose path the HTTP server dropped before
// the app saw it (see HookServer).
type pathLostKey struct{}

// HookServer connects srv, the fasthttp server under the app, to the app's own answers for what
// srv refuses before the middleware chain runs: a body over the limit, a malformed request,
// headers too large. Fiber hands those to its ErrorHandler with a context no middleware has
// seen, and fasthttp has by then reset the request whenever reading it failed (a chunked body
// over the limit, a broken chunk, headers too large), so the handler would see "GET /" whatever
// was asked:
//   - a request whose line is gone is marked, and KindOf answers it as the API: a request the
//     server could not read is no page view (browsers send forms with a Content-Length, which
//     is refused before the reset and keeps its path), and JSON with the API's headers is the
//     most restrictive answer;
//   - a method the router does not know, which Fiber answers by itself in plain text without any
//     of the app's headers, is answered by the app's error handler with ErrUnknownMethod, and its
//     connection is closed: such a request never reaches the middleware chain, Framing
//     included, so nothing sent after it on the connection may be read as a request of its own.
//
// It must be called once, before app serves.
func HookServer(app *fiber.App) {
	srv := app.Server()
	serverError := srv.ErrorHandler
	srv.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
		if connectionLost(err) {
			// The client reset or broke the connection while sending: nobody is left to
			// answer, and it is no failure of the service's (Fiber would answer 502), so it
			// is neither answered, logged nor counted.
			ctx.SetConnectionClose()
			return
		}
		// A request that was read has header lines (HTTP/1.1 requires Host, and a request
		// without any has no body that could fail); a reset one has none.
		if len(ctx.Request.Header.RawHeaders()) == 0 {
			ctx.SetUserValue(pathLostKey{}, true)
		}
		serverError(ctx, err)
	}
	handler := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if !knownMethod(ctx.Method()) {
			ctx.SetConnectionClose()
			c := app.AcquireCtx(ctx)
			defer app.ReleaseCtx(c)
			if err := app.Config().ErrorHandler(c, ErrUnknownMethod); err != nil {
				ctx.SetStatusCode(fiber.StatusInternalServerError)
			}
			return
		}
		handler(ctx)
	}
}

// connectionLost reports an error of reading a request that says the connection itself failed
// (reset, broken, closed under the read), not that the request was bad or slow: a network error
// other than a timeout, as Fiber would turn into a 502.
func connectionLost(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) && !netErr.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// PathLost reports whether c is a request whose line and headers the HTTP server dropped before
// the app saw it (see HookServer): its method and path are fasthttp's defaults, not the client's.
func PathLost(c *fiber.Ctx) bool { return c.Locals(pathLostKey{}) != nil }

// ErrUnknownMethod refuses a request whose method the router does not know: 400, as Node's HTTP
// server (and so better-auth) answers one, rather than the 501 of RFC 9110, since the request is
// the client's error and the service's answers in the 500s mean its own.
var ErrUnknownMethod = fiber.NewError(fiber.StatusBadRequest, "Unknown request method")

// knownMethod reports whether the router knows method (NewApp keeps Fiber's default methods).
func knownMethod(method []byte) bool {
	for _, m := range fiber.DefaultMethods {
		if string(method) == m {
			return true
		}
	}
	return false
}
