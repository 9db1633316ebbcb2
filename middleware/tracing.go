package middleware

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing makes an OpenTelemetry span of each request under tp, named by its method and route
// template ("POST /api/auth/sign-in/email-otp"), continuing the trace of an incoming W3C
// traceparent header; the spans of the database's round trips (models) are its children. It runs
// outside AccessLog.Handler, which turns a handler's error into the answer, so the span records
// the status sent. Only the method, the route template, the status and the request id are recorded:
// never the path as sent, the query string, headers or the client's address, which may hold
// tokens or personal data.
func Tracing(tp trace.TracerProvider) fiber.Handler {
	tracer := tp.Tracer("codeauth/http")
	propagator := propagation.TraceContext{}
	return func(c *fiber.Ctx) error {
		ctx := propagator.Extract(c.UserContext(), headerCarrier{c})
		method := methodName(c.Method())
		ctx, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next()
		route := RouteOf(c)
		status := c.Response().StatusCode()
		span.SetName(method + " " + route)
		span.SetAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status),
			attribute.String("codeauth.request_id", string(c.Response().Header.Peek(RequestIDHeader))),
		)
		if status >= fiber.StatusInternalServerError {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}

// methodName is the request's method as OpenTelemetry names it, "_OTHER" for one the service
// does not know, so a client cannot put words of its own in a span name.
func methodName(method string) string {
	if m, ok := KnownMethod(method); ok {
		return m
	}
	return "_OTHER"
}

// KnownMethod returns the HTTP method as one of the constants of the methods the service's routes
// answer, and false for any other. A name taken from a request must be the constant, never the
// string given, whose bytes the HTTP server reuses for the next request.
func KnownMethod(method string) (string, bool) {
	for _, m := range knownMethods {
		if method == m {
			return m, true
		}
	}
	return "", false
}

var knownMethods = [...]string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch,
	fiber.MethodDelete, fiber.MethodOptions}

// headerCarrier reads and writes a request's headers for the trace context propagator.
type headerCarrier struct{ c *fiber.Ctx }

// Get copies the value: the propagator keeps parts of it (the trace state) beyond the request,
// and the HTTP server reuses the bytes the request's headers are read from.
func (h headerCarrier) Get(key string) string { return strings.Clone(h.c.Get(key)) }

func (h headerCarrier) Set(key, value string) { h.c.Request().Header.Set(key, value) }

func (h headerCarrier) Keys() []string {
	var keys []string
	h.c.Request().Header.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
