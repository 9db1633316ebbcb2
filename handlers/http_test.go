package handlers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"codeauth/internal/testkit"
)

const (
	apiCSP  = "default-src 'none'; frame-ancestors 'none'"
	pageCSP = "default-src 'self'; script-src 'self'"
)

// expectAPIHeaders fails unless r carries the headers of a JSON answer: the API's
// Content-Security-Policy, nosniff, no-store and a JSON Content-Type.
func expectAPIHeaders(t *testing.T, r *testkit.Response, what string) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want JSON (body %.80s)", what, ct, r.Body)
	}
	if csp := r.Header.Get("Content-Security-Policy"); csp != apiCSP {
		t.Fatalf("%s: Content-Security-Policy %q, want the API's", what, csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s: headers %v", what, r.Header)
	}
}

// expectPageHeaders fails unless r carries the headers of a page.
func expectPageHeaders(t *testing.T, r *testkit.Response, what string) {
	t.Helper()
	if csp := r.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, pageCSP) {
		t.Fatalf("%s: Content-Security-Policy %q, want the pages'", what, csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("X-Frame-Options") != "DENY" ||
		r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Referrer-Policy") == "" {
		t.Fatalf("%s: headers %v", what, r.Header)
	}
}

// The router matches paths without regard to case and ignores trailing slashes, so whatever
// reaches the API is answered as the API, errors included: JSON, the API's headers, never
// compressed, never an HTML page (catalogue O120).
func TestAPI_PathsAreJudgedAsTheRouterMatchesThem(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for _, path := range []string{"/API/auth/nope", "/Api/Nope/", "/API", "/api/"} {
		r := e.Get(path)
		r.ExpectError(t, 404, "NOT_FOUND")
		expectAPIHeaders(t, r, path)
	}
	for _, path := range []string{"/API/ME", "/Api/Me/"} {
		r := e.Get(path)
		r.ExpectError(t, 401, "UNAUTHORIZED")
		expectAPIHeaders(t, r, path)
	}
	for _, path := range []string{"/Api/Auth/Get-Session", "/API/AUTH/GET-SESSION/", "/api/auth/ok/"} {
		r := e.Get(path)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
		expectAPIHeaders(t, r, path)
	}
	for _, path := range []string{"/API/OPENAPI.JSON", "/api/openapi.json/"} {
		r := e.Do(testkit.Request{Path: path, Header: http.Header{"Accept-Encoding": {"gzip, br"}}})
		if r.Status != 200 || r.Header.Get("Content-Encoding") != "" {
			t.Fatalf("%s: %d, Content-Encoding %q; API answers are not compressed", path, r.Status, r.Header.Get("Content-Encoding"))
		}
		expectAPIHeaders(t, r, path)
	}
	// A path that only starts like the API is a page, private like any unknown one.
	for _, path := range []string{"/apix", "/API-docs"} {
		expectSignInRedirect(t, e.Get(path), path)
	}
	expectPageHeaders(t, e.Get("/AUTH/SIGN-IN/"), "/AUTH/SIGN-IN/")
}

// dial opens a plain TCP connection to the service, for requests the Go client would not send
// as written. The deadline only keeps a broken server from hanging the test; nothing is timed.
func dial(t *testing.T, e *testkit.Env) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn, bufio.NewReader(conn)
}

// send writes raw requests to conn.
func send(t *testing.T, conn net.Conn, raw string) {
	t.Helper()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
}

// readAnswer reads the next answer from br, to a request of method, with its body.
func readAnswer(t *testing.T, br *bufio.Reader, method string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, body
}

// expectClosed fails unless the server has closed the connection with nothing more sent.
func expectClosed(t *testing.T, br *bufio.Reader, what string) {
	t.Helper()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("%s: the server sent %q more (%v), want the connection closed", what, rest, err)
	}
}

// Every GET route answers HEAD as it answers GET, with no body: a HEAD is how monitors and link
// checkers look at a page.
func TestHead_AnsweredLikeGet(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	tried := 0
	for _, route := range e.App.GetRoutes(true) {
		if route.Method != http.MethodGet {
			continue
		}
		path := strings.ReplaceAll(route.Path, ":name", "app.css")
		get := e.Get(path)
		conn, br := dial(t, e)
		send(t, conn, "HEAD "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		head, body := readAnswer(t, br, http.MethodHead)
		if head.StatusCode != get.Status {
			t.Fatalf("HEAD %s: %d, GET: %d", path, head.StatusCode, get.Status)
		}
		if len(body) != 0 {
			t.Fatalf("HEAD %s sent a body", path)
		}
		expectClosed(t, br, "HEAD "+path)
		tried++
	}
	if tried < 10 {
		t.Fatalf("only %d GET routes", tried)
	}
}

// rawAnswer sends raw on a connection of its own and reads the answer to a request of method.
// The connection must then be closed: every refusal below ends it.
func rawAnswer(t *testing.T, e *testkit.Env, method, raw string) *testkit.Response {
	t.Helper()
	conn, br := dial(t, e)
	send(t, conn, raw)
	resp, body := readAnswer(t, br, method)
	expectClosed(t, br, raw[:strings.IndexByte(raw, '\n')])
	return &testkit.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// overLimitChunked is a chunked POST whose body runs over BodyLimit (16 KiB) at its second chunk.
// The second chunk's data is never sent: the server refuses on reading its size, so nothing is
// left unread to make its close a reset.
func overLimitChunked(path string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3e80\r\n" + strings.Repeat("a", 16000) + "\r\n400\r\n"
}

// Catalogue N108, O120: what the HTTP server refuses before the middleware chain runs is answered
// like everything else. Under /api: JSON with the API's headers. For a page: the page's headers.
// A request whose path fasthttp lost when it reset it (a chunked body over the limit, headers too
// large, a broken chunk) gets the JSON answer and the API's headers.
func TestServerErrors_CarryTheAppsHeaders(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithSecure())
	hsts := func(r *testkit.Response, what string) {
		t.Helper()
		if !strings.HasPrefix(r.Header.Get("Strict-Transport-Security"), "max-age=") {
			t.Fatalf("%s: no HSTS in %v", what, r.Header)
		}
	}
	// Every refusal, though no middleware ran, carries a request id and has its access-log line.
	logged := func(r *testkit.Response, what string) {
		t.Helper()
		id := r.Header.Get("X-Request-Id")
		if id == "" {
			t.Fatalf("%s: no X-Request-Id in %v", what, r.Header)
		}
		want := fmt.Sprintf("status=%d", r.Status)
		for _, line := range strings.Split(e.Logs.String(), "\n") {
			if strings.Contains(line, "msg=request ") && strings.Contains(line, want) && strings.Contains(line, "request_id="+id) {
				return
			}
		}
		t.Fatalf("%s: no access-log line with %s and request_id=%s:\n%s", what, want, id, e.Logs.String())
	}
	overLimitLength := func(path string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000\r\n\r\n"
	}
	for name, raw := range map[string]string{"chunked": overLimitChunked(signInPath), "Content-Length": overLimitLength(signInPath)} {
		r := rawAnswer(t, e, "POST", raw)
		r.ExpectError(t, 413, "PAYLOAD_TOO_LARGE")
		expectAPIHeaders(t, r, name+" body over the limit to the API")
		hsts(r, name)
		logged(r, name+" body over the limit to the API")
	}
	// The chunked one was reset by the server before the app saw it: its line names no method or
	// path, rather than fasthttp's defaults ("GET /").
	if !strings.Contains(e.Logs.String(), `msg=request method="" path="" status=413`) {
		t.Fatalf("a reset request's access line:\n%s", e.Logs.String())
	}
	r := rawAnswer(t, e, "POST", overLimitLength("/auth/verify"))
	if r.Status != 413 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("Content-Length over the limit to a page: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	expectPageHeaders(t, r, "Content-Length over the limit to a page")
	hsts(r, "page")
	logged(r, "Content-Length over the limit to a page")
	// The path is lost, so the answer is the API's: a chunked body over the limit (fasthttp resets
	// the request), headers over the 8 KiB read buffer (exactly 8 KiB sent, so the server reads
	// all of it), a broken chunk.
	r = rawAnswer(t, e, "POST", overLimitChunked("/auth/verify"))
	r.ExpectError(t, 413, "PAYLOAD_TOO_LARGE")
	expectAPIHeaders(t, r, "chunked body over the limit to a page")
	tooLarge := "GET /auth/sign-in HTTP/1.1\r\nHost: x\r\nX-Pad: "
	tooLarge += strings.Repeat("a", 8192-len(tooLarge))
	r = rawAnswer(t, e, "GET", tooLarge)
	r.ExpectError(t, 431, "HEADERS_TOO_LARGE")
	expectAPIHeaders(t, r, "headers too large")
	logged(r, "headers too large")
	r = rawAnswer(t, e, "POST", "POST /auth/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	r.ExpectError(t, 400, "BAD_REQUEST")
	expectAPIHeaders(t, r, "broken chunk")
	hsts(r, "broken chunk")
	logged(r, "broken chunk")
	// A method the router does not know, which Fiber would answer in plain text by itself: 400
	// (the client's error, never a 5xx), and the connection is closed (rawAnswer checks).
	r = rawAnswer(t, e, "FOO", "FOO /api/auth/ok HTTP/1.1\r\nHost: x\r\n\r\n")
	r.ExpectError(t, 400, "BAD_REQUEST")
	if !strings.Contains(string(r.Body), "Unknown request method") {
		t.Fatalf("unknown method: %s", r.Body)
	}
	expectAPIHeaders(t, r, "unknown method")
	hsts(r, "unknown method")
	logged(r, "unknown method")
}

// A client that resets its connection while sending a request costs the service nothing it
// reports: no answer to nobody, no 5xx in the access log or the metrics, no error logged (Fiber
// would have answered it 502, and logged the failure as the service's).
func TestServerErrors_AConnectionResetIsNoFailure(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for _, partial := range []string{
		"",
		"GET /api/auth/ok HTTP/1.1\r\nHost: x\r\nX-Half",
		"POST /api/auth/sign-out HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":",
		"POST /api/auth/sign-out HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\"",
	} {
		conn, _ := dial(t, e)
		send(t, conn, partial)
		time.Sleep(20 * time.Millisecond) // the server is reading it
		conn.(*net.TCPConn).SetLinger(0)  // a close that resets
		conn.Close()
	}
	// Whatever the server makes of the resets shows within moments; a request after them
	// shows the log is written.
	if r := e.Get("/api/auth/ok"); r.Status != http.StatusOK {
		t.Fatalf("ok: %d", r.Status)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		logs := e.Logs.String()
		if strings.Contains(logs, "level=ERROR") || regexp.MustCompile(`msg=request [^\n]*status=5`).MatchString(logs) {
			t.Fatalf("a reset connection was logged as the service's failure:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Catalogue #118, ASVS 4.2.1: a request whose body length another server on the way could read
// differently (request smuggling) is refused with 400 and the connection is closed, so what was
// sent after it on the connection is never answered. Each request below is followed on the same
// connection by a second one, which fasthttp would otherwise answer.
func TestFraming_AmbiguousRequestsAreRefusedAndTheConnectionClosed(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	const head = "POST /api/auth/sign-out HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	const chunkedBody = "2\r\n{}\r\n0\r\n\r\n"
	const next = "GET /api/auth/ok HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, raw := range map[string]string{
		"conflicting lengths": head + "Content-Length: 45\r\nContent-Length: 2\r\n\r\n{}",
		"equal lengths":       head + "Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}",
		"length and chunked":  head + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedBody,
		"chunked and length":  head + "Transfer-Encoding: chunked\r\nContent-Length: 17\r\n\r\n" + chunkedBody,
		"gzip, chunked":       head + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunkedBody,
		"chunked twice":       head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedBody,
		"identity and length": head + "Transfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}",
		"folded header":       head + "X-Note: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
		"chunked in HTTP/1.0": strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedBody,
		"bare LF":             head + "X-Note: a\nContent-Length: 2\r\n\r\n{}",
		"bare LF at the end":  head + "Content-Length: 2\n\r\n{}",
	} {
		conn, br := dial(t, e)
		send(t, conn, raw+next)
		resp, body := readAnswer(t, br, "POST")
		r := &testkit.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
		if r.Status != 400 || !resp.Close {
			t.Fatalf("%s: %d, Connection %q; want 400 and the connection closed", name, r.Status, resp.Header.Get("Connection"))
		}
		r.ExpectError(t, 400, "BAD_REQUEST")
		expectAPIHeaders(t, r, name)
		expectClosed(t, br, name)
	}
	// What fasthttp refuses by itself never reaches the check, but ends the same way.
	for name, raw := range map[string]string{
		"empty length":       head + "Content-Length:\r\n\r\n",
		"two values in one":  head + "Content-Length: 2, 2\r\n\r\n{}",
		"space before colon": head + "Content-Length : 2\r\n\r\n{}",
		"signed length":      head + "Content-Length: +2\r\n\r\n{}",
		"broken chunk":       head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
	} {
		conn, br := dial(t, e)
		send(t, conn, raw+next)
		resp, body := readAnswer(t, br, "POST")
		if resp.StatusCode != 400 || !resp.Close {
			t.Fatalf("%s: %d, Connection %q", name, resp.StatusCode, resp.Header.Get("Connection"))
		}
		expectAPIHeaders(t, &testkit.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, name)
		expectClosed(t, br, name)
	}
	// A method the router does not know never reaches the check (Fiber answers it before the
	// middleware runs), so its connection is closed whatever its framing.
	conn, br := dial(t, e)
	send(t, conn, "FOO /api/auth/ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"+chunkedBody+next)
	if resp, _ := readAnswer(t, br, "FOO"); resp.StatusCode != 400 || !resp.Close {
		t.Fatalf("an unknown method: %d, Connection %q", resp.StatusCode, resp.Header.Get("Connection"))
	}
	expectClosed(t, br, "unknown method")
	// A page gets the refusal too, as a page.
	conn, br = dial(t, e)
	send(t, conn, "POST /auth/code HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 2\r\nContent-Length: 2\r\n\r\nx="+next)
	if resp, _ := readAnswer(t, br, "POST"); resp.StatusCode != 400 || !resp.Close {
		t.Fatalf("a page: %d, Connection %q", resp.StatusCode, resp.Header.Get("Connection"))
	}
	expectClosed(t, br, "a page")
	// Refusals are in the access log.
	if logs := e.Logs.String(); !strings.Contains(logs, "path=/api/auth/sign-out status=400") {
		t.Fatalf("no access-log line for a refusal:\n%s", logs)
	}

	// Unambiguous requests keep the connection: the second request on it is answered.
	for name, raw := range map[string]string{
		"length":  head + "Content-Length: 2\r\n\r\n{}",
		"chunked": head + "Transfer-Encoding: Chunked\r\n\r\n" + chunkedBody,
		"none":    "GET /api/auth/ok HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		conn, br := dial(t, e)
		send(t, conn, raw+strings.Replace(next, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
		method := "POST"
		if name == "none" {
			method = "GET"
		}
		if first, body := readAnswer(t, br, method); first.StatusCode != 200 || first.Close {
			t.Fatalf("%s: %d %s, Connection %q", name, first.StatusCode, body, first.Header.Get("Connection"))
		}
		if second, body := readAnswer(t, br, "GET"); second.StatusCode != 200 || string(body) != `{"ok":true}` {
			t.Fatalf("%s, the pipelined request: %d %s", name, second.StatusCode, body)
		}
		expectClosed(t, br, name)
	}
}
