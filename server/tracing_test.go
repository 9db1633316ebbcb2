package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// A request is a span named by its route, its database round trips are its children, an incoming
// traceparent is continued, and no span holds an address, a code or a token; background work
// (the outbox worker, the jobs) starts no traces of its own.
func TestTracing_RequestsAndTheirDatabaseRoundTrips(t *testing.T) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		t.Run(dialect, func(t *testing.T) { traceASignIn(t, dialect) })
	}
}

func traceASignIn(t *testing.T, dialect string) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	e2 := testkit.New(t, dialect, testkit.WithTracer(tp))
	code := e2.SendCode("traced@example.com")
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := e2.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "traced@example.com", "otp": code}, "traceparent", parent)
	if r.Status != http.StatusOK {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	token := r.Header.Get("set-auth-token")
	e2.Mailer.Flush()

	spans := recorder.Ended()
	var signIn sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "POST /api/auth/sign-in/email-otp" {
			signIn = s
		}
	}
	if signIn == nil {
		t.Fatalf("no span for the sign-in among %d", len(spans))
	}
	if signIn.SpanKind() != trace.SpanKindServer || signIn.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		signIn.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("the sign-in span does not continue the caller's trace: %v parent %v", signIn.SpanContext(), signIn.Parent())
	}
	attrs := map[string]string{}
	for _, a := range signIn.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["http.route"] != "/api/auth/sign-in/email-otp" || attrs["http.response.status_code"] != "200" ||
		attrs["http.request.method"] != "POST" || attrs["codeauth.request_id"] != r.Header.Get("X-Request-Id") {
		t.Errorf("the sign-in span says %v", attrs)
	}
	children := 0
	for _, s := range spans {
		if s.Parent().SpanID() == signIn.SpanContext().SpanID() {
			children++
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("child span %q is of kind %v", s.Name(), s.SpanKind())
			}
		}
		// Every span is a request's or inside one: background work starts no trace.
		if !s.Parent().IsValid() && s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %q starts a trace of its own", s.Name())
		}
		var text strings.Builder
		text.WriteString(s.Name())
		for _, a := range s.Attributes() {
			text.WriteString(" " + a.Value.Emit())
		}
		for _, secret := range []string{"traced@example.com", code, token} {
			if secret != "" && strings.Contains(text.String(), secret) {
				t.Errorf("span %q holds %q", s.Name(), secret)
			}
		}
	}
	if children == 0 {
		t.Error("the sign-in's database round trips are not its children")
	}
	tp.Shutdown(context.Background())
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the spans reach a collector over OTLP/HTTP, flushed by
// Close, under the service's name.
func TestTracing_ExportsOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []*collectortrace.ExportTraceServiceRequest
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	collector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	})}
	go collector.Serve(ln)
	t.Cleanup(func() { collector.Close() })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_SERVICE_NAME", "codeauth-test")

	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String()))
	e.SignIn("exported@example.com")
	if err := e.Server.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		var names []string
		service := ""
		for _, req := range got {
			for _, rs := range req.GetResourceSpans() {
				for _, a := range rs.GetResource().GetAttributes() {
					if a.GetKey() == "service.name" {
						service = a.GetValue().GetStringValue()
					}
				}
				for _, ss := range rs.GetScopeSpans() {
					for _, s := range ss.GetSpans() {
						names = append(names, s.GetName())
					}
				}
			}
		}
		mu.Unlock()
		if strings.Contains(strings.Join(names, "|"), "POST /api/auth/sign-in/email-otp") && service == "codeauth-test" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector received %q from service %q", names, service)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without an endpoint, or with OTEL_SDK_DISABLED=true, nothing is traced.
func TestTracing_OffByDefault(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"), testkit.WithEnv("OTEL_SDK_DISABLED", "true"))
	if e.Server.Config.TracingOn() {
		t.Fatal("tracing is on with OTEL_SDK_DISABLED=true")
	}
	if testkit.New(t, testkit.SQLite).Server.Config.TracingOn() {
		t.Fatal("tracing is on without an endpoint")
	}
}
