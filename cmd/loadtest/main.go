// Command loadtest measures the service, from outside, the way its users load it:
//
//	loadtest -mode bearer  session reads by bearer token (GET /api/auth/get-session)
//	loadtest -mode cookie  session reads by cookie, answered from the cookie cache
//	loadtest -mode flow    full sign-ins: send a code to a fresh address, read it from the console
//	                       mailer's output, verify it, read the session
//	loadtest -mode start   time from starting the binary to /readyz answering
//
// Every request comes from its own X-Forwarded-For address, so the per-IP limits stay on and are
// not what is measured, and names a desktop Chrome as its User-Agent, so the device a sign-in
// records is parsed as a real browser's. With -server the tool starts the service binary itself
// (and so reads its console and its memory); otherwise it targets -url and reads codes from
// -console.
//
// The started server gets only PATH, HOME, TMPDIR and libpq's password and TLS variables of
// this tool's environment, and -env: what is measured does not depend on the caller's GOGC, GOMEMLIMIT or
// OTEL_* variables. In flow mode
// it also gets every optional feature a sign-up touches switched on (see featureEnv): webhooks to
// a receiver this tool serves, the sign-in link in the code's e-mail, the new-device check and the
// Prometheus endpoint; -plain leaves them at the service's defaults, and -trace adds OpenTelemetry
// traces exported to the same receiver. A -env entry overrides any of them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

type options struct {
	url, mode, server, console string
	serverLog                  string
	conns                      int
	duration, warmup           time.Duration
	env                        []string
	// plain leaves the optional features at the service's defaults; trace adds tracing.
	plain, trace bool
	// after is a shell command run once the flows have ended, whose PostgreSQL CPU is reported
	// per flow (the VACUUM of the rows the flows left behind).
	after string
}

func main() {
	var o options
	var env string
	flag.StringVar(&o.url, "url", "http://127.0.0.1:3000", "base URL of the service")
	flag.StringVar(&o.mode, "mode", "bearer", "bearer, cookie, flow or start")
	flag.StringVar(&o.server, "server", "", "service binary to start (its stdout is the console)")
	flag.StringVar(&o.console, "console", "", "file with the service's console output (without -server)")
	flag.StringVar(&env, "env", "", "comma-separated NAME=value pairs for -server")
	flag.StringVar(&o.serverLog, "server-log", "", "file the -server's stderr (its logs) is appended to (default: this tool's stderr)")
	flag.IntVar(&o.conns, "c", 32, "concurrent connections (or flows)")
	flag.IntVar(&postmasterPID, "postmaster", 0, "count as PostgreSQL's CPU only this postmaster and its processes (default: every process named postgres)")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "how long to measure")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before measuring")
	flag.BoolVar(&o.plain, "plain", false, "flow mode: leave webhooks, the sign-in link, the new-device check and metrics at the service's defaults")
	flag.BoolVar(&o.trace, "trace", false, "flow mode: also export OpenTelemetry traces (every request sampled) to this tool's receiver")
	flag.StringVar(&o.after, "after", "", "flow mode: a shell command run after the flows, whose PostgreSQL CPU is reported per flow (a VACUUM)")
	flag.Parse()
	if env != "" {
		o.env = strings.Split(env, ",")
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var srv *server
	var sink *receiver
	if o.server != "" {
		var err error
		if o.mode == "flow" && !o.plain {
			if sink, err = startReceiver(); err != nil {
				return err
			}
			defer sink.close()
			o.env = append(featureEnv(sink, o.trace), o.env...) // -env overrides
		}
		if srv, err = startServer(o); err != nil {
			return err
		}
		defer srv.stop()
		fmt.Printf("start-to-ready: %s\n", srv.ready.Round(time.Millisecond))
		if o.mode == "start" {
			return nil
		}
	} else if o.mode == "start" {
		return errors.New("-mode start needs -server")
	}
	codes := newCodeBook()
	switch {
	case srv != nil:
		codes.follow(srv.stdout)
	case o.console != "":
		f, err := os.Open(o.console)
		if err != nil {
			return err
		}
		defer f.Close()
		f.Seek(0, io.SeekEnd)
		codes.follow(tail{f})
	default:
		return errors.New("codes are read from the console: give -server or -console")
	}
	c := newClient(o)
	var res *result
	switch o.mode {
	case "bearer", "cookie":
		s, err := c.signIn(fmt.Sprintf("load-%d@example.com", time.Now().UnixNano()), codes)
		if err != nil {
			return fmt.Errorf("signing in: %w", err)
		}
		res = c.reads(o, s)
	case "flow":
		res = c.flows(o, codes)
	default:
		return fmt.Errorf("unknown -mode %q", o.mode)
	}
	res.print(o)
	if sink != nil {
		sink.print(res.all.Load())
	}
	if srv != nil {
		fmt.Printf("server RSS: %.1f MB (peak %.1f MB)\n", srv.rss("VmRSS"), srv.rss("VmHWM"))
	}
	return res.err
}

// server is the service binary the tool started.
type server struct {
	cmd    *exec.Cmd
	stdout io.Reader
	ready  time.Duration
}

func startServer(o options) (*server, error) {
	cmd := exec.Command(o.server)
	cmd.Env = append(baseEnv(), o.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if o.serverLog != "" {
		f, err := os.OpenFile(o.serverLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own copy once started
		cmd.Stderr = f
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		status, _, err := fasthttp.GetTimeout(nil, o.url+"/readyz", time.Second)
		if err == nil && status == 200 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, errors.New("the server did not become ready")
		}
		time.Sleep(time.Millisecond)
	}
	serverPID = cmd.Process.Pid
	return &server{cmd: cmd, stdout: stdout, ready: time.Since(started)}, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
}

// rss reads a memory figure (VmRSS, VmHWM) of the server process, in MB.
func (s *server) rss(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// tail reads a growing file.
type tail struct{ f *os.File }

func (t tail) Read(p []byte) (int, error) {
	for {
		n, err := t.f.Read(p)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		time.Sleep(time.Millisecond)
	}
}

// codeBook collects the codes the console mailer prints, by address.
type codeBook struct {
	mu      sync.Mutex
	codes   map[string]string
	waiters map[string]chan string
}

// codeLine is a sign-in code's e-mail on the console, with or without its link (AUTH_SIGNIN_LINK).
var codeLine = regexp.MustCompile(`^mail kind=sign-in-code(?:-link)? to=(\S+) code=(\S+)`)

func newCodeBook() *codeBook {
	return &codeBook{codes: map[string]string{}, waiters: map[string]chan string{}}
}

func (b *codeBook) follow(r io.Reader) {
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			if m := codeLine.FindStringSubmatch(s.Text()); m != nil {
				b.mu.Lock()
				if w, ok := b.waiters[m[1]]; ok {
					w <- m[2]
					delete(b.waiters, m[1])
				} else {
					b.codes[m[1]] = m[2]
				}
				b.mu.Unlock()
			}
		}
	}()
}

// wait returns the code mailed to email, waiting for the line to appear.
func (b *codeBook) wait(email string, timeout time.Duration) (string, error) {
	b.mu.Lock()
	if code, ok := b.codes[email]; ok {
		delete(b.codes, email)
		b.mu.Unlock()
		return code, nil
	}
	ch := make(chan string, 1)
	b.waiters[email] = ch
	b.mu.Unlock()
	select {
	case code := <-ch:
		return code, nil
	case <-time.After(timeout):
		b.mu.Lock()
		delete(b.waiters, email)
		b.mu.Unlock()
		return "", fmt.Errorf("no code for %s on the console", email)
	}
}

// client sends the requests, each from its own forwarded address.
type client struct {
	hc  *fasthttp.Client
	url string
	seq atomic.Uint64
}

func newClient(o options) *client {
	return &client{url: o.url, hc: &fasthttp.Client{MaxConnsPerHost: o.conns * 2, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}}
}

func (c *client) do(method, path string, body []byte, header ...string) (int, *fasthttp.Response, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	req.SetRequestURI(c.url + path)
	req.Header.SetMethod(method)
	n := c.seq.Add(1)
	var xff [16]byte
	a := append(xff[:0], "10."...)
	a = strconv.AppendUint(a, n>>16&255, 10)
	a = append(a, '.')
	a = strconv.AppendUint(a, n>>8&255, 10)
	a = append(a, '.')
	a = strconv.AppendUint(a, n&255, 10)
	req.Header.SetBytesV("X-Forwarded-For", a)
	req.Header.SetUserAgent(browserUserAgent)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	err := c.hc.Do(req, resp)
	return resp.StatusCode(), resp, err
}

// session is a signed-in client.
type session struct {
	bearer, cookie string
}

func (c *client) signIn(email string, codes *codeBook) (session, error) {
	status, resp, err := c.do("POST", "/api/auth/email-otp/send-verification-otp", []byte(`{"email":"`+email+`","type":"sign-in"}`))
	fasthttp.ReleaseResponse(resp)
	if err != nil || status != 200 {
		return session{}, fmt.Errorf("send: %d %v", status, err)
	}
	code, err := codes.wait(email, 10*time.Second)
	if err != nil {
		return session{}, err
	}
	status, resp, err = c.do("POST", "/api/auth/sign-in/email-otp", []byte(`{"email":"`+email+`","otp":"`+code+`"}`))
	defer fasthttp.ReleaseResponse(resp)
	if err != nil || status != 200 {
		return session{}, fmt.Errorf("verify: %d %v", status, err)
	}
	s := session{bearer: string(resp.Header.Peek("set-auth-token"))}
	var cookies []string
	resp.Header.VisitAllCookie(func(key, value []byte) {
		var ck fasthttp.Cookie
		ck.ParseBytes(value)
		cookies = append(cookies, string(ck.Key())+"="+string(ck.Value()))
	})
	s.cookie = strings.Join(cookies, "; ")
	return s, nil
}

// baseEnv is what the started server gets of this tool's environment: enough to run a program
// (a wrapper script included) and to authenticate to the database as psql does (libpq's password
// and TLS variables, which pgx reads too), nothing that changes what is measured (not PGOPTIONS,
// PGTZ and the like).
func baseEnv() []string {
	var env []string
	for _, name := range []string{"PATH", "HOME", "TMPDIR", "PGPASSWORD", "PGPASSFILE", "PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// result is what a run measured.
type result struct {
	ops    atomic.Int64
	errors atomic.Int64
	// all counts every flow that completed, warm-up and the end's included: the rows a VACUUM
	// afterwards (-after) cleans up are theirs.
	all atomic.Int64
	// after is the PostgreSQL CPU of -after's command.
	after   time.Duration
	elapsed time.Duration
	cpu     cpuSample
	mu      sync.Mutex
	steps   map[string][]time.Duration
	err     error
}

func (r *result) record(step string, d time.Duration) {
	r.mu.Lock()
	r.steps[step] = append(r.steps[step], d)
	r.mu.Unlock()
}

func (r *result) print(o options) {
	unit := "req/s"
	if o.mode == "flow" {
		unit = "flows/s"
	}
	fmt.Printf("mode %s, %d connections, %s: %.0f %s, %d errors\n", o.mode, o.conns, r.elapsed.Round(time.Millisecond),
		float64(r.ops.Load())/r.elapsed.Seconds(), unit, r.errors.Load())
	var names []string
	for n := range r.steps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := r.steps[n]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		pct := func(p float64) time.Duration { return d[int(float64(len(d)-1)*p)] }
		fmt.Printf("  %-12s p50 %8s  p99 %8s  (%d)\n", n, pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), len(d))
	}
	if ops := r.ops.Load(); ops > 0 {
		per := func(d time.Duration) time.Duration { return (d / time.Duration(ops)).Round(100 * time.Nanosecond) }
		rest := r.cpu.machine - r.cpu.tool - r.cpu.server - r.cpu.postgres
		fmt.Printf("CPU per %s: server %s + PostgreSQL %s = %s; load tool %s, rest of the machine %s; machine %.0f%% busy (%d cores)\n",
			map[bool]string{true: "flow", false: "request"}[o.mode == "flow"], per(r.cpu.server), per(r.cpu.postgres), per(r.cpu.server+r.cpu.postgres), per(r.cpu.tool), per(rest),
			100*r.cpu.machine.Seconds()/r.elapsed.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
		if r.cpu.postgres == 0 && o.mode == "flow" {
			fmt.Println("warning: no PostgreSQL process found on this machine: its CPU is not counted")
		}
		if all := r.all.Load(); o.after != "" && all > 0 {
			after := (r.after / time.Duration(all)).Round(100 * time.Nanosecond)
			fmt.Printf("CPU per flow after the flows (%s, over all %d flows the server ran): PostgreSQL %s; with it, %s\n",
				o.after, all, after, per(r.cpu.server+r.cpu.postgres)+after)
		}
	}
}

// measure runs work on o.conns goroutines for the warm-up and then the measured duration.
func measure(o options, res *result, work func(measuring bool)) {
	var measuring atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), o.warmup+o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < o.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				work(measuring.Load())
			}
		}()
	}
	time.Sleep(o.warmup)
	measuring.Store(true)
	start, before := time.Now(), sampleCPU()
	<-ctx.Done()
	res.elapsed, res.cpu = time.Since(start), sampleCPU().minus(before)
	wg.Wait()
}

// serverPID is the service the tool started, whose CPU time it reports; 0 when it targets -url.
var serverPID int

// cpuSample is CPU time used so far: by the server, by every PostgreSQL process of the machine
// (the server's backends, and through the postmaster's reaped-children time those that exited),
// by this tool, and by the whole machine (everything but idle and I/O wait), so the rest shows
// too.
type cpuSample struct{ server, postgres, tool, machine time.Duration }

func (a cpuSample) minus(b cpuSample) cpuSample {
	return cpuSample{a.server - b.server, a.postgres - b.postgres, a.tool - b.tool, a.machine - b.machine}
}

// clockTick is the kernel's USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTick = 10 * time.Millisecond

func sampleCPU() cpuSample {
	s := cpuSample{tool: processCPU("self"), postgres: postgresCPU()}
	if serverPID != 0 {
		s.server = processCPU(strconv.Itoa(serverPID))
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		// user nice system idle iowait irq softirq steal guest guest_nice: idle and I/O wait are
		// not busy, steal is time the hypervisor gave to others, and guest time is counted in
		// user time already.
		for i, f := range strings.Fields(line)[1:] {
			if i == 3 || i == 4 || i >= 7 {
				continue
			}
			n, _ := strconv.ParseInt(f, 10, 64)
			s.machine += time.Duration(n) * clockTick
		}
	}
	return s
}

// processCPU is the user and system time of a process (/proc/<pid>/stat fields 14 and 15).
func processCPU(pid string) time.Duration {
	own, _ := processTimes(pid)
	return own
}

// processTimes is a process's own user and system time, and that of its children it has reaped
// (fields 16 and 17).
func processTimes(pid string) (own, children time.Duration) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0, 0
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return time.Duration(n(11)+n(12)) * clockTick, time.Duration(n(13)+n(14)) * clockTick
}

// postmasterPID, when set (-postmaster), limits postgresCPU to one PostgreSQL server: that
// postmaster and its children, so that two servers measured at once (bench/pair) each count their
// own.
var postmasterPID int

// postgresCPU is the CPU time of every process named postgres (or of postmasterPID's), with the
// children they reaped (a backend that exited is in its postmaster's), read from /proc.
func postgresCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if !ofPostmaster(e.Name()) {
			continue
		}
		own, children := processTimes(e.Name())
		total += own + children
	}
	return total
}

// ofPostmaster reports whether the process pid counts for -postmaster: it is that postmaster or
// one of its children, or -postmaster is not set.
func ofPostmaster(pid string) bool {
	return postmasterPID == 0 || pid == strconv.Itoa(postmasterPID) || parentOf(pid) == postmasterPID
}

// parentOf is a process's parent's PID (/proc/<pid>/stat field 4); 0 when unknown.
func parentOf(pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func (c *client) reads(o options, s session) *result {
	res := &result{steps: map[string][]time.Duration{}}
	header := []string{"Authorization", "Bearer " + s.bearer}
	if o.mode == "cookie" {
		header = []string{"Cookie", s.cookie}
	}
	var checked atomic.Bool
	measure(o, res, func(measuring bool) {
		start := time.Now()
		status, resp, err := c.do("GET", "/api/auth/get-session", nil, header...)
		ok := err == nil && status == 200 && len(resp.Body()) > 10
		if ok && !checked.Swap(true) && o.mode == "cookie" && len(resp.Header.PeekCookie("auth.session_data")) > 0 {
			// The cache answers without setting a new cache cookie; a DB answer sets one.
			fmt.Println("warning: the answer came from the database, not the cookie cache")
		}
		fasthttp.ReleaseResponse(resp)
		if !measuring {
			return
		}
		if !ok {
			res.errors.Add(1)
			return
		}
		res.ops.Add(1)
		res.record("get-session", time.Since(start))
	})
	if res.errors.Load() > 0 {
		res.err = fmt.Errorf("%d requests failed", res.errors.Load())
	}
	return res
}

func (c *client) flows(o options, codes *codeBook) *result {
	res := &result{steps: map[string][]time.Duration{}}
	var n atomic.Int64
	run := time.Now().UnixNano()
	measure(o, res, func(measuring bool) {
		email := fmt.Sprintf("flow-%d-%d@example.com", run, n.Add(1))
		begin := time.Now()
		step := func(name string, f func() error) bool {
			start := time.Now()
			if err := f(); err != nil {
				if measuring {
					res.errors.Add(1)
					fmt.Fprintln(os.Stderr, name+":", err)
				}
				return false
			}
			if measuring {
				res.record(name, time.Since(start))
			}
			return true
		}
		var code string
		var bearer string
		ok := step("send", func() error {
			status, resp, err := c.do("POST", "/api/auth/email-otp/send-verification-otp", []byte(`{"email":"`+email+`","type":"sign-in"}`))
			fasthttp.ReleaseResponse(resp)
			if err != nil || status != 200 {
				return fmt.Errorf("%d %v", status, err)
			}
			return nil
		}) && step("code-mailed", func() (err error) {
			code, err = codes.wait(email, 30*time.Second)
			return err
		}) && step("verify", func() error {
			status, resp, err := c.do("POST", "/api/auth/sign-in/email-otp", []byte(`{"email":"`+email+`","otp":"`+code+`"}`))
			defer fasthttp.ReleaseResponse(resp)
			if err != nil || status != 200 {
				return fmt.Errorf("%d %v", status, err)
			}
			bearer = string(resp.Header.Peek("set-auth-token"))
			return nil
		}) && step("get-session", func() error {
			status, resp, err := c.do("GET", "/api/auth/get-session", nil, "Authorization", "Bearer "+bearer)
			defer fasthttp.ReleaseResponse(resp)
			var body struct{ User struct{ Email string } }
			if err != nil || status != 200 || json.Unmarshal(resp.Body(), &body) != nil || body.User.Email != email {
				return fmt.Errorf("%d %v", status, err)
			}
			return nil
		})
		if ok {
			res.all.Add(1)
		}
		if ok && measuring {
			res.ops.Add(1)
			res.record("flow", time.Since(begin))
		}
	})
	if res.errors.Load() > 0 {
		res.err = fmt.Errorf("%d steps failed", res.errors.Load())
	}
	if o.after != "" && res.err == nil {
		before := postgresCPU()
		cmd := exec.Command("sh", "-c", o.after)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			res.err = fmt.Errorf("-after: %w", err)
		}
		// The command's backend exits after the command does, and its CPU reaches its
		// postmaster's reaped-children time only once reaped.
		time.Sleep(500 * time.Millisecond)
		res.after = postgresCPU() - before
	}
	return res
}
