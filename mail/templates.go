package mail

import (
	"embed"
	"fmt"
	"html"
	"regexp"
	"strings"
	"time"
)

//go:embed templates/*
var templateFiles embed.FS

// placeholder is the {{name}} syntax of the templates (the spec's {{otp}}, {{site_name}},
// {{verificationUrl}}).
var placeholder = regexp.MustCompile(`\{\{([A-Za-z_]+)\}\}`)

// template is one kind of e-mail: a subject line, an HTML body and its plain-text alternative,
// and the names of the placeholders they and the layout use.
type template struct {
	subject, html, text text
	needs               []string
}

// text is a template's text split at its placeholders, once, when the templates load: rendering
// is then one pass that copies literals and writes values into a buffer of the right size.
type text struct {
	parts []part
	size  int // the literals' length
}

// part is a literal (name "") or a placeholder.
type part struct{ lit, name string }

func parse(s string) text {
	var t text
	at := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > at {
			t.parts = append(t.parts, part{lit: s[at:m[0]]})
		}
		t.parts = append(t.parts, part{name: s[m[2]:m[3]]})
		at = m[1]
	}
	if at < len(s) {
		t.parts = append(t.parts, part{lit: s[at:]})
	}
	for _, p := range t.parts {
		t.size += len(p.lit)
	}
	return t
}

// contentSlot is the layout's {{content}}, the one placeholder filled with HTML: the rendered
// body, which the escaping of the values leaves alone.
const contentSlot = "content"

func loadTemplates() map[Kind]template {
	out := map[Kind]template{}
	for _, k := range []Kind{KindSignInCode, KindChangeEmailCode, KindChangeEmailLink, KindEmailChanged, KindWelcome, KindAccountDeleted, KindFormerAddressDeleted, KindNewDevice} {
		read := func(ext string) string {
			b, err := templateFiles.ReadFile("templates/" + string(k) + "." + ext)
			if err != nil {
				panic(err)
			}
			return string(b)
		}
		t := template{subject: parse(strings.TrimSpace(read("subject"))), html: parse(read("html")), text: parse(read("txt"))}
		seen := map[string]bool{contentSlot: true}
		for _, x := range []text{t.subject, t.html, t.text, layout} {
			for _, p := range x.parts {
				if p.name != "" && !seen[p.name] {
					seen[p.name] = true
					t.needs = append(t.needs, p.name)
				}
			}
		}
		out[k] = t
	}
	return out
}

var templates = loadTemplates()

var layout = func() text {
	b, err := templateFiles.ReadFile("templates/layout.html")
	if err != nil {
		panic(err)
	}
	return parse(string(b))
}()

// fill writes t with every {{name}} replaced by vars[name], passed through escape, and the
// layout's content slot by body. A placeholder with no value is an error, so a template and its
// caller cannot drift apart unnoticed.
func (t text) fill(vars map[string]string, escape func(string) string, body string) (string, error) {
	var b strings.Builder
	b.Grow(t.size + len(body) + 256)
	var missing []string
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.lit)
			continue
		}
		if p.name == contentSlot && body != "" {
			b.WriteString(body)
			continue
		}
		v, ok := vars[p.name]
		if !ok {
			missing = append(missing, p.name)
			continue
		}
		b.WriteString(escape(v))
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("mail: template needs %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

// plain makes a value safe for a subject line or a text body: control characters (a CR LF
// would start a new header) are removed.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// Composer turns the service's events into e-mail drafts, and renders drafts from the templates
// with the site's name and address. Every inserted value is escaped for where it goes:
// HTML-escaped in the HTML part, stripped of control characters in the subject and the text part.
type Composer struct {
	// SiteName and SiteURL name the service (SITE_NAME, AUTH_URL).
	SiteName string
	SiteURL  string
}

// Draft is an e-mail before it is rendered: its kind, which names its template, its recipient,
// the values of the template's placeholders, and the secret it carries (Code or Link, as in
// Message). The outbox stores drafts and renders them when it delivers: a draft is a small
// fraction of the rendered e-mail's size.
type Draft struct {
	Kind Kind
	To   string
	// Vars holds the template's values but the site's own (site_name, site_url, logo_url), which
	// rendering adds from the Composer.
	Vars map[string]string
	Code string
	Link string
}

// siteVars are the values every template may use, from the Composer.
func (c Composer) siteVars() map[string]string {
	return map[string]string{"site_name": c.SiteName, "site_url": c.SiteURL, "logo_url": c.SiteURL + "/static/logo.svg"}
}

// draft makes the Draft of kind, checking that vars and the site's values fill every placeholder
// its template uses, so a template and its caller cannot drift apart unnoticed.
func (c Composer) draft(kind Kind, to string, vars map[string]string) (Draft, error) {
	t, ok := templates[kind]
	if !ok {
		return Draft{}, fmt.Errorf("mail: no template for %s", kind)
	}
	site := c.siteVars()
	var missing []string
	for _, name := range t.needs {
		_, given := vars[name]
		if _, fromSite := site[name]; !given && !fromSite {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return Draft{}, fmt.Errorf("mail: template needs %s", strings.Join(missing, ", "))
	}
	return Draft{Kind: kind, To: to, Vars: vars}, nil
}

// Render fills the template of d's kind with its values and the site's.
func (c Composer) Render(d Draft) (Message, error) {
	t, ok := templates[d.Kind]
	if !ok {
		return Message{}, fmt.Errorf("mail: no template for %s", d.Kind)
	}
	all := c.siteVars()
	for k, v := range d.Vars {
		all[k] = v
	}
	subject, err := t.subject.fill(all, plain, "")
	if err != nil {
		return Message{}, err
	}
	text, err := t.text.fill(all, plain, "")
	if err != nil {
		return Message{}, err
	}
	content, err := t.html.fill(all, html.EscapeString, "")
	if err != nil {
		return Message{}, err
	}
	page, err := layout.fill(all, html.EscapeString, content)
	if err != nil {
		return Message{}, err
	}
	return Message{Kind: d.Kind, To: d.To, Subject: subject, Text: text, HTML: page, Code: d.Code, Link: d.Link}, nil
}

// SignInCode is the e-mail carrying a sign-in code; the code is in the subject line too.
func (c Composer) SignInCode(to, code string) (Draft, error) {
	d, err := c.draft(KindSignInCode, to, map[string]string{"otp": code})
	d.Code = code
	return d, err
}

// ChangeEmailCode carries the code that confirms a new address from the app.
func (c Composer) ChangeEmailCode(to, code string) (Draft, error) {
	d, err := c.draft(KindChangeEmailCode, to, map[string]string{"otp": code})
	d.Code = code
	return d, err
}

// ChangeEmailLink carries the link that confirms a new address on the web.
func (c Composer) ChangeEmailLink(to, oldEmail, link string) (Draft, error) {
	d, err := c.draft(KindChangeEmailLink, to, map[string]string{"verificationUrl": link, "oldEmail": oldEmail})
	d.Link = link
	return d, err
}

// EmailChanged tells the old address that the account moved, with the link that restores it.
func (c Composer) EmailChanged(to, newEmail, restoreLink string) (Draft, error) {
	d, err := c.draft(KindEmailChanged, to, map[string]string{"newEmail": newEmail, "restoreUrl": restoreLink})
	d.Link = restoreLink
	return d, err
}

// Welcome greets a new account.
func (c Composer) Welcome(to string) (Draft, error) {
	return c.draft(KindWelcome, to, nil)
}

// AccountDeleted says when a deleted account's data goes, and how to keep it.
func (c Composer) AccountDeleted(to string, deleteAt time.Time) (Draft, error) {
	return c.draft(KindAccountDeleted, to, map[string]string{"deleteDate": DateText(deleteAt), "signInUrl": c.SiteURL + "/auth/sign-in"})
}

// NewDevice tells an account that device (its name as people read it, "Chrome on macOS") signed
// in at when from the network address ip, with a link to the account page's devices card.
func (c Composer) NewDevice(to, device, ip string, when time.Time) (Draft, error) {
	if ip == "" {
		ip = "unknown"
	}
	return c.draft(KindNewDevice, to, map[string]string{
		"device": device, "ip": ip, "when": when.UTC().Format("2 January 2006, 15:04 MST"),
		"devicesUrl": c.SiteURL + DevicesPath,
	})
}

// DevicesPath is the account page's devices card, where a device is signed out.
const DevicesPath = "/account#devices"

// DateText writes a day for people, in e-mails and on the pages: 21 December 2026 (UTC).
func DateText(t time.Time) string { return t.UTC().Format("2 January 2006") }

// FormerAddressDeleted tells an old address, whose restore link still works until restoreUntil,
// that the account it used to sign in (now at currentEmail) was deleted.
func (c Composer) FormerAddressDeleted(to, currentEmail string, deleteAt, restoreUntil time.Time) (Draft, error) {
	return c.draft(KindFormerAddressDeleted, to, map[string]string{
		"currentEmail": currentEmail, "deleteDate": DateText(deleteAt), "restoreUntil": DateText(restoreUntil),
	})
}
