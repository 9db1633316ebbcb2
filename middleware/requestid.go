// Package middleware holds what runs around the handlers: request ids and the access log, the
// client address, and session loading from the cookie or bearer credential.
package middleware

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"codeauth/auth"

	"github.com/gofiber/fiber/v2"
)

// RequestIDHeader is the response header carrying the request id.
const RequestIDHeader = "X-Request-Id"

// requestIDs hands out ids unique to this process: a random prefix chosen at start and a counter.
// Cheaper than random bytes per request, and just as good for finding a request in the logs.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return &requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

func (r *requestIDs) next() string { return r.prefix + strconv.FormatUint(r.n.Add(1), 36) }

// AccessLog gives each request an id, sets X-Request-Id, puts the id in the request's context
// for log lines written further down, and writes one access-log line per request: through
// Handler for what the router serves, and through Refused for what the HTTP server refuses
// before any middleware runs (a body or headers too large, a malformed request, an unknown
// method), so that those are logged, counted and answered with an id too.
//
// The line holds the method, the path without its query string (which may carry a link token),
// the status, the duration and the client address; never headers, cookies or bodies.
//
// With an observer, each answered request is also reported to it, by the route it matched.
type AccessLog struct {
	log          *slog.Logger
	errorHandler fiber.ErrorHandler
	observer     Observer
	ips          *IPResolver
	ids          *requestIDs
}

// NewAccessLog returns the access log of an app whose errors errorHandler answers; ips, when
// set, resolves the client's address of a request Refused answers (Handler's requests have it
// resolved by the IP resolver's middleware).
func NewAccessLog(log *slog.Logger, errorHandler fiber.ErrorHandler, observer Observer, ips *IPResolver) *AccessLog {
	return &AccessLog{log: log, errorHandler: errorHandler, observer: observer, ips: ips, ids: newRequestIDs()}
}

// RequestTimeout bounds the work of one request: past it, what the request still waits for (a
// database that hangs without refusing, a connection that never comes) ends with
// context.DeadlineExceeded, which is a 503. The session reads' own bound (10 s a batch) is
// shorter, so they fail by theirs first.
const RequestTimeout = 15 * time.Second

// Handler is the outermost middleware of the app's own: errors returned further in are turned
// into responses here, by the error handler, so the line records the final status. The request's
// context ends at RequestTimeout, or when it is answered.
func (a *AccessLog) Handler() fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := a.begin(c)
		ctx, cancel := context.WithTimeout(c.UserContext(), RequestTimeout)
		defer cancel()
		c.SetUserContext(ctx)
		if err := c.Next(); err != nil {
			if herr := a.errorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
		}
		a.end(c, start, c.Method(), RouteOf(c), c.Path())
		return nil
	}
}

// Refused answers, with answer, a request the HTTP server refused before the middleware chain
// ran, and logs it as Handler logs the others.
func (a *AccessLog) Refused(c *fiber.Ctx, answer func() error) error {
	start := a.begin(c)
	if a.ips != nil {
		a.ips.note(c)
	}
	err := answer()
	if err != nil {
		_ = c.SendStatus(fiber.StatusInternalServerError)
	}
	// No route matched it; and Fiber's Route for an unrouted request is its path as sent, which
	// must never become a metric's label. A request the server reset has no method or path left
	// to log (fasthttp's defaults stand in for them).
	method, path := c.Method(), c.Path()
	if PathLost(c) {
		method, path = "", ""
	}
	a.end(c, start, method, UnmatchedRoute, path)
	return nil
}

// begin gives c its id.
func (a *AccessLog) begin(c *fiber.Ctx) time.Time {
	start := time.Now()
	id := a.ids.next()
	c.Set(RequestIDHeader, id)
	c.SetUserContext(auth.WithRequest(c.UserContext(), &request{id: id, c: c}))
	return start
}

// end reports c, answered, to the observer under method and route, and logs it with path.
func (a *AccessLog) end(c *fiber.Ctx, start time.Time, method, route, path string) {
	status := c.Response().StatusCode()
	took := time.Since(start)
	if a.observer != nil {
		a.observer.Request(method, route, status, took)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	a.log.LogAttrs(c.UserContext(), level, AccessLogMessage,
		slog.String("method", method),
		slog.String("path", path),
		slog.Int("status", status),
		slog.Duration("duration", took),
		slog.String("ip", ClientIP(c)),
	)
}

// Observer is told what the HTTP layer did, for the metrics: every answered request, and every
// request a per-IP rule refused. It is called on the request's goroutine and must be quick.
type Observer interface {
	// Request reports an answered request: its method, the route template it matched (RouteOf),
	// its status and how long it took.
	Request(method, route string, status int, took time.Duration)
	// Refused reports a request refused by the per-IP rule of that name.
	Refused(rule string)
}

// UnmatchedRoute is RouteOf for a request that matched no route: one label for every unknown path,
// so a scan of random paths cannot grow the metrics.
const UnmatchedRoute = "unmatched"

// RouteOf is the template of the route that answered c ("/api/auth/get-session",
// "/static/:name"), never the path itself, which may hold ids or tokens.
func RouteOf(c *fiber.Ctx) string {
	r := c.Route()
	if r == nil || r.Path == "" || r.Path == "/" && c.Path() != "/" {
		return UnmatchedRoute
	}
	return r.Path
}

// unavailableRetryAfter is the Retry-After of a 503: about as long as a database restart or a
// failover takes to begin answering again.
const unavailableRetryAfter = "5"

// NoteUnavailable does for a 503 what every one gets, whoever writes its body (the error handler,
// or a page that words it in its own place): a warning with the cause in the log, and
// Retry-After.
func NoteUnavailable(c *fiber.Ctx, log *slog.Logger, err error) {
	log.WarnContext(c.UserContext(), "database unavailable", "method", c.Method(), "path", c.Path(), "error", err)
	c.Set(fiber.HeaderRetryAfter, unavailableRetryAfter)
}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if src := auth.RequestFrom(ctx); src != nil {
		return src.RequestID()
	}
	return ""
}

// request is the request under way as the audit log asks about it (auth.RequestSource). It reads
// the client's address and User-Agent only when asked, while the request is served: the audit log
// copies what it keeps.
type request struct {
	id string
	c  *fiber.Ctx
}

func (r *request) RequestID() string { return r.id }
func (r *request) ClientIP() string  { return ClientIP(r.c) }
func (r *request) VouchedIP() string { return VouchedIP(r.c) }
func (r *request) UserAgent() string { return r.c.Get(fiber.HeaderUserAgent) }

// Impersonator is the admin who opened the request's session, if an admin did.
func (r *request) Impersonator() string {
	if st := Current(r.c); st != nil && st.Session.ImpersonatedBy != nil {
		return *st.Session.ImpersonatedBy
	}
	return ""
}

// AccessLogMessage is the message of the access-log record written for every request answered.
const AccessLogMessage = "request"

// LogHandler wraps a slog handler so every record logged with a request's context carries its
// request_id.
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
