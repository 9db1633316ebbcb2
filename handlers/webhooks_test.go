package handlers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhookSecret is a test's WEBHOOK_SECRET: whsec_ and 32 bytes.
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// receiver is an app's webhook endpoint: it verifies every delivery's signature with the
// Standard Webhooks library and by hand, answers with status, and keeps what it got.
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// status is what the endpoint answers (200 unless the test says otherwise).
	status int
	// attempts are every request's webhook-id, delivered or not; events those it took.
	attempts []string
	events   []webhookEvent
	// clock is the service's, whose seconds webhook-timestamp carries.
	clock *testkit.Clock
}

// webhookEvent is one delivered event: its webhook-id and its body.
type webhookEvent struct {
	ID        string
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
	Raw       string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, status: http.StatusOK}
	verifier, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts = append(r.attempts, id)
		// The library checks the signature (the service's clock is not the wall clock, so the
		// timestamp is checked against the service's clock below, not the library's).
		if err := verifier.VerifyIgnoringTimestamp(body, req.Header); err != nil {
			t.Errorf("a delivery whose signature does not verify: %v", err)
		}
		// And by hand, as the specification writes it: v1,base64(HMAC-SHA256(key, id.ts.body)).
		ts := req.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
		fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
		if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); req.Header.Get("webhook-signature") != want {
			t.Errorf("webhook-signature %q, want %q", req.Header.Get("webhook-signature"), want)
		}
		if r.clock != nil {
			if sec, _ := strconv.ParseInt(ts, 10, 64); sec != r.clock.Now().Unix() {
				t.Errorf("webhook-timestamp %s, want the attempt's time %d", ts, r.clock.Now().Unix())
			}
		}
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(id, "msg_") {
			t.Errorf("a delivery %s with Content-Type %q and id %q", req.Method, req.Header.Get("Content-Type"), id)
		}
		if r.status != http.StatusOK {
			w.WriteHeader(r.status)
			return
		}
		ev := webhookEvent{ID: id, Raw: string(body)}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("a body that is not the event's JSON: %v %s", err, body)
		}
		r.events = append(r.events, ev)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// withReceivers configures WEBHOOK_URL with the receivers' endpoints, and the options more.
func withReceivers(rs []*receiver, more ...testkit.Option) []testkit.Option {
	urls := make([]string, len(rs))
	for i, r := range rs {
		urls[i] = r.srv.URL + "/hooks?app=" + strconv.Itoa(i)
	}
	return append(more, testkit.WithEnv("WEBHOOK_URL", strings.Join(urls, ",")), testkit.WithEnv("WEBHOOK_SECRET", webhookSecret))
}

// got returns the events delivered so far, after delivering what is due.
func (r *receiver) got(e *testkit.Env) []webhookEvent {
	e.Mailer.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webhookEvent(nil), r.events...)
}

// sameEvents reports whether two lists of types (types) hold the same events, in any order.
func sameEvents(got, want string) bool {
	g, w := strings.Split(got, ","), strings.Split(want, ",")
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// ofType is the first of evs of type typ.
func ofType(evs []webhookEvent, typ string) webhookEvent {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	return webhookEvent{}
}

// types lists the events' types, each with its reason or stage when it has one.
func types(evs []webhookEvent) string {
	var out []string
	for _, ev := range evs {
		s := ev.Type
		if why, ok := ev.Data["reason"].(string); ok && ev.Type == models.EventSessionRevoked {
			s += "(" + why + ")"
		}
		if stage, ok := ev.Data["stage"].(string); ok {
			s += "(" + stage + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// Every lifecycle change of an account is delivered to every endpoint, once, signed, with its
// data and no secret; a verification that fails is no event.
func TestWebhooks_LifecycleEvents(t *testing.T) {
	first, second := newReceiver(t), newReceiver(t)
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		first.reset(e.Clock)
		second.reset(e.Clock)
		alice := e.SignIn("alice@example.com")
		code := e.SendCode("alice@example.com")
		signIn(e, "alice@example.com", wrongCode(code, 0)).ExpectError(t, 400, "INVALID_OTP")
		if got := types(first.got(e)); !sameEvents(got, "user.created,session.created") {
			t.Fatalf("after a sign-up and a wrong code: %s", got)
		}
		created := ofType(first.got(e), models.EventUserCreated)
		if created.Data["userId"] != alice.UserID || created.Data["email"] != "alice@example.com" || !created.Timestamp.Equal(e.Clock.Now()) {
			t.Fatalf("user.created: %s", created.Raw)
		}
		if session := ofType(first.got(e), models.EventSessionCreated); session.Data["userId"] != alice.UserID || session.Data["sessionId"] == "" {
			t.Fatalf("session.created: %s", session.Raw)
		}

		e.Post("/api/marketing-consent", nil, bearer(alice)...)
		e.Post("/api/marketing-consent/withdraw", nil, bearer(alice)...)
		e.Post("/api/auth/sign-out", nil, bearer(alice)...)
		alice = e.SignIn("alice@example.com")
		e.SignIn("alice@example.com") // another device, signed out by the change
		changeByCode(t, e, alice, "alice@example.com", "alice@example.org")
		alice = e.SignIn("alice@example.org")
		if r := e.Post("/api/account/delete", nil, bearer(alice)...); r.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		alice = e.SignIn("alice@example.org") // within the grace period: restored
		admin := e.SignIn(adminEmail)
		if r := adminPost(e, admin, "ban-user", map[string]any{"userId": alice.UserID, "banReason": "spam"}); r.Status != http.StatusOK {
			t.Fatalf("ban: %d %s", r.Status, r.Body)
		}
		adminPost(e, admin, "unban-user", map[string]any{"userId": alice.UserID})
		if r := adminPost(e, admin, "remove-user", map[string]any{"userId": alice.UserID}); r.Status != http.StatusOK {
			t.Fatalf("remove: %d %s", r.Status, r.Body)
		}

		var mine []webhookEvent
		for _, ev := range first.got(e) {
			if ev.Data["userId"] == alice.UserID {
				mine = append(mine, ev)
			}
		}
		// The change by code keeps the session that makes it and ends the other; the deletion ends
		// both sessions she has by then.
		want := "user.created,session.created,consent.granted,consent.withdrawn,session.revoked(signed_out),session.created,session.created," +
			"user.email_changed,session.revoked(email_changed),session.created,user.deleted(requested),session.revoked(account_deleted),session.revoked(account_deleted)," +
			"user.deleted(restored),session.created,user.banned,session.revoked(banned),user.deleted(purged)"
		// Delivery order is not guaranteed (two workers may deliver at once: README, Webhooks);
		// the events' timestamps are, in the order the changes were made.
		if got := types(mine); !sameEvents(got, want) {
			t.Fatalf("alice's events:\n got %s\nwant %s", got, want)
		}
		slices.SortStableFunc(mine, func(a, b webhookEvent) int { return a.Timestamp.Compare(b.Timestamp) })
		if got := types(mine); got != want {
			t.Fatalf("alice's events by timestamp:\n got %s\nwant %s", got, want)
		}
		for _, ev := range mine {
			if ev.Type == models.EventUserEmailChanged && (ev.Data["email"] != "alice@example.org" || ev.Data["previousEmail"] != "alice@example.com") {
				t.Fatalf("user.email_changed: %s", ev.Raw)
			}
			if ev.Type == models.EventUserBanned && ev.Data["reason"] != "spam" {
				t.Fatalf("user.banned: %s", ev.Raw)
			}
		}
		// Every endpoint gets every event, under the same id, and each id once.
		a, b := first.got(e), second.got(e)
		if len(a) != len(b) {
			t.Fatalf("the endpoints got %d and %d events", len(a), len(b))
		}
		atSecond := map[string]string{}
		for _, ev := range b {
			atSecond[ev.ID] = ev.Raw
		}
		seen := map[string]bool{}
		for i := range a {
			if atSecond[a[i].ID] != a[i].Raw {
				t.Fatalf("event %s differs between the endpoints: %s / %s", a[i].ID, a[i].Raw, atSecond[a[i].ID])
			}
			if seen[a[i].ID] {
				t.Fatalf("event %s delivered twice", a[i].ID)
			}
			seen[a[i].ID] = true
			// No code, token or cookie in any event.
			for _, secret := range []string{code, alice.Token, alice.Bearer, admin.Token} {
				if strings.Contains(a[i].Raw, secret) {
					t.Fatalf("an event carries a secret: %s", a[i].Raw)
				}
			}
		}
	}, withReceivers([]*receiver{first, second}, withAdmin)...)
}

// reset forgets what an earlier database's run delivered, and follows clock.
func (r *receiver) reset(clock *testkit.Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events, r.attempts, r.clock, r.status = nil, nil, clock, http.StatusOK
}

// A receiver that is down loses nothing: each event is retried with backoff, under its id, and
// delivered once it is back; a receiver down for longer than three days has the deliveries given
// up, with a record for operators.
func TestWebhooks_ReceiverOutageLosesNothing(t *testing.T) {
	r := newReceiver(t)
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r.reset(e.Clock)
		r.mu.Lock()
		r.status = http.StatusServiceUnavailable
		r.mu.Unlock()
		for i := range 3 {
			e.SignIn(fmt.Sprintf("user%d@example.com", i))
		}
		if got := r.got(e); len(got) != 0 {
			t.Fatalf("%d events taken by a receiver that answers 503", len(got))
		}
		r.mu.Lock()
		failed := append([]string(nil), r.attempts...)
		r.status = http.StatusOK
		r.mu.Unlock()
		if len(failed) != 6 {
			t.Fatalf("%d attempts, want one per event (3 sign-ups, 3 sessions)", len(failed))
		}
		// Not yet due: the backoff holds the retry.
		if got := r.got(e); len(got) != 0 {
			t.Fatalf("%d events retried before their backoff", len(got))
		}
		e.Mailer.Flush()
		e.Clock.Advance(mail.WebhookBackoff(1))
		got := r.got(e)
		if len(got) != 6 {
			t.Fatalf("%d events after the receiver came back, want 6", len(got))
		}
		for i, ev := range got {
			if ev.ID != failed[i] && !containsID(failed, ev.ID) {
				t.Fatalf("a retry under a new id %s: the receiver cannot deduplicate", ev.ID)
			}
		}
		if n := e.Count(&models.OutboxMessage{}); n != 0 {
			t.Fatalf("%d outbox rows left", n)
		}

		// Down for good: the deliveries are retried for three days, then given up and recorded.
		r.mu.Lock()
		r.status = http.StatusInternalServerError
		r.mu.Unlock()
		e.SignIn("late@example.com")
		for elapsed := time.Duration(0); elapsed <= mail.WebhookRetry; elapsed += time.Hour {
			e.Mailer.Flush()
			e.Clock.Advance(time.Hour)
		}
		e.Mailer.Flush()
		if n := e.Count(&models.OutboxMessage{}, "kind = ? AND status = ?", "webhook", "abandoned"); n != 2 {
			t.Fatalf("%d webhook deliveries given up after three days, want 2", n)
		}
		if n := e.Count(&models.OutboxMessage{}, "kind = ? AND status = ?", "webhook", models.OutboxPending); n != 0 {
			t.Fatalf("%d webhook deliveries still pending after three days", n)
		}
	}, withReceivers([]*receiver{r})...)
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// The event is written in the change's transaction: a change that fails (a sign-in refused
// because the code was used by a parallel request) writes none, and an account purged by the
// nightly job is one user.deleted(purged).
func TestWebhooks_EventsCommitWithTheirChange(t *testing.T) {
	r := newReceiver(t)
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r.reset(e.Clock)
		s := e.SignIn("gone@example.com")
		if resp := e.Post("/api/account/delete", nil, bearer(s)...); resp.Status != http.StatusOK {
			t.Fatalf("delete: %d", resp.Status)
		}
		code := e.SendCode("other@example.com")
		signIn(e, "other@example.com", code)
		signIn(e, "other@example.com", code).ExpectError(t, 400, "INVALID_OTP")
		// Delivered before the test's clock jumps: a delivery under way while it jumps a month
		// would see its lease run out and be made again (at least once), as no real clock does.
		e.Mailer.Flush()
		e.Clock.Advance(auth.DefaultDeletionGrace + time.Minute)
		if n, err := e.Auth.PurgeDeletedAccounts(context.Background()); err != nil || n != 1 {
			t.Fatalf("purge: %d %v", n, err)
		}
		want := "user.created,session.created,user.deleted(requested),session.revoked(account_deleted),user.created,session.created,user.deleted(purged)"
		if got := types(r.got(e)); !sameEvents(got, want) {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
	}, withReceivers([]*receiver{r})...)
}

// Sessions an admin ends say so: revoked_by_admin for every admin route and page that ends them,
// revoked only for what the account does itself (issue 17 review).
func TestWebhooks_AdminRevocationsSayRevokedByAdmin(t *testing.T) {
	hooks := newReceiver(t)
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		hooks.reset(e.Clock)
		admin := e.SignIn(adminEmail)
		user := e.SignIn("revoked@example.com")
		second := e.SignIn("revoked@example.com")
		adminPost(e, admin, "revoke-user-session", map[string]any{"sessionToken": user.Token}).Decode(t, &struct{}{})
		var sess models.Session
		e.DB.Take(&sess, "user_id = ?", user.UserID)
		r := e.Do(testkit.Request{Method: "POST", Path: "/admin/users/" + user.UserID + "/sessions/revoke",
			Body: url.Values{"session": {sess.ID}}.Encode(), ContentType: "application/x-www-form-urlencoded",
			Cookies: admin.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		if r.Status != http.StatusSeeOther || live(t, e, second) {
			t.Fatalf("the admin page's one-device sign-out: %d", r.Status)
		}
		e.SignIn("revoked@example.com")
		adminPost(e, admin, "revoke-user-sessions", map[string]any{"userId": user.UserID}).Decode(t, &struct{}{})
		own := e.SignIn("revoked@example.com")
		e.SignIn("revoked@example.com")
		e.Post("/api/auth/revoke-other-sessions", map[string]any{}, bearer(own)...).Decode(t, &struct{}{})
		var got []string
		for _, ev := range hooks.got(e) {
			if ev.Type == models.EventSessionRevoked && ev.Data["userId"] == user.UserID {
				got = append(got, ev.Data["reason"].(string))
			}
		}
		if want := "revoked,revoked_by_admin,revoked_by_admin,revoked_by_admin"; !sameEvents(strings.Join(got, ","), want) {
			t.Fatalf("the reasons: %v, want %s", got, want)
		}
	}, withReceivers([]*receiver{hooks}, withAdmin)...)
}
