package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Request describes one HTTP request to the service.
type Request struct {
	Method string
	Path   string
	// JSON is marshalled as the body when Body is empty.
	JSON any
	// Body is sent as is.
	Body        string
	ContentType string
	Header      http.Header
	Cookies     []*http.Cookie
	// SameClient sends no X-Forwarded-For, so the request comes from the connection's address.
	SameClient bool
}

// Response is an HTTP answer with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Cookies are the Set-Cookie headers of the answer.
	Cookies []*http.Cookie
}

// Do sends r and reads the answer.
func (e *Env) Do(r Request) *Response {
	e.t.Helper()
	body := r.Body
	ct := r.ContentType
	if body == "" && r.JSON != nil {
		b, err := json.Marshal(r.JSON)
		if err != nil {
			e.t.Fatal(err)
		}
		body = string(b)
		if ct == "" {
			ct = "application/json"
		}
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequest(method, e.URL+r.Path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if _, set := r.Header["X-Forwarded-For"]; !set && !r.SameClient {
		// Each request comes from its own address, as from many users, so tests that are not
		// about the per-IP limits do not trip them. Tests of those limits set the header.
		n := e.requests.Add(1)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", n/250%250, n%250+1))
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for _, c := range r.Cookies {
		req.AddCookie(c)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, r.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Cookies: resp.Cookies()}
	if rec := recorder.Load(); rec != nil && strings.HasPrefix(r.Path, "/api/") {
		path, _, _ := strings.Cut(r.Path, "?")
		(*rec)(Recorded{Method: method, Path: path, Status: out.Status, ContentType: resp.Header.Get("Content-Type"), Body: b})
	}
	return out
}

// Recorded is one API answer a test received.
type Recorded struct {
	Method, Path, ContentType string
	Status                    int
	Body                      []byte
}

var recorder atomic.Pointer[func(Recorded)]

// RecordResponses has every /api answer of the test binary passed to f (the OpenAPI check).
func RecordResponses(f func(Recorded)) { recorder.Store(&f) }

// Post sends a JSON body to path.
func (e *Env) Post(path string, body any, header ...string) *Response {
	e.t.Helper()
	return e.Do(Request{Method: http.MethodPost, Path: path, JSON: body, Header: headers(header)})
}

// Get requests path with the given header pairs.
func (e *Env) Get(path string, header ...string) *Response {
	e.t.Helper()
	return e.Do(Request{Method: http.MethodGet, Path: path, Header: headers(header)})
}

func headers(pairs []string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

// Text is the body as its words read: a page marks the places a long e-mail or IPv6 address may
// wrap with <wbr>, which is taken out, so that a test can look for the address.
func (r *Response) Text() string {
	return strings.ReplaceAll(string(r.Body), "<wbr>", "")
}

// Cookie returns the Set-Cookie of the answer named name, or nil.
func (r *Response) Cookie(name string) *http.Cookie {
	for _, c := range r.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RawSetCookie returns the raw Set-Cookie header for name, or "".
func (r *Response) RawSetCookie(name string) string {
	for _, v := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, name+"=") {
			return v
		}
	}
	return ""
}

// Decode unmarshals the answer's JSON body into v, failing the test when it is not JSON.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// ExpectError fails the test unless the answer is status with the JSON error body of code.
func (r *Response) ExpectError(t testing.TB, status int, code string) {
	t.Helper()
	var body struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	if r.Status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.Status, status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %s", r.Body)
	}
	if body.Code != code || body.Message == "" {
		t.Fatalf("error body = %s, want code %s with a message", r.Body, code)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type = %q, want application/json", ct)
	}
}
