package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/internal/testkit/vectors"
	"codeauth/middleware"
	"codeauth/models"
	"codeauth/static"

	"github.com/google/uuid"
)

// Catalogue O120, E: every page carries a CSP without inline scripts, refuses framing and
// sniffing, and is never cached; the e-mail link landing page sends no referrer.
func TestPages_SecurityHeaders(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithSecure())
	for _, path := range []string{"/", "/auth/sign-in", "/auth/sign-up", "/checkout/success?purchase=x", "/auth/verify-email"} {
		r := e.Get(path)
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Fatalf("%s: CSP %q allows inline or eval", path, csp)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("X-Frame-Options") != "DENY" ||
			r.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.Header.Get("Strict-Transport-Security"), "max-age=31536000") {
			t.Fatalf("%s: headers %v", path, r.Header)
		}
		want := "strict-origin-when-cross-origin"
		if path == "/auth/verify-email" {
			want = "no-referrer"
		}
		if got := r.Header.Get("Referrer-Policy"); got != want {
			t.Fatalf("%s: Referrer-Policy %q, want %q", path, got, want)
		}
	}
	// JSON answers may never be rendered or framed.
	if csp := e.Get("/api/auth/ok").Header.Get("Content-Security-Policy"); csp != "default-src 'none'; frame-ancestors 'none'" {
		t.Fatalf("API CSP %q", csp)
	}
}

var privatePage = regexp.MustCompile(`^/auth/sign-in(\?redirect=.*)?$`)

// expectSignInRedirect fails unless r sends the visitor to sign in.
func expectSignInRedirect(t *testing.T, r *testkit.Response, what string) {
	t.Helper()
	if r.Status != http.StatusSeeOther || !privatePage.MatchString(r.Header.Get("Location")) {
		t.Fatalf("%s: %d Location %q, want 303 to sign-in", what, r.Status, r.Header.Get("Location"))
	}
}

// Catalogue L98, L99, F58: every route that is not public sends an anonymous visitor to sign in,
// also through path variants; the public ones do not. htmx requests get 401 and HX-Redirect.
func TestPages_ProtectedByDefault(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	public := map[string]bool{}
	for _, route := range e.App.GetRoutes(true) {
		p := route.Path
		if strings.HasPrefix(p, "/api") || strings.HasPrefix(p, "/static") || p == "/healthz" || p == "/readyz" || strings.Contains(p, ":") {
			continue
		}
		// The guard's answer sends the visitor back here after signing in, or for a form's POST
		// to the page it came from (its Referer); a handler that sends people to sign in by
		// itself (signing out does) is not the guard and counts as public.
		back := p
		h := http.Header{}
		if route.Method != http.MethodGet && route.Method != http.MethodHead {
			back = "/account?from=a-form"
			h.Set("Referer", e.URL+back)
		}
		r := e.Do(testkit.Request{Method: route.Method, Path: p, Header: h})
		if r.Status == http.StatusSeeOther && r.Header.Get("Location") == middleware.SignInURL(back) {
			continue
		}
		public[route.Method+" "+p] = true
	}
	for _, want := range []string{"GET /", "GET /auth/sign-in", "GET /auth/sign-up", "GET /checkout/success",
		"GET /auth/verify-email", "GET /auth/restore-email", "GET /auth/account-deleted", "GET /auth/sign-in-link",
		"GET /robots.txt", "GET /favicon.ico",
		// The public forms' addresses, asked for with GET, go to their forms' pages.
		"GET /auth/code", "GET /auth/verify", "GET /auth/sign-out", "GET /checkout/claim", "GET /locale"} {
		// HEAD is answered like GET.
		head := "HEAD " + strings.TrimPrefix(want, "GET ")
		if !public[want] || !public[head] {
			t.Fatalf("%s or %s is not public", want, head)
		}
		delete(public, want)
		delete(public, head)
	}
	// The public form posts answer for themselves (a wrong body, a missing session).
	for _, allowed := range []string{"POST /auth/code", "POST /auth/verify", "POST /auth/sign-out", "POST /checkout/claim",
		"POST /auth/verify-email", "POST /auth/restore-email", "POST /locale", "POST /auth/sign-in-link"} {
		if !public[allowed] {
			t.Fatalf("%s is guarded, but its handler is meant to answer anonymous visitors itself", allowed)
		}
		delete(public, allowed)
	}
	if len(public) != 0 {
		t.Fatalf("routes reachable without a session: %v", public)
	}

	r := e.Get("/account?tab=profile")
	expectSignInRedirect(t, r, "/account")
	if loc := r.Header.Get("Location"); loc != "/auth/sign-in?redirect=%2Faccount%3Ftab%3Dprofile" {
		t.Fatalf("redirect target %q", loc)
	}
	for _, p := range []string{"/ACCOUNT", "/account/", "//account", "/./account", "/account%2F", "/account;x", "/pricing", "/Account/?x=1"} {
		if r := e.Get(p); r.Status != http.StatusSeeOther {
			t.Fatalf("%s: %d, want a redirect to sign-in", p, r.Status)
		}
	}
	for _, p := range []string{"/blog/post", "/docs", "/contact", "/roadmap", "/changelog", "/templates/x", "/ai", "/auth/whatever"} {
		if r := e.Get(p); r.Status == http.StatusSeeOther {
			t.Fatalf("public %s redirected to %q", p, r.Header.Get("Location"))
		}
	}
	r = e.Get("/account", "HX-Request", "true")
	if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("HX-Redirect"), "/auth/sign-in") {
		t.Fatalf("htmx request: %d HX-Redirect %q", r.Status, r.Header.Get("HX-Redirect"))
	}
	// A form's POST without a session goes back, after the sign-in, to the page the form was on
	// (its Referer on this host), never to its action, which answers only a POST; without a
	// Referer of this host, to the sign-in's default.
	host := strings.TrimPrefix(e.URL, "http://")
	for referer, want := range map[string]string{
		e.URL + "/account?tab=profile":  "/auth/sign-in?redirect=%2Faccount%3Ftab%3Dprofile",
		e.URL + "/Admin/users/some-id/": "/auth/sign-in?redirect=%2FAdmin%2Fusers%2Fsome-id%2F",
		// A refused form is answered at its action's path, which asked for with GET goes to the
		// form's page.
		e.URL + "/account/name":            "/auth/sign-in?redirect=%2Faccount%2Fname",
		e.URL + "/admin/users/some-id/ban": "/auth/sign-in?redirect=%2Fadmin%2Fusers%2Fsome-id%2Fban",
		e.URL + "/no-such-page":            "/auth/sign-in",
		"":                                 "/auth/sign-in",
		"https://evil.test/account":        "/auth/sign-in",
		"http://" + host + ".evil.test/x":  "/auth/sign-in",
		"%zz not a url":                    "/auth/sign-in",
	} {
		h := http.Header{"Origin": {e.URL}}
		if referer != "" {
			h.Set("Referer", referer)
		}
		r := e.Do(testkit.Request{Method: "POST", Path: "/account/name", Body: "name=x", ContentType: "application/x-www-form-urlencoded", Header: h})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Errorf("POST /account/name, Referer %q: %d to %q, want %q", referer, r.Status, r.Header.Get("Location"), want)
		}
	}
	// A signed-in visitor gets the page.
	s := e.SignIn("alice@example.com")
	if r := e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()}); r.Status != 200 || !strings.Contains(string(r.Body), "alice@example.com") {
		t.Fatalf("signed in /account: %d", r.Status)
	}
}

// Catalogue F55, F57, ASVS 3.7.2: the redirect target of the sign-in pages is a plain relative
// path or nothing, dot segments included ("/.//evil.test" is "//evil.test" once a browser has
// resolved it): on the page, after verifying without JavaScript, and for someone already signed in.
func TestPages_RedirectParameterIsSafe(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	signedIn := e.SignIn("someone@example.com")
	for i, v := range vectors.OpenRedirect {
		r := e.Get("/auth/sign-in?redirect=" + url.QueryEscape(v))
		if r.Status != 200 || strings.Contains(string(r.Body), "evil") || strings.Contains(string(r.Body), "javascript:") ||
			strings.Contains(string(r.Body), `name="redirect" value="/`) {
			t.Fatalf("redirect=%q: %d, kept in the page", v, r.Status)
		}
		// Posted directly without JavaScript, it is dropped too.
		email := fmt.Sprintf("user%d@example.com", i)
		code := e.SendCode(email)
		form := url.Values{"email": {email}, "otp": {code}, "mode": {"sign-in"}, "redirect": {v}}
		r = e.Do(testkit.Request{Method: "POST", Path: "/auth/verify", Body: form.Encode(), ContentType: "application/x-www-form-urlencoded"})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
			t.Fatalf("verify with redirect=%q: %d to %q", v, r.Status, r.Header.Get("Location"))
		}
		// Someone signed in goes straight on, to the account page rather than the target.
		r = e.Do(testkit.Request{Path: "/auth/sign-in?redirect=" + url.QueryEscape(v), Cookies: signedIn.Cookies()})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" {
			t.Fatalf("signed in, redirect=%q: %d to %q", v, r.Status, r.Header.Get("Location"))
		}
	}
}

// The page forms: HTML forms only, answered with whole pages without htmx, and an inline 422
// fragment for a wrong code with it.
// Without JavaScript a form's answer stays at the form's address; asked for with GET (reloaded
// from the address bar, the language switch, an error page's "Try again") it goes to the form's
// page, not to a 405.
func TestPages_FormAddressesGoToTheirPagesOnGET(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for path, page := range map[string]string{"/auth/code": "/auth/sign-in", "/auth/verify": "/auth/sign-in",
		"/auth/sign-out": "/", "/checkout/claim": "/", "/locale": "/"} {
		if r := e.Get(path); r.Status != http.StatusSeeOther || r.Header.Get("Location") != page {
			t.Fatalf("GET %s: %d to %q, want 303 to %s", path, r.Status, r.Header.Get("Location"), page)
		}
	}
	expectSignInRedirect(t, e.Get("/account/email"), "GET /account/email, signed out")
	s := e.SignIn("form-pages@example.com")
	for _, path := range []string{"/account/email", "/account/delete", "/account/devices/sign-out"} {
		if r := e.Do(testkit.Request{Path: path, Cookies: s.Cookies()}); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" {
			t.Fatalf("GET %s, signed in: %d to %q, want 303 to /account", path, r.Status, r.Header.Get("Location"))
		}
	}
	// An admin action's address goes to its account's page (whose own check refuses non-admins).
	if r := e.Do(testkit.Request{Path: "/admin/users/some-id/sessions/revoke", Cookies: s.Cookies()}); r.Status != http.StatusSeeOther ||
		r.Header.Get("Location") != "/admin/users/some-id" {
		t.Fatalf("GET an admin action: %d to %q", r.Status, r.Header.Get("Location"))
	}
	// The POSTs still answer as forms.
	if r := e.Post("/auth/code", map[string]any{"email": "a@example.com"}); r.Status != http.StatusUnsupportedMediaType {
		t.Fatalf("JSON to a form endpoint: %d", r.Status)
	}
}

func TestPages_FormAnswers(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	form := func(path string, v url.Values, header ...string) *testkit.Response {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return e.Do(testkit.Request{Method: "POST", Path: path, Body: v.Encode(), ContentType: "application/x-www-form-urlencoded", Header: h})
	}
	if r := e.Post("/auth/code", map[string]any{"email": "a@example.com"}); r.Status != 415 {
		t.Fatalf("JSON to a form endpoint: %d", r.Status)
	}
	r := form("/auth/code", url.Values{"email": {"not an address"}, "mode": {"sign-in"}})
	if r.Status != 422 || !strings.Contains(string(r.Body), "Enter a valid e-mail address") || !strings.Contains(string(r.Body), "<html") {
		t.Fatalf("bad address: %d", r.Status)
	}
	r = form("/auth/code", url.Values{"email": {"a@example.com"}, "mode": {"sign-in"}}, "HX-Request", "true")
	if r.Status != 200 || strings.Contains(string(r.Body), "<html") || !strings.Contains(string(r.Body), `id="otp"`) {
		t.Fatalf("htmx step two: %d %s", r.Status, r.Body)
	}
	r = form("/auth/verify", url.Values{"email": {"a@example.com"}, "otp": {"12"}, "mode": {"sign-in"}}, "HX-Request", "true")
	if r.Status != 422 || !strings.Contains(string(r.Body), "not right") || r.Header.Get("HX-Trigger") != "" {
		t.Fatalf("htmx wrong code: %d %s", r.Status, r.Body)
	}
	code := e.Mailer.LastCode("a@example.com")
	r = form("/auth/verify", url.Values{"email": {"a@example.com"}, "otp": {code}, "mode": {"sign-in"}, "redirect": {"/account"}}, "HX-Request", "true")
	if r.Status != 200 || r.Header.Get("HX-Trigger") != `{"verified":{"redirect":"/account"}}` || r.Cookie("auth.session_token") == nil {
		t.Fatalf("htmx verified: %d trigger %q", r.Status, r.Header.Get("HX-Trigger"))
	}
	// A cross-site form post is refused before anything happens (catalogue E44, E45).
	r = form("/auth/code", url.Values{"email": {"victim@example.com"}}, "Origin", "https://evil.test", "Sec-Fetch-Site", "cross-site")
	if r.Status != 403 || len(e.Mailer.Find("sign-in-code", "victim@example.com")) != 0 {
		t.Fatalf("cross-site form: %d", r.Status)
	}
	// Errors under pages are pages, and notices for htmx.
	if r := e.Get("/checkout/success?purchase=" + uuid.NewString()); r.Status != 404 || !strings.Contains(string(r.Body), "Purchase not found") {
		t.Fatalf("unknown purchase: %d", r.Status)
	}
	if r := e.Get("/auth/nowhere", "HX-Request", "true"); r.Status != 404 || r.Header.Get("HX-Retarget") != "#flash" {
		t.Fatalf("htmx 404: %d %v", r.Status, r.Header)
	}
}

// The sign-in page with everything it loads, the font included, weighs under 60 KB compressed
// (issue 18's bar); the font (woff2) is compressed already and is sent as it is.
func TestPages_SignInWeight(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	get := func(path string) *testkit.Response {
		return e.Do(testkit.Request{Path: path, Header: http.Header{"Accept-Encoding": {"br, gzip"}}})
	}
	page := get("/auth/sign-in")
	if page.Header.Get("Content-Encoding") == "" {
		t.Fatal("the page is not compressed")
	}
	total := len(page.Body)
	assets := regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`).FindAllStringSubmatch(decompressed(t, e), -1)
	seen := map[string]bool{}
	for _, m := range assets {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		r := get(m[1])
		font := r.Header.Get("Content-Type") == "font/woff2"
		if r.Status != 200 || (r.Header.Get("Content-Encoding") == "") != font || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("%s: %d %v", m[1], r.Status, r.Header)
		}
		total += len(r.Body)
	}
	t.Logf("sign-in page and %d assets: %d bytes compressed", len(seen), total)
	if len(seen) < 4 || !seen[static.URL("inter.woff2")] || total >= 60*1024 {
		t.Fatalf("%d bytes over %d assets %v, want the font among them and under 60 KB", total, len(seen), seen)
	}
}

func decompressed(t *testing.T, e *testkit.Env) string {
	t.Helper()
	return string(e.Get("/auth/sign-in").Body)
}

// Static assets: content-hashed, immutable, revalidated by ETag, and never leaking other files.
func TestStatic_Caching(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	page := string(e.Get("/").Body)
	m := regexp.MustCompile(`href="(/static/app\.css\?v=([0-9a-f]+))"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no hashed stylesheet link")
	}
	r := e.Get(m[1])
	if r.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || r.Header.Get("ETag") != `"`+m[2]+`"` {
		t.Fatalf("hashed asset headers %v", r.Header)
	}
	if r := e.Get("/static/app.css", "If-None-Match", `"`+m[2]+`"`); r.Status != 304 {
		t.Fatalf("revalidation: %d", r.Status)
	}
	if r := e.Get("/static/app.css?v=old"); !strings.Contains(r.Header.Get("Cache-Control"), "max-age=300") {
		t.Fatalf("stale hash cached for long: %v", r.Header)
	}
	for _, p := range []string{"/static/static.go", "/static/../main.go", "/static/%2e%2e%2fmain.go", "/static/"} {
		if r := e.Get(p); r.Status == 200 {
			t.Fatalf("%s served", p)
		}
	}
}

// Catalogue K94-K97: the consent grant needs a session, takes nothing from the body, never
// revokes, records evidence once, and survives parallel calls.
func TestMarketingConsent(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const path = "/api/marketing-consent"
		e.Post(path, nil).ExpectError(t, 401, "UNAUTHORIZED")
		if n := e.Count(&models.ConsentEvent{}); n != 0 {
			t.Fatalf("anonymous grant stored %d events", n)
		}
		s := e.SignIn("alice@example.com")
		other := e.SignIn("bob@example.com")
		// A cookie needs a trusted origin, like every state change.
		e.Do(testkit.Request{Method: "POST", Path: path, Cookies: s.Cookies()}).ExpectError(t, 403, "MISSING_OR_NULL_ORIGIN")

		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.Post(path, map[string]any{"user_id": other.UserID, "granted": false}, "Authorization", "Bearer "+s.Bearer,
					"Referer", e.URL+"/auth/sign-up", "User-Agent", "TestAgent/1")
				if r.Status != 200 || string(r.Body) != `{"success":true}` {
					t.Errorf("grant: %d %s", r.Status, r.Body)
				}
			}()
		}
		wg.Wait()
		var ud models.UserData
		e.DB.Where("user_id = ?", s.UserID).Take(&ud)
		if !ud.MarketingOptIn || ud.MarketingOptInAt == nil {
			t.Fatalf("consent not recorded: %+v", ud)
		}
		var events []models.ConsentEvent
		e.DB.Find(&events)
		if len(events) != 1 || events[0].UserID != s.UserID || events[0].Source != "/auth/sign-up" ||
			events[0].UserAgent != "TestAgent/1" || events[0].IPAddress == "" || events[0].Wording == "" {
			t.Fatalf("consent events %+v", events)
		}
		var bob models.UserData
		e.DB.Where("user_id = ?", other.UserID).Take(&bob)
		if bob.MarketingOptIn {
			t.Fatal("the body's user_id was obeyed")
		}
	}, behindProxy)
}

// Withdrawal is as easy as the grant (GDPR Art. 7(3)): grant, withdraw, grant again, through the
// API and through the account page's form without JavaScript, each change one evidence row, a
// repeated withdrawal none.
func TestMarketingConsent_WithdrawAndGrantAgain(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const grant, withdraw = "/api/marketing-consent", "/api/marketing-consent/withdraw"
		e.Post(withdraw, nil).ExpectError(t, 401, "UNAUTHORIZED")
		s := e.SignIn("carol@example.com")
		auth := []string{"Authorization", "Bearer " + s.Bearer, "User-Agent", "TestAgent/2"}
		optedIn := func() (bool, bool) {
			var ud models.UserData
			e.DB.Where("user_id = ?", s.UserID).Take(&ud)
			return ud.MarketingOptIn, ud.MarketingOptInAt != nil
		}
		for i, step := range []struct {
			path string
			want bool
		}{{grant, true}, {withdraw, false}, {withdraw, false}, {grant, true}} {
			e.Clock.Advance(time.Second) // the test's clock stands still otherwise: order the events
			if r := e.Post(step.path, nil, auth...); r.Status != 200 || string(r.Body) != `{"success":true}` {
				t.Fatalf("step %d %s: %d %s", i, step.path, r.Status, r.Body)
			}
			if in, since := optedIn(); in != step.want || since != step.want {
				t.Fatalf("after step %d %s: opted in %v (since set %v), want %v", i, step.path, in, since, step.want)
			}
		}
		var events []models.ConsentEvent
		e.DB.Where("user_id = ?", s.UserID).Order("created_at").Find(&events)
		if len(events) != 3 {
			t.Fatalf("%d evidence rows for grant, withdraw, (repeated withdraw), grant; want 3: %+v", len(events), events)
		}
		for i, want := range []bool{true, false, true} {
			if ev := events[i]; ev.Granted != want || ev.Source != "api" || ev.UserAgent != "TestAgent/2" || ev.Wording == "" || ev.IPAddress == "" {
				t.Errorf("event %d: %+v, want granted %v with its evidence", i, ev, want)
			}
		}
		// The account page: the same toggle as a plain form POST, recorded with the page as source.
		form := func(path string) *testkit.Response {
			return e.Do(testkit.Request{Method: "POST", Path: path, Body: "", ContentType: "application/x-www-form-urlencoded",
				Cookies: s.Cookies(), Header: http.Header{"Origin": {e.URL}}})
		}
		e.Clock.Advance(time.Second)
		if r := form("/account/consent/withdraw"); r.Status != 303 {
			t.Fatalf("page withdrawal: %d %s", r.Status, r.Body)
		}
		if in, _ := optedIn(); in {
			t.Fatal("the page's withdrawal did not withdraw")
		}
		page := e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()})
		if !strings.Contains(string(page.Body), `action="/account/consent"`) || !strings.Contains(string(page.Body), `aria-checked="false"`) ||
			strings.Contains(string(page.Body), `action="/account/consent/withdraw"`) {
			t.Fatal("the account page does not offer the grant after a withdrawal")
		}
		e.Clock.Advance(time.Second)
		if r := form("/account/consent"); r.Status != 303 {
			t.Fatalf("page grant: %d %s", r.Status, r.Body)
		}
		page = e.Do(testkit.Request{Path: "/account", Cookies: s.Cookies()})
		if !strings.Contains(string(page.Body), `action="/account/consent/withdraw"`) || !strings.Contains(string(page.Body), `aria-checked="true"`) {
			t.Fatal("the account page does not offer the withdrawal after a grant")
		}
		var last models.ConsentEvent
		e.DB.Where("user_id = ?", s.UserID).Order("created_at DESC").Take(&last)
		if !last.Granted || last.Source != "/account" {
			t.Fatalf("the page's grant was recorded as %+v", last)
		}
	}, behindProxy)
}
