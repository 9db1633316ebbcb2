package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// browserUserAgent is the User-Agent every request names: a desktop Chrome, the commonest
// browser, so the device a sign-in records is parsed as a real one's.
const browserUserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"

// receiver is the HTTP endpoint a flow run's server delivers its webhooks (and, with -trace,
// its traces) to. It answers at once and counts what came; its CPU is this tool's, as a
// customer's receiver is not the service's cost.
type receiver struct {
	ln               net.Listener
	srv              *http.Server
	webhooks, traces atomic.Int64
	userCreated      atomic.Int64
	sessionCreated   atomic.Int64
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook", func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.webhooks.Add(1)
		switch {
		case strings.Contains(string(body), `"type":"user.created"`):
			r.userCreated.Add(1)
		case strings.Contains(string(body), `"type":"session.created"`):
			r.sessionCreated.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		r.traces.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	r.srv = &http.Server{Handler: mux}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() }

func (r *receiver) close() { r.srv.Close() }

// print reports what was delivered, against the flows the server completed (warm-up included):
// a sign-up sends user.created and session.created. Deliveries lag the flows a little.
func (r *receiver) print(flows int64) {
	if flows == 0 {
		return
	}
	fmt.Printf("received: %d webhooks (%.2f a flow: user.created %.2f, session.created %.2f), %d trace exports\n",
		r.webhooks.Load(), float64(r.webhooks.Load())/float64(flows), float64(r.userCreated.Load())/float64(flows),
		float64(r.sessionCreated.Load())/float64(flows), r.traces.Load())
}

// featureEnv switches on, for a flow run, every optional feature a sign-up touches: signed
// webhooks to r (two a sign-up), the sign-in link beside the code in its e-mail, the new-device
// check (on by default; set so that it stays on), and the Prometheus endpoint (its counters and
// histograms are kept whenever it is served). With trace, every request's spans are exported to
// r too.
func featureEnv(r *receiver, trace bool) []string {
	key := make([]byte, 32)
	rand.Read(key)
	env := []string{
		"WEBHOOK_URL=" + r.url() + "/webhook",
		"WEBHOOK_SECRET=whsec_" + base64.StdEncoding.EncodeToString(key),
		"AUTH_SIGNIN_LINK=true",
		"AUTH_NEW_DEVICE_NOTICE=true",
		"METRICS_ADDR=127.0.0.1:0", // a port of the system's choosing: nothing scrapes it here
	}
	if trace {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+r.url(), "OTEL_TRACES_SAMPLER=always_on")
	}
	return env
}
