package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"codeauth/handlers"
	"codeauth/internal/testkit"
	"codeauth/models"
)

// expectNothingChanged fails when a rejected request left any trace.
func expectNothingChanged(t *testing.T, e *testkit.Env) {
	t.Helper()
	for name, model := range map[string]any{"verifications": &models.Verification{}, "users": &models.User{}, "sessions": &models.Session{}} {
		if n := e.Count(model); n != 0 {
			t.Fatalf("%s = %d after rejected input, want 0", name, n)
		}
	}
	if n := len(e.Mailer.Messages()); n != 0 {
		t.Fatalf("%d e-mails sent after rejected input", n)
	}
}

// Catalogue N110: malformed bodies are 400 BAD_REQUEST, never 5xx.
func TestInput_MalformedJSON(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		bodies := map[string]string{
			"truncated":        `{"email":"a@example.com","type":`,
			"trailing garbage": `{"email":"a@example.com","type":"sign-in"} x`,
			"two objects":      `{"email":"a@example.com","type":"sign-in"}{}`,
			"invalid UTF-8":    "{\"email\":\"a\xff@example.com\",\"type\":\"sign-in\"}",
			"byte order mark":  "\ufeff{\"email\":\"a@example.com\",\"type\":\"sign-in\"}",
			"unclosed nesting": strings.Repeat("[", 10000),
			"single quotes":    `{'email':'a@example.com'}`,
		}
		for name, body := range bodies {
			r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json", Body: body})
			if r.Status != 400 {
				t.Fatalf("%s: status %d %s, want 400", name, r.Status, r.Body)
			}
			r.ExpectError(t, 400, "BAD_REQUEST")
		}
		// Duplicate keys are refused, not resolved silently.
		r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json",
			Body: `{"email":"a@example.com","email":"b@example.com","type":"sign-in"}`})
		r.ExpectError(t, 400, "BAD_REQUEST")
		// Well-formed JSON that is not an object, and missing fields, are validation errors.
		for _, body := range []string{`[]`, `"a@example.com"`, `null`, `42`} {
			e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json", Body: body}).
				ExpectError(t, 400, "VALIDATION_ERROR")
		}
		r = e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json", Body: `{}`})
		r.ExpectError(t, 400, "VALIDATION_ERROR")
		if want := `[body.email] Invalid input: expected string, received undefined`; !strings.Contains(string(r.Body), want) {
			t.Fatalf("message %s lacks %q", r.Body, want)
		}
		e.Do(testkit.Request{Method: "POST", Path: sendPath}).ExpectError(t, 400, "VALIDATION_ERROR")
		expectNothingChanged(t, e)
	})
}

// Catalogue E51, N111: only application/json bodies, and fields of the right type.
func TestInput_ContentTypeAndFieldTypes(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		body := `{"email":"a@example.com","type":"sign-in"}`
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "application/vnd.api+json"} {
			e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: ct, Body: body}).ExpectError(t, 415, "UNSUPPORTED_MEDIA_TYPE")
		}
		req, _ := http.NewRequest("POST", e.URL+sendPath, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 415 {
			t.Fatalf("no Content-Type: %d, want 415", resp.StatusCode)
		}
		// A charset parameter is fine.
		r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json; charset=utf-8", Body: body})
		if r.Status != 200 {
			t.Fatalf("application/json; charset=utf-8: %d %s", r.Status, r.Body)
		}
		for _, v := range []string{`42`, `true`, `null`, `["a@example.com"]`, `{"a":"b"}`} {
			r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json",
				Body: `{"email":` + v + `,"type":"sign-in"}`})
			r.ExpectError(t, 400, "VALIDATION_ERROR")
			if !strings.Contains(string(r.Body), "[body.email] Invalid input: expected string") {
				t.Fatalf("message for email=%s: %s", v, r.Body)
			}
		}
	})
}

// Catalogue N108: bodies over 16 KiB are 413 with a JSON error.
func TestInput_OversizeBody(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		pad := strings.Repeat("a", handlers.BodyLimit)
		r := e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json",
			Body: `{"email":"a@example.com","type":"sign-in","pad":"` + pad + `"}`})
		r.ExpectError(t, 413, "PAYLOAD_TOO_LARGE")
		expectNothingChanged(t, e)
		// Just under the limit is read normally.
		r = e.Do(testkit.Request{Method: "POST", Path: sendPath, ContentType: "application/json",
			Body: `{"email":"a@example.com","type":"sign-in","pad":"` + pad[:handlers.BodyLimit-100] + `"}`})
		if r.Status != 200 {
			t.Fatalf("a body under the limit: %d %s", r.Status, r.Body)
		}
	})
}

// hostileEmails are addresses the service must refuse (catalogue C28-C33, N113, N114).
var hostileEmails = map[string]string{
	"CRLF header injection": "a@example.com\r\nBcc: evil@example.net",
	"LF":                    "a@exa\nmple.com",
	"encoded CRLF":          "a@example.com%0d%0aSubject: hi",
	"display name":          "Alice <alice@example.com>",
	"angle brackets":        "<alice@example.com>",
	"comment":               "alice@example.com (comment)",
	"quoted local part":     `"alice"@example.com`,
	"quoted address":        `"alice@example.com"@evil.test`,
	"two @":                 "alice@example.com@evil.test",
	"list":                  "alice@example.com,bob@evil.test",
	"encoded word":          "=?utf-8?q?alice=40example.com?=@evil.test",
	"300 characters":        strings.Repeat("a", 290) + "@example.com",
	"long local part":       strings.Repeat("a", 65) + "@example.com",
	"NUL":                   "alice@example.com\x00",
	"zero-width space":      "\u200balice@example.com",
	"no-break space":        "alice\u00a0@example.com",
	"kelvin sign":           "\u212aate@example.com",
	"dotless i":             "m\u0131ke@example.com",
	"full-width":            "\uff41lice@example.com",
	"no domain dot":         "alice@localhost",
	"IP domain":             "alice@127.0.0.1",
	"domain literal":        "alice@[127.0.0.1]",
	"leading dot":           ".alice@example.com",
	"double dot":            "al..ice@example.com",
	"empty":                 "",
	"only spaces":           "   ",
	"missing local":         "@example.com",
	"missing domain":        "alice@",
	"hyphen label":          "alice@-example.com",
	"backslash":             `alice\@example.com`,
	"SQL quote":             "a@x.test' OR '1'='1",
	"10 KB local part":      strings.Repeat("a", 10000) + "@example.com",
}

// Hostile addresses are 400 INVALID_EMAIL on both routes and change nothing.
func TestInput_HostileEmails(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for name, email := range hostileEmails {
			r := e.Post(sendPath, map[string]any{"email": email, "type": "sign-in"})
			if r.Status != 400 {
				t.Fatalf("%s: send %q answered %d %s", name, email, r.Status, r.Body)
			}
			r.ExpectError(t, 400, "INVALID_EMAIL")
			e.Post(signInPath, map[string]any{"email": email, "otp": "123456"}).ExpectError(t, 400, "INVALID_EMAIL")
		}
		expectNothingChanged(t, e)
	})
}

// Unusual but valid addresses are accepted and kept distinct (catalogue C34, N113).
func TestInput_UnusualValidEmails(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for raw, canonical := range map[string]string{
			"user+tag@x.test":          "user+tag@x.test",
			"user@x.test":              "user@x.test",
			"a'b@x.test":               "a'b@x.test",
			"user@exämple.test":        "user@xn--exmple-cua.test",
			"USER@XN--EXMPLE-CUA.TEST": "user@xn--exmple-cua.test",
		} {
			if code := e.SendCode(raw); code == "" {
				t.Fatalf("no code for %q", raw)
			}
			if e.Mailer.LastCode(canonical) == "" {
				t.Fatalf("%q was not mailed as %q", raw, canonical)
			}
		}
		if n := e.Count(&models.Verification{}); n != 4 {
			t.Fatalf("pending codes = %d, want 4 distinct identities", n)
		}
	})
}

// Catalogue A11: unknown fields are ignored and nothing is taken from them.
func TestInput_ExtraFieldsAreIgnored(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		r := e.Post(sendPath, map[string]any{"email": "a@example.com", "type": "sign-in", "name": "x", "emailVerified": true, "callbackURL": "/welcome"})
		if r.Status != 200 {
			t.Fatalf("send with extra fields: %d %s", r.Status, r.Body)
		}
		if n := e.Count(&models.User{}); n != 0 {
			t.Fatalf("users = %d", n)
		}
		code := e.Mailer.LastCode("a@example.com")
		r = e.Post(signInPath, map[string]any{"email": "a@example.com", "otp": code, "id": "00000000-0000-0000-0000-000000000000", "emailVerified": false, "image": "https://evil.test/x.png"})
		var body struct {
			User struct {
				ID            string  `json:"id"`
				EmailVerified bool    `json:"emailVerified"`
				Image         *string `json:"image"`
			} `json:"user"`
		}
		r.Decode(t, &body)
		if body.User.ID == "00000000-0000-0000-0000-000000000000" || !body.User.EmailVerified || body.User.Image != nil {
			t.Fatalf("fields were taken from the request: %s", r.Body)
		}
	})
}

func TestRoutes_UnknownAndWrongMethodAreJSON(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	e.Get("/api/auth/nope").ExpectError(t, 404, "NOT_FOUND")
	// Catalogue L101: no file is served from the source tree. Pages are private by default, so
	// an anonymous visitor is sent to sign in; a signed-in one gets the 404 page.
	for _, p := range []string{"/.git/config", "/go.mod", "/views/pages.templ", "/static/../main.go", "/static/static.go"} {
		if r := e.Get(p); r.Status != 303 && r.Status != 404 {
			t.Fatalf("%s: %d", p, r.Status)
		} else if strings.Contains(string(r.Body), "package ") || strings.Contains(string(r.Body), "[core]") {
			t.Fatalf("%s served source", p)
		}
	}
	e.Get(sendPath).ExpectError(t, 405, "METHOD_NOT_ALLOWED")
	// better-auth's own code for a POST to get-session (its deferred refreshes being off).
	if r := e.Post("/api/auth/get-session", map[string]any{}); r.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST get-session: Allow %q", r.Header.Get("Allow"))
	} else {
		r.ExpectError(t, 405, "METHOD_NOT_ALLOWED_DEFER_SESSION_REQUIRED")
	}
	if r := e.Get("/api/auth/ok"); r.Status != 200 || string(r.Body) != `{"ok":true}` {
		t.Fatalf("ok: %d %s", r.Status, r.Body)
	}
	if r := e.Get("/healthz"); r.Status != 200 {
		t.Fatalf("healthz: %d", r.Status)
	}
	if r := e.Get("/readyz"); r.Status != 200 {
		t.Fatalf("readyz: %d", r.Status)
	}
	if r := e.Get("/api/auth/ok"); r.Header.Get("X-Request-Id") == "" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers: %v", r.Header)
	}
}

// Catalogue N110: a key given twice anywhere in a body, and an escaped half of a surrogate pair
// (which encoding/json reads as U+FFFD), are refused like malformed JSON (failure review: a
// nested duplicate let its last value win, and a lone surrogate was stored as U+FFFD in a name).
func TestInput_NestedDuplicateKeysAndLoneSurrogates(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("nested@example.com")
		for name, body := range map[string]string{
			"nested duplicate":      `{"name":"a","image":null,"x":{"k":1,"k":2}}`,
			"duplicate in an array": `{"name":"a","x":[{"k":1},{"k":1,"k":2}]}`,
			"lone high surrogate":   `{"name":"a\ud800b"}`,
			"lone low surrogate":    `{"name":"\udfff"}`,
			"high then not low":     `{"name":"\ud800\u0041"}`,
			"high at the end":       `{"name":"x\ud83d"}`,
		} {
			r := e.Do(testkit.Request{Method: "POST", Path: updateUserPath, ContentType: "application/json", Body: body,
				Header: http.Header{"Authorization": {"Bearer " + s.Bearer}}})
			r.ExpectError(t, 400, "BAD_REQUEST")
			if name == "nested duplicate" && !strings.Contains(string(r.Body), `duplicate key \"k\"`) {
				t.Fatalf("%s: %s", name, r.Body)
			}
		}
		// A real pair, and an escaped backslash before a u, are text.
		for _, name := range []string{`"\ud83d\ude00 Smile"`, `"back\\ud800slash"`} {
			r := e.Do(testkit.Request{Method: "POST", Path: updateUserPath, ContentType: "application/json", Body: `{"name":` + name + `}`,
				Header: http.Header{"Authorization": {"Bearer " + s.Bearer}}})
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		var u models.User
		e.DB.Take(&u, "id = ?", s.UserID)
		if u.Name != `back\ud800slash` {
			t.Fatalf("the name is %q", u.Name)
		}
	})
}
