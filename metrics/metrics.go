// Package metrics is the service's Prometheus metrics, served on a listener of their own
// (METRICS_ADDR). The counters of the hot paths are the atomic ones the service keeps anyway
// (auth.Stats, the outbox's totals, the pool's): they are read when Prometheus scrapes, so a
// sign-in or a session check pays nothing for the metrics. The HTTP layer reports each answered
// request (a histogram by route template, method and status) and each per-IP refusal through
// middleware.Observer. No label ever holds an address, an IP, a token or a path as sent: routes
// are templates, methods and rules come from fixed lists.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"codeauth/auth"
	"codeauth/lograte"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of the service's own.
const Namespace = "codeauth"

// backlogTimeout bounds the reads of each outbox queue's backlog (the only queries a scrape
// makes: a count and the oldest), so a slow database cannot hold a scrape up; the other metrics
// are in memory.
const backlogTimeout = 2 * time.Second

// requestBuckets are the request histogram's bounds, in seconds: a session check from the cookie
// cache takes tens of microseconds, a sign-in a few milliseconds, and anything past a second is a
// problem to see.
var requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// Sources are what the metrics read when scraped.
type Sources struct {
	Auth  *auth.Service
	Store *models.Store
	// Logger receives a failed backlog query (at most once a minute).
	Logger *slog.Logger
	// Now is the service's clock, which stamped the outbox's messages; nil means time.Now.
	Now func() time.Time
}

// Metrics is the service's registry: Go's and the process's own metrics, the service's, and the
// HTTP layer's. It implements middleware.Observer.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
	// refused counts the per-IP refusals by rule; the rules are a fixed few.
	refused sync.Map // rule name -> *atomic.Int64
}

// New builds the registry over src.
func New(src Sources) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method, route template and status.",
			Buckets: requestBuckets,
		}, []string{"method", "route", "status"}),
	}
	log := src.Logger
	if log == nil {
		log = slog.Default()
	}
	if src.Now == nil {
		src.Now = time.Now
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests,
		&service{src: src, m: m, log: log},
	)
	return m
}

// Handler serves the metrics in Prometheus's text format. A collector that fails leaves its
// metrics out of that scrape rather than failing it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry, for tests that gather it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Request counts an answered request (middleware.Observer).
func (m *Metrics) Request(method, route string, status int, took time.Duration) {
	m.requests.WithLabelValues(methodLabel(method), route, statusLabel(status)).Observe(took.Seconds())
}

// Refused counts a request refused by a per-IP rule (middleware.Observer).
func (m *Metrics) Refused(rule string) {
	n, ok := m.refused.Load(rule)
	if !ok {
		n, _ = m.refused.LoadOrStore(rule, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

var _ middleware.Observer = (*Metrics)(nil)

// methodLabel is the method as a label, or "other" for a method no route of the service answers:
// a client chooses the method, and must not choose label values (middleware.KnownMethod).
func methodLabel(method string) string {
	if m, ok := middleware.KnownMethod(method); ok {
		return m
	}
	return "other"
}

// statusLabels are the status labels written once, so that a request does not format one.
var statusLabels = func() [600]string {
	var out [600]string
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

func statusLabel(status int) string {
	if status < 0 || status >= len(statusLabels) {
		return "other"
	}
	return statusLabels[status]
}

// service collects the service's own metrics at scrape time, from the counters it keeps.
type service struct {
	src Sources
	m   *Metrics
	log *slog.Logger
	// warned keeps a failed backlog query to one line a minute.
	warned lograte.Limit
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	codesSent     = desc("codes_sent_total", "Codes made and queued for e-mail (sign-in and e-mail change).")
	codesResent   = desc("codes_resent_total", "Sign-in codes queued for e-mail again, unchanged, by a resend while they were alive.")
	verifications = desc("verifications_total", "Code verifications by outcome: ok, wrong (or unknown), expired, locked (out of attempts or the address locked), banned (a right code of a banned account), other (bad input, database unavailable).", "outcome")
	signUps       = desc("sign_ups_total", "Accounts created.")
	rateLimited   = desc("rate_limited_total", "Requests refused by a limit: the per-IP rules by name, and address-sends and address-locked for the per-address ones.", "rule")
	sessionReads  = desc("session_reads_total", "Session checks by what answered them: cookie_cache (no database) or database.", "source")
	sessionQuery  = desc("session_queries_total", "Database queries that answered session checks (concurrent checks share one on PostgreSQL).")
	sessionsMade  = desc("sessions_created_total", "Sessions created (successful sign-ins).")
	sessionsEnded = desc("sessions_ended_total", "Sessions ended by sign-out, revocation, an e-mail change or restore, or deletion.")
	outboxPending = desc("outbox_pending", "Messages waiting in the outbox, due or retrying, by queue (email, webhook).", "queue")
	outboxAge     = desc("outbox_oldest_pending_age_seconds", "Age of the oldest message waiting in the outbox's queue; 0 when none is.", "queue")
	deliveries    = desc("outbox_deliveries_total", "Outbox delivery outcomes by queue (email, webhook): sent, failed (will retry), given_up, dropped (replaced or expired), withheld.", "queue", "result")
	dbConns       = desc("db_connections", "Database connections by state: in_use, idle.", "state")
	dbConnsMax    = desc("db_connections_max", "The most database connections the pool opens (0: no limit).")
	dbWaits       = desc("db_connection_waits_total", "Times a statement waited for a free database connection.")
	dbWaitSecs    = desc("db_connection_wait_seconds_total", "Time statements spent waiting for a free database connection.")
)

// Describe sends the descriptions of the service's metrics.
func (s *service) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{codesSent, codesResent, verifications, signUps, rateLimited, sessionReads, sessionQuery,
		sessionsMade, sessionsEnded, outboxPending, outboxAge, deliveries, dbConns, dbConnsMax, dbWaits, dbWaitSecs} {
		ch <- d
	}
}

// Collect reads the counters and the backlog.
func (s *service) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := s.src.Auth.Stats()
	counter(codesSent, st.CodesIssued)
	counter(codesResent, st.CodesResent)
	counter(verifications, st.SignIns, "ok")
	counter(verifications, st.VerifyWrong, "wrong")
	counter(verifications, st.VerifyExpired, "expired")
	counter(verifications, st.VerifyLocked, "locked")
	counter(verifications, st.VerifyOther, "other")
	counter(verifications, st.VerifyBanned, "banned")
	counter(signUps, st.SignUps)
	counter(rateLimited, st.ThrottledSends, "address-sends")
	counter(rateLimited, st.ThrottledLocked, "address-locked")
	for _, rule := range []middleware.Rule{middleware.RuleDefault, middleware.RuleSendCode, middleware.RuleSignIn} {
		var n int64
		if v, ok := s.m.refused.Load(rule.Name); ok {
			n = v.(*atomic.Int64).Load()
		}
		counter(rateLimited, n, rule.Name)
	}
	counter(sessionReads, st.CookieCacheReads, "cookie_cache")
	counter(sessionReads, st.SessionReads, "database")
	counter(sessionQuery, st.SessionQueries)
	counter(sessionsMade, st.SignIns)
	counter(sessionsEnded, st.SessionsEnded)

	for _, q := range models.OutboxQueues {
		queue := q.String()
		totals := s.src.Auth.Outbox().Totals(q)
		counter(deliveries, int64(totals.Sent), queue, "sent")
		counter(deliveries, int64(totals.Failed), queue, "failed")
		counter(deliveries, int64(totals.Abandoned), queue, "given_up")
		counter(deliveries, int64(totals.Dropped), queue, "dropped")
		counter(deliveries, int64(totals.Withheld), queue, "withheld")
		// Each queue has its own time: a slow read of a long webhook backlog must not leave
		// out the e-mail's.
		ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
		b, err := s.src.Store.Backlog(ctx, q)
		cancel()
		if err != nil {
			// Left out of this scrape: an alert on a missing series (absent()) sees it.
			if s.warned.Allow(time.Now()) {
				s.log.Warn("metrics: reading the outbox backlog failed", "error", err)
			}
			continue
		}
		gauge(outboxPending, float64(b.Pending), queue)
		age := 0.0
		if !b.Oldest.IsZero() {
			age = max(s.src.Now().Sub(b.Oldest).Seconds(), 0)
		}
		gauge(outboxAge, age, queue)
	}

	pool := s.src.Store.PoolStats()
	gauge(dbConns, float64(pool.InUse), "in_use")
	gauge(dbConns, float64(pool.Idle), "idle")
	gauge(dbConnsMax, float64(pool.MaxOpen))
	counter(dbWaits, pool.WaitCount)
	ch <- prometheus.MustNewConstMetric(dbWaitSecs, prometheus.CounterValue, pool.WaitDuration.Seconds())
}
