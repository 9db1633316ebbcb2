package handlers_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/middleware"
	"codeauth/models"
)

// sendFrom asks for a code for email with the given forwarding headers.
func sendFrom(e *testkit.Env, email string, header ...string) *testkit.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return e.Do(testkit.Request{Method: "POST", Path: sendPath, JSON: map[string]any{"email": email, "type": "sign-in"}, Header: h})
}

// expectTooMany checks the 429 answer of CONTRACT.md: body, and both retry headers.
func expectTooMany(t *testing.T, r *testkit.Response, maxWait time.Duration) {
	t.Helper()
	r.ExpectError(t, 429, "TOO_MANY_REQUESTS")
	if string(r.Body) != `{"message":"Too many requests. Please try again later.","code":"TOO_MANY_REQUESTS"}` {
		t.Fatalf("429 body = %s", r.Body)
	}
	x, std := r.Header.Get("X-Retry-After"), r.Header.Get("Retry-After")
	secs, err := strconv.Atoi(x)
	if err != nil || x != std || secs < 1 || time.Duration(secs)*time.Second > maxWait {
		t.Fatalf("retry headers X-Retry-After=%q Retry-After=%q, want equal whole seconds in 1..%v", x, std, maxWait)
	}
}

// Catalogue D, A5: the 21st code request from one address in a minute is refused, and the
// window opens again after a minute.
func TestPerIP_SendLimit(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for i := 1; i <= middleware.RuleSendCode.Max; i++ {
			if r := sendFrom(e, fmt.Sprintf("u%d@example.com", i), "X-Forwarded-For", "203.0.113.7"); r.Status != 200 {
				t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
			}
		}
		r := sendFrom(e, "u21@example.com", "X-Forwarded-For", "203.0.113.7")
		expectTooMany(t, r, time.Minute)
		if len(e.Mailer.Find(mail.KindSignInCode, "u21@example.com")) != 0 {
			t.Fatal("a refused request sent a code")
		}
		// Another address is not affected; the same address is again after the window.
		if r := sendFrom(e, "u21@example.com", "X-Forwarded-For", "203.0.113.8"); r.Status != 200 {
			t.Fatalf("other address: %d", r.Status)
		}
		e.Clock.Advance(time.Minute)
		if r := sendFrom(e, "u22@example.com", "X-Forwarded-For", "203.0.113.7"); r.Status != 200 {
			t.Fatalf("after the window: %d %s", r.Status, r.Body)
		}
	})
}

func TestPerIP_SignInAndDefaultLimits(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for i := 1; i <= middleware.RuleSignIn.Max; i++ {
		r := e.Do(testkit.Request{Method: "POST", Path: signInPath, JSON: map[string]any{"email": "a@example.com", "otp": "000000"},
			Header: http.Header{"X-Forwarded-For": {"203.0.113.7"}}})
		if r.Status == 429 {
			t.Fatalf("verify %d was limited", i)
		}
	}
	r := e.Do(testkit.Request{Method: "POST", Path: signInPath, JSON: map[string]any{"email": "a@example.com", "otp": "000000"},
		Header: http.Header{"X-Forwarded-For": {"203.0.113.7"}}})
	expectTooMany(t, r, time.Minute)

	for i := 1; i <= middleware.RuleDefault.Max; i++ {
		if r := e.Get(getSessionPath, "X-Forwarded-For", "203.0.113.50"); r.Status != 200 {
			t.Fatalf("session read %d: %d", i, r.Status)
		}
	}
	expectTooMany(t, e.Get("/api/me", "X-Forwarded-For", "203.0.113.50"), time.Minute)
	// The probes are not API routes and stay reachable.
	if r := e.Get("/healthz", "X-Forwarded-For", "203.0.113.50"); r.Status != 200 {
		t.Fatalf("healthz: %d", r.Status)
	}
}

// Catalogue D36: a forwarded-for chain the service cannot resolve lands in one shared bucket, so
// rotating the spoofed part mints nothing; the problem is logged once.
func TestPerIP_ForgedChainsShareOneBucket(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for i := 1; i <= middleware.RuleSendCode.Max; i++ {
		chain := fmt.Sprintf("198.51.100.%d, 203.0.113.7", i)
		if r := sendFrom(e, fmt.Sprintf("u%d@example.com", i), "X-Forwarded-For", chain); r.Status != 200 {
			t.Fatalf("send %d: %d", i, r.Status)
		}
	}
	expectTooMany(t, sendFrom(e, "x@example.com", "X-Forwarded-For", "198.51.100.99, 203.0.113.7"), time.Minute)
	expectTooMany(t, sendFrom(e, "y@example.com", "X-Forwarded-For", "unknown"), time.Minute)
	// An X-Real-IP the client writes itself does not pick a bucket either.
	for i := 0; i < 5; i++ {
		expectTooMany(t, sendFrom(e, "z@example.com", "X-Forwarded-For", "1.1.1.1, 203.0.113.7", "X-Real-Ip", fmt.Sprintf("192.0.2.%d", i)), time.Minute)
	}
	if n := strings.Count(e.Logs.String(), "could not be resolved"); n != 1 {
		t.Fatalf("the unresolved address was logged %d times, want once", n)
	}
}

// Catalogue D37: behind trusted proxies the client is the first untrusted hop from the right;
// spoofing the left part of the chain does not help, and the session records that address.
func TestPerIP_TrustedProxiesChooseTheRightHop(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithTrustedProxies("127.0.0.0/8", "10.0.0.0/8"))
	for i := 1; i <= middleware.RuleSendCode.Max; i++ {
		chain := fmt.Sprintf("6.6.6.%d, 203.0.113.7, 10.0.0.5", i)
		if r := sendFrom(e, fmt.Sprintf("u%d@example.com", i), "X-Forwarded-For", chain); r.Status != 200 {
			t.Fatalf("send %d: %d", i, r.Status)
		}
	}
	expectTooMany(t, sendFrom(e, "x@example.com", "X-Forwarded-For", "1.1.1.1, 203.0.113.7, 10.0.0.5"), time.Minute)
	if r := sendFrom(e, "x@example.com", "X-Forwarded-For", "203.0.113.7, 203.0.113.8, 10.0.0.5"); r.Status != 200 {
		t.Fatalf("another client behind the same proxy: %d", r.Status)
	}
	code := e.Mailer.LastCode("u1@example.com")
	r := e.Do(testkit.Request{Method: "POST", Path: signInPath, JSON: map[string]any{"email": "u1@example.com", "otp": code},
		Header: http.Header{"X-Forwarded-For": {"9.9.9.9, 203.0.113.20, 10.0.0.5"}}})
	var body struct{ Token string }
	r.Decode(t, &body)
	var sess models.Session
	e.DB.Take(&sess)
	if sess.IPAddress != "203.0.113.20" {
		t.Fatalf("session ipAddress = %q, want 203.0.113.20", sess.IPAddress)
	}
}

// Catalogue D39: IPv6 neighbours in one /64 share a bucket, in every spelling; another /64 does
// not.
func TestPerIP_IPv6NeighboursShareABucket(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	spellings := []string{"2001:db8:1:2::%x", "2001:DB8:1:2:0:0:0:%x", "2001:0db8:0001:0002::%x"}
	for i := 1; i <= middleware.RuleSendCode.Max; i++ {
		addr := fmt.Sprintf(spellings[i%3], i)
		if r := sendFrom(e, fmt.Sprintf("u%d@example.com", i), "X-Forwarded-For", addr); r.Status != 200 {
			t.Fatalf("send %d from %s: %d", i, addr, r.Status)
		}
	}
	expectTooMany(t, sendFrom(e, "x@example.com", "X-Forwarded-For", "2001:db8:1:2:ffff:ffff:ffff:ffff"), time.Minute)
	if r := sendFrom(e, "x@example.com", "X-Forwarded-For", "2001:db8:1:3::1"); r.Status != 200 {
		t.Fatalf("the next /64: %d", r.Status)
	}
	// IPv4-mapped IPv6 is the IPv4 address.
	for i := 1; i <= middleware.RuleSendCode.Max; i++ {
		sendFrom(e, fmt.Sprintf("v%d@example.com", i), "X-Forwarded-For", "192.0.2.1")
	}
	expectTooMany(t, sendFrom(e, "v99@example.com", "X-Forwarded-For", "::ffff:192.0.2.1"), time.Minute)
}

// Catalogue A5, A6, R5: five codes per address per 15 minutes, exact across two instances on
// one database even when 20 requests race; the sixth sends nothing.
func TestPerEmail_SendThrottleAcrossInstances(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		other := e.Sibling()
		var wg sync.WaitGroup
		statuses := make([]int, 20)
		for i := range statuses {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				instance := e
				if i%2 == 1 {
					instance = other
				}
				statuses[i] = instance.Post(sendPath, map[string]any{"email": "victim@example.com", "type": "sign-in"}).Status
			}(i)
		}
		wg.Wait()
		ok, limited := 0, 0
		for _, s := range statuses {
			switch s {
			case 200:
				ok++
			case 429:
				limited++
			default:
				t.Fatalf("status %d in %v", s, statuses)
			}
		}
		if ok != auth.SendLimit || limited != 20-auth.SendLimit {
			t.Fatalf("%d sent and %d limited, want %d and %d", ok, limited, auth.SendLimit, 20-auth.SendLimit)
		}
		// Each of the five e-mails is delivered, or dropped unsent because a newer code replaced
		// its code before it went out (a replaced code is dead: catalogue R4); the live code is
		// always delivered, and none is left waiting.
		delivered := e.Mailer.Find(mail.KindSignInCode, "victim@example.com")
		left := e.Count(&models.OutboxMessage{}, "recipient = ?", "victim@example.com")
		if len(delivered) == 0 || len(delivered) > auth.SendLimit || left != 0 {
			t.Fatalf("%d delivered and %d left in the outbox; want 1 to %d delivered, none left", len(delivered), left, auth.SendLimit)
		}
		// Exactly one delivered code is live. (The test clock stands still, so the messages'
		// times cannot tell which was issued last; at most four stale tries fit the live code's
		// five.)
		works := 0
		for _, m := range delivered {
			if signIn(e, "victim@example.com", m.Code).Status == 200 {
				works++
			}
		}
		if works != 1 {
			t.Fatalf("%d of the %d delivered codes signed in, want exactly the live one", works, len(delivered))
		}
		// The same address in another spelling is the same counter (catalogue A7).
		r := e.Post(sendPath, map[string]any{"email": " VICTIM@example.com", "type": "sign-in"})
		expectTooMany(t, r, auth.SendWindow)
		// Another address is independent, and the window reopens.
		if r := e.Post(sendPath, map[string]any{"email": "other@example.com", "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("another address: %d", r.Status)
		}
		e.Clock.Advance(auth.SendWindow)
		if r := other.Post(sendPath, map[string]any{"email": "victim@example.com", "type": "sign-in"}); r.Status != 200 {
			t.Fatalf("after the window: %d %s", r.Status, r.Body)
		}
		// The counter holds a keyed hash, not the address.
		var rows []models.AuthThrottle
		e.DB.Find(&rows)
		for _, row := range rows {
			if strings.Contains(row.Key, "@") {
				t.Fatalf("throttle key %q holds the address", row.Key)
			}
		}
	})
}

// Catalogue M106: the limits answer the same for an address with and without an account.
func TestPerEmail_SameAnswerForKnownAndUnknown(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	e.SignIn("known@example.com")
	for i := 1; i < auth.SendLimit; i++ {
		e.SendCode("known@example.com")
	}
	for i := 0; i < auth.SendLimit; i++ {
		e.SendCode("unknown@example.com")
	}
	known := e.Post(sendPath, map[string]any{"email": "known@example.com", "type": "sign-in"})
	unknown := e.Post(sendPath, map[string]any{"email": "unknown@example.com", "type": "sign-in"})
	if known.Status != 429 || string(known.Body) != string(unknown.Body) || known.Header.Get("Retry-After") != unknown.Header.Get("Retry-After") {
		t.Fatalf("known %d %s %s; unknown %d %s %s", known.Status, known.Body, known.Header.Get("Retry-After"),
			unknown.Status, unknown.Body, unknown.Header.Get("Retry-After"))
	}
}

// failCode spends one wrong guess on the live code of email and checks the answer.
func failCode(t *testing.T, e *testkit.Env, email string, n int) {
	t.Helper()
	code := e.Mailer.LastCode(email)
	signIn(e, email, wrongCode(code, n)).ExpectError(t, 400, "INVALID_OTP")
}

// Catalogue B20, B21: consecutive failures across codes are capped at
// AUTH_MAX_FAILED_VERIFICATIONS within 24 hours; past it, sends and verifies are refused until the
// window passes, and the address is told so, once, by e-mail; a success resets the count.
func TestFailureCap(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const email = "target@example.com"
		sends := 0
		send := func() string {
			if sends == auth.SendLimit {
				e.Clock.Advance(auth.SendWindow) // past the per-address send throttle
				sends = 0
			}
			sends++
			return e.SendCode(email)
		}
		failures := 0
		spend := func(n int) {
			for failures < n {
				if failures%auth.OTPMaxAttempts == 0 {
					send()
				}
				failCode(t, e, email, failures)
				failures++
			}
		}
		// 24 failures, then a success: the count starts again.
		spend(auth.DefaultMaxFailedVerifications - 1)
		if r := signIn(e, email, send()); r.Status != 200 {
			t.Fatalf("sign-in after 24 failures: %d %s", r.Status, r.Body)
		}
		failures = 0
		spend(auth.DefaultMaxFailedVerifications)

		// The 26th consecutive failure is refused before any comparison, and so are sends.
		before := e.Auth.Stats().CodeComparisons
		e.Clock.Advance(auth.SendWindow)
		expectTooMany(t, e.Post(sendPath, map[string]any{"email": email, "type": "sign-in"}), auth.FailureWindow)
		r := signIn(e, email, e.Mailer.LastCode(email))
		expectTooMany(t, r, auth.FailureWindow)
		if e.Auth.Stats().CodeComparisons != before {
			t.Fatal("a locked address still had its code compared")
		}
		e.Mailer.Flush()
		paused := e.Mailer.Find(mail.KindSignInPaused, email)
		if len(paused) != 1 || !strings.Contains(paused[0].Text, "25 wrong codes") || !strings.Contains(paused[0].Text, "paused until 2 March 2026") {
			t.Fatalf("the lock's notices: %+v", paused)
		}
		// Other addresses are not affected.
		e.SignIn("bystander@example.com")

		// A day after the first failure, the address works again.
		e.Clock.Advance(auth.FailureWindow)
		code := e.SendCode(email)
		if r := signIn(e, email, code); r.Status != 200 {
			t.Fatalf("sign-in after the window: %d %s", r.Status, r.Body)
		}
	})
}

// The cap holds under parallel guesses too: comparisons are counted before they are made. On
// PostgreSQL the count comes back from the statement that spends the attempt, and is the only
// guard: the lock check in that statement reads a snapshot that misses counts committed meanwhile.
func TestFailureCap_ParallelGuessesStopAtTheCap(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for round := 0; round < 3; round++ {
			email := fmt.Sprintf("target%d@example.com", round)
			e.SendCode(email)
			before := e.Auth.Stats().CodeComparisons
			var wg sync.WaitGroup
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					signIn(e, email, wrongCode("", i))
				}(i)
			}
			wg.Wait()
			if got := e.Auth.Stats().CodeComparisons - before; got != 3 {
				t.Fatalf("round %d: %d comparisons with a cap of 3", round, got)
			}
		}
	}, testkit.WithMaxFailedVerifications(3))
}

// RATE_LIMIT_STORE=postgres: two instances share their per-IP counters.
func TestPerIP_SharedStoreAcrossInstances(t *testing.T) {
	e := testkit.New(t, testkit.Postgres)
	shared := testkit.WithEnv("RATE_LIMIT_STORE", "postgres")
	a, b := e.Sibling(shared), e.Sibling(shared)
	for i := 1; i <= middleware.RuleSendCode.Max; i++ {
		instance := a
		if i%2 == 0 {
			instance = b
		}
		if r := sendFrom(instance, fmt.Sprintf("u%d@example.com", i), "X-Forwarded-For", "203.0.113.7"); r.Status != 200 {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
		}
	}
	expectTooMany(t, sendFrom(a, "x@example.com", "X-Forwarded-For", "203.0.113.7"), time.Minute)
	expectTooMany(t, sendFrom(b, "x@example.com", "X-Forwarded-For", "203.0.113.7"), time.Minute)
}

// Issue 19 #4: RATE_LIMIT_STORE=postgres is exact across three instances, each with its own
// connection pool as three processes would have, under a burst: three times the limit at once,
// spread over the three, admits exactly the limit. (Its first version read a counter and wrote it
// back, exact within an instance only: the same bursts admitted 37 to 56 of 60 against a limit
// of 20.) Each request counts with one atomic upsert.
func TestPerIP_SharedStoreExactAcrossThreeInstances(t *testing.T) {
	e := testkit.New(t, testkit.Postgres)
	var instances []*testkit.Env
	for range 3 {
		instances = append(instances, e.Sibling(testkit.WithEnv("RATE_LIMIT_STORE", "postgres")))
	}
	limit := middleware.RuleSendCode.Max
	for round, ip := range []string{"203.0.113.21", "203.0.113.22", "203.0.113.23"} {
		var mu sync.Mutex
		var wg sync.WaitGroup
		admitted, refused := 0, 0
		for i := range 3 * limit {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := sendFrom(instances[i%3], fmt.Sprintf("b%d-%s@example.com", i, ip), "X-Forwarded-For", ip)
				mu.Lock()
				defer mu.Unlock()
				switch r.Status {
				case 200:
					admitted++
				case 429:
					refused++
				default:
					t.Errorf("send %d: %d %s", i, r.Status, r.Body)
				}
			}()
		}
		wg.Wait()
		if admitted != limit || refused != 2*limit {
			t.Errorf("burst %d: %d requests at once over 3 instances, limit %d: %d admitted, %d refused", round+1, 3*limit, limit, admitted, refused)
		}
	}
}
