package handlers_test

import (
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeauth/i18n"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// lang returns the language code of a.
func lang(t *testing.T, code string) *i18n.Locale {
	t.Helper()
	l, ok := i18n.Lookup(code)
	if !ok {
		t.Fatalf("no language %q", code)
	}
	return l
}

// inLanguage fails unless the page body is in l: its html element says so, and it holds l's
// words for the messages ids (as the page escapes them).
func inLanguage(t *testing.T, body []byte, l *i18n.Locale, ids ...string) {
	t.Helper()
	page := string(body)
	if !strings.Contains(page, `<html lang="`+l.Code()+`" dir="`+l.Dir()+`"`) {
		t.Fatalf("the page is not marked as %s: %.300s", l.Code(), page)
	}
	for _, id := range ids {
		if want := html.EscapeString(l.T(id)); !strings.Contains(page, want) {
			t.Errorf("the %s page does not say %q (%s)", l.Code(), want, id)
		}
	}
}

// Each page is in the language the browser asks for (Accept-Language), with lang and dir set,
// and in none of the others; a language the service does not speak gets the default.
func TestLocale_PagesFollowAcceptLanguage(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	for _, c := range []struct{ accept, want string }{
		{"de-DE,de;q=0.9,en;q=0.8", "de"}, {"fr-CA", "fr"}, {"es-419,es;q=0.9", "es"}, {"en-GB", "en"},
		{"ja, pt-BR;q=0.8", "en"}, {"", "en"},
	} {
		l := lang(t, c.want)
		for path, ids := range map[string][]string{
			"/":             {"home.heading", "home.lead", "layout.footer", "layout.skip"},
			"/auth/sign-in": {"signin.heading", "signin.lead", "entry.email_label", "entry.send", "signin.new_here"},
			"/auth/sign-up": {"signin.sign_up_heading", "signin.opt_in", "signin.have_account"},
		} {
			r := e.Get(path, "Accept-Language", c.accept)
			if r.Status != http.StatusOK {
				t.Fatalf("%s: %d", path, r.Status)
			}
			inLanguage(t, r.Body, l, ids...)
			for _, other := range i18n.All() {
				if other != l && strings.Contains(string(r.Body), html.EscapeString(other.T(ids[0]))) {
					t.Errorf("%s in %s also says %q", path, c.want, other.T(ids[0]))
				}
			}
		}
	}
	// The error page too.
	r := e.Get("/auth/no-such-page", "Accept-Language", "fr")
	if r.Status != http.StatusNotFound {
		t.Fatalf("404: %d", r.Status)
	}
	inLanguage(t, r.Body, lang(t, "fr"), "error.not_found", "error.back")
}

// The code-entry component in German: the code's length and lifetime in words, the refusal of a
// wrong code, all with htmx and without; the JSON API keeps better-auth's English messages.
func TestLocale_CodeEntryAndAPI(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	de := lang(t, "de")
	form := func(path string, body url.Values, header ...string) *testkit.Response {
		h := http.Header{"Origin": {e.URL}, "Accept-Language": {"de"}}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return e.Do(testkit.Request{Method: "POST", Path: path, Body: body.Encode(), ContentType: "application/x-www-form-urlencoded", Header: h})
	}
	r := form("/auth/code", url.Values{"email": {"dora@example.com"}, "mode": {"sign-in"}}, "HX-Request", "true")
	if r.Status != 200 || !strings.Contains(string(r.Body), "Wir haben einen 6-stelligen Code an diese Adresse gesendet") ||
		!strings.Contains(string(r.Body), `>dora<wbr>@example.<wbr>com</span>`) || !strings.Contains(string(r.Body), ">Ändern</a>") {
		t.Fatalf("the code step in German: %d %s", r.Status, r.Body)
	}
	r = form("/auth/verify", url.Values{"email": {"dora@example.com"}, "otp": {"000000"}, "mode": {"sign-in"}})
	if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), html.EscapeString(de.T("problem.invalid_otp"))) {
		t.Fatalf("a wrong code in German: %d", r.Status)
	}
	inLanguage(t, r.Body, de, "entry.code_label", "entry.verify", "entry.resend")

	api := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "not an address", "type": "sign-in"}, "Accept-Language", "de")
	api.ExpectError(t, 400, "INVALID_EMAIL")
	if !strings.Contains(string(api.Body), `"Invalid email"`) {
		t.Fatalf("the API's message is not better-auth's English one: %s", api.Body)
	}
}

// The language switch: a plain form that keeps the choice in a cookie and goes back to the page
// it was on, over what the browser asks for; a target that is not a plain path of this site is
// refused (the front page instead), and a language the service does not speak changes nothing.
func TestLocale_SwitchCookie(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	page := e.Get("/auth/sign-in?redirect=%2Faccount", "Accept-Language", "de")
	if !strings.Contains(string(page.Body), `action="/locale"`) || !strings.Contains(string(page.Body), `name="next" value="/auth/sign-in?redirect=%2Faccount"`) ||
		!strings.Contains(string(page.Body), `value="fr" lang="fr"`) || !strings.Contains(string(page.Body), ">Français</button>") {
		t.Fatalf("the page has no language switch coming back to it: %s", page.Body)
	}
	r := postForm(e, "/locale", url.Values{"locale": {"fr"}, "next": {"/auth/sign-in?redirect=%2Faccount"}})
	cookie := r.Cookie("auth.locale")
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/auth/sign-in?redirect=%2Faccount" || cookie == nil || cookie.Value != "fr" ||
		!cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.MaxAge < 300*24*3600 {
		t.Fatalf("switch: %d to %q, cookie %+v", r.Status, r.Header.Get("Location"), cookie)
	}
	r = e.Do(testkit.Request{Path: "/auth/sign-in", Cookies: []*http.Cookie{{Name: "auth.locale", Value: "fr"}}, Header: http.Header{"Accept-Language": {"de"}}})
	inLanguage(t, r.Body, lang(t, "fr"), "signin.heading", "entry.send")
	if !strings.Contains(string(r.Body), `aria-current="true" class=`) || !strings.Contains(string(r.Body), `value="fr" lang="fr" aria-current="true"`) {
		t.Error("the switch does not mark the page's language as the current one")
	}

	for _, next := range []string{"https://evil.test/", "//evil.test", "/\\evil.test", "javascript:alert(1)", "/./evil", "", "/%0d%0aSet-Cookie:x=1"} {
		r := postForm(e, "/locale", url.Values{"locale": {"es"}, "next": {next}})
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
			t.Errorf("next=%q: %d to %q, want the front page", next, r.Status, r.Header.Get("Location"))
		}
	}
	r = postForm(e, "/locale", url.Values{"locale": {"xx"}, "next": {"/auth/sign-up"}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/auth/sign-up" || r.Cookie("auth.locale") != nil {
		t.Fatalf("an unknown language: %d to %q, cookies %v", r.Status, r.Header.Get("Location"), r.Cookies)
	}
	// A forged cookie is no language: the browser's is used.
	r = e.Do(testkit.Request{Path: "/", Cookies: []*http.Cookie{{Name: "auth.locale", Value: "<script>"}}, Header: http.Header{"Accept-Language": {"es"}}})
	inLanguage(t, r.Body, lang(t, "es"), "home.heading")
	// The form is a page form: another site cannot post it.
	r = e.Do(testkit.Request{Method: "POST", Path: "/locale", Body: "locale=de&next=%2F", ContentType: "application/x-www-form-urlencoded",
		Header: http.Header{"Origin": {"https://evil.test"}}})
	if r.Status != http.StatusForbidden || r.Cookie("auth.locale") != nil {
		t.Fatalf("a cross-site switch: %d", r.Status)
	}
	// A page that answered a form comes back to the page the form was on.
	r = e.Do(testkit.Request{Method: "POST", Path: "/auth/verify", Body: "email=x%40example.com&otp=1&mode=sign-in", ContentType: "application/x-www-form-urlencoded",
		Header: http.Header{"Origin": {e.URL}, "Referer": {e.URL + "/auth/sign-up?redirect=https%3A%2F%2Fevil.test&x=1"}}})
	if !strings.Contains(string(r.Body), `name="next" value="/auth/sign-up?x=1"`) {
		t.Fatalf("the switch of a form's answer does not go back to the form's page (without the unsafe redirect): %s", r.Body)
	}
}

// AUTH_DEFAULT_LOCALE is the language when neither the switch nor the browser names one the
// service speaks.
func TestLocale_DefaultLocale(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_DEFAULT_LOCALE", "es"))
	es := lang(t, "es")
	for _, accept := range []string{"", "ja", "*"} {
		inLanguage(t, e.Get("/auth/sign-in", "Accept-Language", accept).Body, es, "signin.heading")
	}
	inLanguage(t, e.Get("/auth/sign-in", "Accept-Language", "en").Body, i18n.English(), "signin.heading")
	// A new address's code e-mail, asked for by a client that names no language, is Spanish too.
	e.SendCode("sofia@example.com")
	if m := e.Mailer.Last(mail.KindSignInCode, "sofia@example.com"); !strings.HasSuffix(m.Subject, "es su código de "+testkit.SiteName) {
		t.Fatalf("the code e-mail is not Spanish: %q", m.Subject)
	}
}

// An account keeps the language it signed up in: its e-mails are in it whatever language a later
// request asks for, while a new address gets the request's. Choosing another language on the
// pages while signed in moves the account's e-mails to it.
func TestLocale_AccountEmailsInItsLanguage(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		const email = "greta@example.com"
		send := func(address, accept string) mail.Message {
			t.Helper()
			r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": address, "type": "sign-in"}, "Accept-Language", accept)
			if r.Status != 200 {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			return e.Mailer.Last(mail.KindSignInCode, address)
		}
		code := send(email, "de-AT, en;q=0.5")
		if code.Subject != code.Code+" ist Ihr Code für "+testkit.SiteName || !strings.Contains(code.Text, "in 10 Minuten") ||
			!strings.Contains(code.HTML, `<html lang="de" dir="ltr">`) {
			t.Fatalf("a new address asking in German: %q\n%s", code.Subject, code.Text)
		}
		r := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": email, "otp": code.Code}, "Accept-Language", "de")
		if r.Status != 200 {
			t.Fatalf("sign-up: %d", r.Status)
		}
		var user models.User
		e.DB.Where("email = ?", email).Take(&user)
		if user.Locale != "de" {
			t.Fatalf("the account's language is %q, want de", user.Locale)
		}
		if w := e.Mailer.Last(mail.KindWelcome, email); w.Subject != "Willkommen bei "+testkit.SiteName {
			t.Fatalf("the welcome e-mail: %q", w.Subject)
		}

		// The account is German: an English request gets it a German code, in words that say
		// how long the code has left.
		e.Clock.Advance(time.Hour)
		if m := send(email, "en-US,en;q=0.9"); !strings.Contains(m.Subject, "ist Ihr Code") {
			t.Fatalf("the German account's code, asked for in English: %q", m.Subject)
		}
		e.Clock.Advance(6*time.Minute + 30*time.Second)
		if m := send(email, "en"); !strings.Contains(m.Text, "Er läuft in 4 Minuten ab.") {
			t.Fatalf("a resend of the live code does not say its time left in German: %s", m.Text)
		}
		// A new address asking in English gets English.
		if m := send("henry@example.com", "en"); !strings.HasSuffix(m.Subject, "is your "+testkit.SiteName+" code") {
			t.Fatalf("a new address in English: %q", m.Subject)
		}
		// The new-device notice of the German account is German, device name included.
		e.Clock.Advance(time.Hour)
		signInFrom(t, e, email, uaFirefoxWin, "203.0.113.9")
		notice := e.Mailer.Last(mail.KindNewDevice, email)
		if !strings.Contains(notice.Subject, "Firefox unter Windows") || !strings.Contains(notice.Text, "Uhr (UTC)") {
			t.Fatalf("the new-device notice: %q\n%s", notice.Subject, notice.Text)
		}

		// Switching to French on the pages while signed in makes the account French.
		s := e.SignIn(email)
		r = postForm(e, "/locale", url.Values{"locale": {"fr"}, "next": {"/account"}}, s.Cookies()...)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/account" {
			t.Fatalf("switch: %d", r.Status)
		}
		e.DB.Where("email = ?", email).Take(&user)
		if user.Locale != "fr" {
			t.Fatalf("after the switch the account's language is %q", user.Locale)
		}
		e.Clock.Advance(time.Hour)
		if m := send(email, "de"); !strings.HasPrefix(m.Subject, m.Code+" est votre code") {
			t.Fatalf("after the switch: %q", m.Subject)
		}
		// The account page in French, device names and dates included.
		page := e.Do(testkit.Request{Path: "/account", Cookies: append(s.Cookies(), &http.Cookie{Name: "auth.locale", Value: "fr"})})
		inLanguage(t, page.Body, lang(t, "fr"), "account.heading", "devices.heading", "devices.this_device")
		if !strings.Contains(string(page.Body), "Firefox sous Windows") || !strings.Contains(string(page.Body), "connecté le 1er mars 2026") {
			t.Fatalf("the devices card is not in French: %s", page.Body)
		}
	})
}

// The e-mails about an account's address and its deletion are in its language too.
func TestLocale_NoticesInTheAccountsLanguage(t *testing.T) {
	e := testkit.New(t, testkit.SQLite)
	code := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": "ines@example.com", "type": "sign-in"}, "Accept-Language", "es")
	if code.Status != 200 {
		t.Fatal(code.Status)
	}
	s := e.Post("/api/auth/sign-in/email-otp", map[string]any{"email": "ines@example.com", "otp": e.Mailer.LastCode("ines@example.com")}, "Accept-Language", "es")
	if s.Status != 200 {
		t.Fatal(s.Status)
	}
	bearer := []string{"Authorization", "Bearer " + s.Header.Get("set-auth-token")}
	if r := e.Post("/api/auth/change-email", map[string]any{"newEmail": "ines.new@example.com"}, bearer...); r.Status != 200 {
		t.Fatalf("change-email: %d %s", r.Status, r.Body)
	}
	link := e.Mailer.Last(mail.KindChangeEmailLink, "ines.new@example.com")
	if !strings.HasPrefix(link.Subject, "Confirme su nueva dirección") || !strings.Contains(link.Text, "en los próximos 15 minutos") {
		t.Fatalf("the change link: %q\n%s", link.Subject, link.Text)
	}
	if r := e.Post("/api/account/delete", map[string]any{}, bearer...); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	deleted := e.Mailer.Last(mail.KindAccountDeleted, "ines@example.com")
	if want := lang(t, "es").Date(e.Clock.Now().Add(30 * 24 * time.Hour)); !strings.Contains(deleted.Subject, "se eliminará el "+want) {
		t.Fatalf("the deletion notice: %q, want the day %q", deleted.Subject, want)
	}
}

// The admin pages stay English, whatever the admin's browser asks for, and show no switch.
func TestLocale_AdminPagesStayEnglish(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, withAdmin)
	admin := e.SignIn(adminEmail)
	r := e.Do(testkit.Request{Path: "/admin", Cookies: append(admin.Cookies(), &http.Cookie{Name: "auth.locale", Value: "de"})})
	if r.Status != 200 || !strings.Contains(string(r.Body), `<html lang="en"`) || !strings.Contains(string(r.Body), "Search by e-mail address") ||
		strings.Contains(string(r.Body), `action="/locale"`) {
		t.Fatalf("admin page: %d %.400s", r.Status, r.Body)
	}
	// A non-admin is refused in their own language.
	user := e.SignIn("pia@example.com")
	r = e.Do(testkit.Request{Path: "/admin", Cookies: user.Cookies(), Header: http.Header{"Accept-Language": {"de"}}})
	inLanguage(t, r.Body, lang(t, "de"), "error.admins_only")
}

// An operator's templates (EMAIL_TEMPLATES_DIR) are the ones the service sends: the one for a
// language wins over the one for every language, and the rest stay built in.
func TestLocale_OperatorTemplates(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"sign-in-code.subject":    "Code {{otp}} for {{site_name}}",
		"sign-in-code.de.subject": "Anmeldecode {{otp}}",
		"sign-in-code.html":       "<p>Your code: <b>{{otp}}</b></p>",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("EMAIL_TEMPLATES_DIR", dir))
	send := func(address, accept string) mail.Message {
		t.Helper()
		if r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": address, "type": "sign-in"}, "Accept-Language", accept); r.Status != 200 {
			t.Fatalf("send: %d", r.Status)
		}
		return e.Mailer.Last(mail.KindSignInCode, address)
	}
	if m := send("a@example.com", "de"); m.Subject != "Anmeldecode "+m.Code || !strings.Contains(m.HTML, "<b>"+m.Code+"</b>") ||
		!strings.Contains(m.Text, "Er läuft in 10 Minuten ab.") {
		t.Fatalf("German: %q\n%s\n%s", m.Subject, m.HTML, m.Text)
	}
	if m := send("b@example.com", "fr"); m.Subject != "Code "+m.Code+" for "+testkit.SiteName {
		t.Fatalf("French: %q", m.Subject)
	}
}
