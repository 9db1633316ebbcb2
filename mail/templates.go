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

// template is one kind of e-mail: a subject line, an HTML body and its plain-text alternative.
type template struct {
	subject, html, text string
}

func loadTemplates() map[Kind]template {
	out := map[Kind]template{}
	for _, k := range []Kind{KindSignInCode, KindChangeEmailCode, KindChangeEmailLink, KindEmailChanged, KindWelcome, KindAccountDeleted, KindFormerAddressDeleted} {
		read := func(ext string) string {
			b, err := templateFiles.ReadFile("templates/" + string(k) + "." + ext)
			if err != nil {
				panic(err)
			}
			return string(b)
		}
		out[k] = template{subject: strings.TrimSpace(read("subject")), html: read("html"), text: read("txt")}
	}
	return out
}

var templates = loadTemplates()

// contentMark stands for the layout's {{content}}, the one placeholder filled with HTML, so the
// escaping of the other values leaves the rendered template alone.
const contentMark = "\x00content\x00"

var layout = func() string {
	b, err := templateFiles.ReadFile("templates/layout.html")
	if err != nil {
		panic(err)
	}
	return strings.Replace(string(b), "{{content}}", contentMark, 1)
}()

// fill replaces every {{name}} in s with vars[name], passed through escape. A placeholder with no
// value is an error, so a template and its caller cannot drift apart unnoticed.
func fill(s string, vars map[string]string, escape func(string) string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-2]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return escape(v)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("mail: template needs %s", strings.Join(missing, ", "))
	}
	return out, nil
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

// Composer turns the service's events into e-mails, from the templates, with the site's name and
// address. Every inserted value is escaped for where it goes: HTML-escaped in the HTML part,
// stripped of control characters in the subject and the text part.
type Composer struct {
	// SiteName and SiteURL name the service (SITE_NAME, AUTH_URL).
	SiteName string
	SiteURL  string
}

func (c Composer) compose(kind Kind, to string, vars map[string]string) (Message, error) {
	t, ok := templates[kind]
	if !ok {
		return Message{}, fmt.Errorf("mail: no template for %s", kind)
	}
	all := map[string]string{"site_name": c.SiteName, "site_url": c.SiteURL, "logo_url": c.SiteURL + "/static/logo.svg"}
	for k, v := range vars {
		all[k] = v
	}
	subject, err := fill(t.subject, all, plain)
	if err != nil {
		return Message{}, err
	}
	text, err := fill(t.text, all, plain)
	if err != nil {
		return Message{}, err
	}
	content, err := fill(t.html, all, html.EscapeString)
	if err != nil {
		return Message{}, err
	}
	page, err := fill(layout, all, html.EscapeString)
	if err != nil {
		return Message{}, err
	}
	page = strings.Replace(page, contentMark, content, 1)
	return Message{Kind: kind, To: to, Subject: subject, Text: text, HTML: page}, nil
}

// SignInCode is the e-mail carrying a sign-in code; the code is in the subject line too.
func (c Composer) SignInCode(to, code string) (Message, error) {
	m, err := c.compose(KindSignInCode, to, map[string]string{"otp": code})
	m.Code = code
	return m, err
}

// ChangeEmailCode carries the code that confirms a new address from the app.
func (c Composer) ChangeEmailCode(to, code string) (Message, error) {
	m, err := c.compose(KindChangeEmailCode, to, map[string]string{"otp": code})
	m.Code = code
	return m, err
}

// ChangeEmailLink carries the link that confirms a new address on the web.
func (c Composer) ChangeEmailLink(to, oldEmail, link string) (Message, error) {
	m, err := c.compose(KindChangeEmailLink, to, map[string]string{"verificationUrl": link, "oldEmail": oldEmail})
	m.Link = link
	return m, err
}

// EmailChanged tells the old address that the account moved, with the link that restores it.
func (c Composer) EmailChanged(to, newEmail, restoreLink string) (Message, error) {
	m, err := c.compose(KindEmailChanged, to, map[string]string{"newEmail": newEmail, "restoreUrl": restoreLink})
	m.Link = restoreLink
	return m, err
}

// Welcome greets a new account.
func (c Composer) Welcome(to string) (Message, error) {
	return c.compose(KindWelcome, to, nil)
}

// AccountDeleted says when a deleted account's data goes, and how to keep it.
func (c Composer) AccountDeleted(to string, deleteAt time.Time) (Message, error) {
	return c.compose(KindAccountDeleted, to, map[string]string{"deleteDate": DateText(deleteAt), "signInUrl": c.SiteURL + "/auth/sign-in"})
}

// DateText writes a day for people, in e-mails and on the pages: 21 December 2026 (UTC).
func DateText(t time.Time) string { return t.UTC().Format("2 January 2006") }

// FormerAddressDeleted tells an old address, whose restore link still works until restoreUntil,
// that the account it used to sign in (now at currentEmail) was deleted.
func (c Composer) FormerAddressDeleted(to, currentEmail string, deleteAt, restoreUntil time.Time) (Message, error) {
	return c.compose(KindFormerAddressDeleted, to, map[string]string{
		"currentEmail": currentEmail, "deleteDate": DateText(deleteAt), "restoreUntil": DateText(restoreUntil),
	})
}
