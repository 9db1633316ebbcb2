package metrics_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/mail"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one scrape of the service's metrics listener: the families parsed by Prometheus's
// own text parser, and the raw text.
type scrape struct {
	families map[string]*dto.MetricFamily
	raw      string
}

func scrapeMetrics(t *testing.T, e *testkit.Env) scrape {
	t.Helper()
	addr := e.Server.MetricsAddr()
	if addr == "" {
		t.Fatal("METRICS_ADDR was set, and no metrics listener is open")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	return scrape{families: families, raw: string(body)}
}

// value is the sample of the family name whose labels include those given (name=value pairs),
// summed over the samples that match; a histogram gives its count. It fails without one.
func (s scrape) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, found := s.lookup(name, labels...)
	if !found {
		t.Fatalf("no sample of %s with %v", name, labels)
	}
	return v
}

// lookup is value, reporting whether there is such a sample.
func (s scrape) lookup(name string, labels ...string) (float64, bool) {
	f, ok := s.families[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
samples:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			ok := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					ok = true
				}
			}
			if !ok {
				continue samples
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// moved fails unless the sample moved by want between two scrapes. A sample the first scrape
// did not have (a route not yet requested) counts from 0.
func moved(t *testing.T, before, after scrape, want float64, name string, labels ...string) {
	t.Helper()
	from, _ := before.lookup(name, labels...)
	if d := after.value(t, name, labels...) - from; d != want {
		t.Errorf("%s%v moved by %v, want %v", name, labels, d, want)
	}
}

func signIn(t *testing.T, e *testkit.Env, email, ip string) string {
	t.Helper()
	code := e.SendCode(email)
	r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code}, "X-Forwarded-For", ip)
	if r.Status != http.StatusOK {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	return r.Header.Get("set-auth-token")
}

// The counters an operator watches move with what the service does, on both databases, read by
// Prometheus's own parser from the listener of METRICS_ADDR.
func TestMetrics_CountWhatTheServiceDoes(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		before := scrapeMetrics(t, e)

		bearer := signIn(t, e, "new@example.com", "203.0.113.50")
		code := e.SendCode("new@example.com")
		wrong := "000000"
		if code == wrong {
			wrong = "111111"
		}
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "new@example.com", "otp": wrong}); r.Status != http.StatusBadRequest {
			t.Fatalf("a wrong code: %d", r.Status)
		}
		e.Clock.Advance(10 * time.Minute) // the code of the second send expires
		if r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "new@example.com", "otp": code}); r.Status != http.StatusBadRequest {
			t.Fatalf("an expired code: %d", r.Status)
		}
		// A session check by bearer goes to the database; one by cookie is answered by the cookie
		// cache.
		if r := e.Get("/api/auth/get-session", "Authorization", "Bearer "+bearer); r.Status != http.StatusOK {
			t.Fatalf("get-session: %d", r.Status)
		}
		s := e.SignIn("cookie@example.com")
		if r := e.Do(testkit.Request{Path: "/api/auth/get-session", Cookies: s.Cookies()}); r.Status != http.StatusOK {
			t.Fatalf("get-session by cookie: %d", r.Status)
		}
		if r := e.Post("/api/auth/sign-out", map[string]any{}, "Authorization", "Bearer "+bearer, "Origin", e.URL); r.Status != http.StatusOK {
			t.Fatalf("sign-out: %d %s", r.Status, r.Body)
		}
		// One address over its send-code rule, and an unknown path with a token in it.
		for i := range 21 {
			e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": fmt.Sprintf("burst%d@example.com", i), "type": "sign-in"},
				"X-Forwarded-For", "198.51.100.77")
		}
		e.Get("/api/auth/nowhere/secret-token-in-the-path")
		e.Do(testkit.Request{Method: "BREW", Path: "/api/auth/get-session"}) // refused before the middleware
		e.Do(testkit.Request{Method: "TRACE", Path: "/api/auth/get-session"})

		after := scrapeMetrics(t, e)
		moved(t, before, after, 3+20, "codeauth_codes_sent_total")
		moved(t, before, after, 2, "codeauth_verifications_total", "outcome", "ok")
		moved(t, before, after, 1, "codeauth_verifications_total", "outcome", "wrong")
		moved(t, before, after, 1, "codeauth_verifications_total", "outcome", "expired")
		moved(t, before, after, 2, "codeauth_sign_ups_total")
		moved(t, before, after, 2, "codeauth_sessions_created_total")
		moved(t, before, after, 1, "codeauth_sessions_ended_total")
		moved(t, before, after, 1, "codeauth_session_reads_total", "source", "cookie_cache")
		moved(t, before, after, 1, "codeauth_rate_limited_total", "rule", "send-code")
		moved(t, before, after, 0, "codeauth_rate_limited_total", "rule", "address-sends")
		if after.value(t, "codeauth_session_reads_total", "source", "database") <= before.value(t, "codeauth_session_reads_total", "source", "database") {
			t.Error("a bearer session check was not counted as a database read")
		}
		moved(t, before, after, 2, "codeauth_http_request_duration_seconds",
			"method", "POST", "route", "/api/auth/sign-in/email-otp", "status", "200")
		moved(t, before, after, 1, "codeauth_http_request_duration_seconds",
			"method", "POST", "route", "/api/auth/email-otp/send-verification-otp", "status", "429")
		moved(t, before, after, 1, "codeauth_http_request_duration_seconds", "route", "unmatched", "status", "404")
		// BREW, refused before the middleware runs, is counted too, with no route; TRACE reaches
		// the router.
		moved(t, before, after, 2, "codeauth_http_request_duration_seconds", "method", "other")
		moved(t, before, after, 1, "codeauth_http_request_duration_seconds", "method", "other", "route", "unmatched", "status", "400")
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "codeauth_db_connections", "codeauth_db_connections_max",
			"codeauth_outbox_pending", "codeauth_outbox_oldest_pending_age_seconds"} {
			after.value(t, name)
		}
		// No label holds an address, a client IP, a token or a path as it was sent.
		for _, secret := range []string{"new@example.com", "example.com", "203.0.113.50", "198.51.100.77", bearer, "secret-token", "BREW", code} {
			if strings.Contains(after.raw, secret) {
				t.Errorf("the metrics contain %q", secret)
			}
		}
	}, testkit.WithEnv("METRICS_ADDR", "127.0.0.1:0"))
}

// A provider outage shows as a backlog that grows old and as failed deliveries: what the alerts
// of README's "Metrics" watch.
func TestMetrics_OutboxBacklogAndFailures(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		before := scrapeMetrics(t, e)
		if got := before.value(t, "codeauth_outbox_pending"); got != 0 {
			t.Fatalf("a fresh service has %v e-mails pending", got)
		}
		e.Mailer.FailKind(mail.KindSignInCode, errors.New("provider down"))
		if r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "wait@example.com", "type": "sign-in"}); r.Status != http.StatusOK {
			t.Fatalf("send: %d", r.Status)
		}
		e.Mailer.Flush() // one attempt, which fails
		e.Clock.Advance(90 * time.Second)
		after := scrapeMetrics(t, e)
		if got := after.value(t, "codeauth_outbox_pending", "queue", "email"); got != 1 {
			t.Errorf("%v e-mails pending, want 1", got)
		}
		if got := after.value(t, "codeauth_outbox_pending", "queue", "webhook"); got != 0 {
			t.Errorf("%v webhooks pending, want none", got)
		}
		if age := after.value(t, "codeauth_outbox_oldest_pending_age_seconds", "queue", "email"); age < 90 || age > 100 {
			t.Errorf("the oldest pending e-mail is %v s old, want 90", age)
		}
		if d := after.value(t, "codeauth_outbox_deliveries_total", "queue", "email", "result", "failed") - before.value(t, "codeauth_outbox_deliveries_total", "queue", "email", "result", "failed"); d < 1 {
			t.Errorf("failed deliveries moved by %v", d)
		}
		e.Mailer.FailKind(mail.KindSignInCode, nil)
		e.Clock.Advance(time.Minute) // past the retry's backoff, well within the code's life
		e.Mailer.Flush()
		last := scrapeMetrics(t, e)
		if got := last.value(t, "codeauth_outbox_pending"); got != 0 {
			t.Errorf("%v e-mails pending after the provider came back", got)
		}
		// At least once: the test's clock jumps past leases that the service's own worker, woken
		// by the send, may hold mid-delivery, and a delivery retried after such a jump counts
		// again (a real clock does not jump; delivery is at least once, README "E-mail").
		if d := last.value(t, "codeauth_outbox_deliveries_total", "result", "sent") - after.value(t, "codeauth_outbox_deliveries_total", "result", "sent"); d < 1 {
			t.Errorf("sent deliveries moved by %v after the provider came back", d)
		}
	}, testkit.WithEnv("METRICS_ADDR", "127.0.0.1:0"))
}

// Without METRICS_ADDR nothing listens and the HTTP layer reports to nobody.
func TestMetrics_OffByDefault(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	if e.Server.Metrics != nil || e.Server.MetricsAddr() != "" {
		t.Fatal("metrics are on without METRICS_ADDR")
	}
}
