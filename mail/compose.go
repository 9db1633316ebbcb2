package mail

import (
	"fmt"
	"html"
	"strconv"
	"time"

	"codeauth/i18n"
)

// Composer turns the service's events into e-mail drafts, and renders drafts from the templates
// with the site's name and address. Every inserted value is escaped for where it goes:
// HTML-escaped in the HTML part, stripped of control characters in the subject and the text part.
//
// A draft is written in one language (In): its dates, durations and device names are written for
// it when it is made, and its templates are that language's when it is rendered.
type Composer struct {
	// SiteName and SiteURL name the service (SITE_NAME, AUTH_URL).
	SiteName string
	SiteURL  string
	// Templates are the templates, with EMAIL_TEMPLATES_DIR's replacements; nil means the
	// embedded ones.
	Templates *Templates
	// DefaultLocale is the language of e-mails whose language is unknown or not spoken here
	// (AUTH_DEFAULT_LOCALE); "" means English.
	DefaultLocale string
	// locale is the language In chose; nil means DefaultLocale's.
	locale *i18n.Locale
}

// In is the Composer writing in the language of code (a locale code, as an account stores it),
// or in the default language when code is "" or a language the service does not speak.
func (c Composer) In(code string) Composer {
	l, ok := i18n.Lookup(code)
	if !ok {
		l = c.fallback()
	}
	c.locale = l
	return c
}

// fallback is the default language.
func (c Composer) fallback() *i18n.Locale {
	if l, ok := i18n.Lookup(c.DefaultLocale); ok {
		return l
	}
	return i18n.English()
}

// lang is the language of c's drafts.
func (c Composer) lang() *i18n.Locale {
	if c.locale != nil {
		return c.locale
	}
	return c.fallback()
}

func (c Composer) templates() *Templates {
	if c.Templates != nil {
		return c.Templates
	}
	return embedded
}

// Draft is an e-mail before it is rendered: its kind, which names its template, its language,
// its recipient, the values of the template's placeholders, and the secret it carries (Code or
// Link, as in Message). The outbox stores drafts and renders them when it delivers: a draft is a
// small fraction of the rendered e-mail's size.
type Draft struct {
	Kind Kind
	// Locale is the language's code; "" (a draft queued before drafts had one) is the default.
	Locale string `json:",omitempty"`
	To     string
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

// draft makes the Draft of kind, checking that vars holds every value of the kind, so the
// templates and the code that fills them cannot drift apart unnoticed.
func (c Composer) draft(kind Kind, to string, vars map[string]string) (Draft, error) {
	spec, ok := kinds[kind]
	if !ok {
		return Draft{}, fmt.Errorf("mail: no template for %s", kind)
	}
	for _, name := range spec.vars {
		if _, given := vars[name]; !given {
			return Draft{}, fmt.Errorf("mail: %s needs {{%s}}", kind, name)
		}
	}
	return Draft{Kind: kind, Locale: c.lang().Code(), To: to, Vars: vars}, nil
}

// Render fills the template of d's kind, in d's language, with its values and the site's.
func (c Composer) Render(d Draft) (Message, error) {
	byLocale, ok := c.templates().byKind[d.Kind]
	if !ok {
		return Message{}, fmt.Errorf("mail: no template for %s", d.Kind)
	}
	l := c.In(d.Locale).lang()
	t := byLocale[l.Code()]
	all := c.siteVars()
	for k, v := range d.Vars {
		all[k] = v
	}
	all["lang"], all["dir"] = l.Code(), l.Dir()
	content := t.html.fill(all, html.EscapeString, "")
	page := c.templates().layouts[l.Code()].fill(all, html.EscapeString, content)
	return Message{Kind: d.Kind, To: d.To, Subject: t.subject.fill(all, plain, ""), Text: t.text.fill(all, plain, ""),
		HTML: page, Code: d.Code, Link: d.Link}, nil
}

// SignInCode is the e-mail carrying a sign-in code, which expires after lifetime; the code is in
// the subject line too.
func (c Composer) SignInCode(to, code string, lifetime time.Duration) (Draft, error) {
	d, err := c.draft(KindSignInCode, to, map[string]string{"otp": code, "expiresIn": c.lang().InMinutes(lifetime)})
	d.Code = code
	return d, err
}

// SignInCodeWithLink carries a sign-in code, which expires after lifetime, and link, the page that
// signs in with it (AUTH_SIGNIN_LINK).
func (c Composer) SignInCodeWithLink(to, code, link string, lifetime time.Duration) (Draft, error) {
	d, err := c.draft(KindSignInCodeLink, to, map[string]string{"otp": code, "expiresIn": c.lang().InMinutes(lifetime), "signInUrl": link})
	d.Code, d.Link = code, link
	return d, err
}

// ChangeEmailCode carries the code that confirms a new address from the app, which expires
// after lifetime.
func (c Composer) ChangeEmailCode(to, code string, lifetime time.Duration) (Draft, error) {
	d, err := c.draft(KindChangeEmailCode, to, map[string]string{"otp": code, "expiresIn": c.lang().InMinutes(lifetime)})
	d.Code = code
	return d, err
}

// ChangeEmailLink carries the link that confirms a new address on the web, which works for
// lifetime.
func (c Composer) ChangeEmailLink(to, oldEmail, link string, lifetime time.Duration) (Draft, error) {
	d, err := c.draft(KindChangeEmailLink, to, map[string]string{"verificationUrl": link, "oldEmail": oldEmail,
		"within": c.lang().WithinMinutes(lifetime)})
	d.Link = link
	return d, err
}

// EmailChanged tells the old address that the account moved, with the link that restores it for
// lifetime.
func (c Composer) EmailChanged(to, newEmail, restoreLink string, lifetime time.Duration) (Draft, error) {
	d, err := c.draft(KindEmailChanged, to, map[string]string{"newEmail": newEmail, "restoreUrl": restoreLink,
		"within": c.lang().WithinDays(lifetime)})
	d.Link = restoreLink
	return d, err
}

// Welcome greets a new account.
func (c Composer) Welcome(to string) (Draft, error) {
	return c.draft(KindWelcome, to, map[string]string{})
}

// AccountDeleted says when a deleted account's data goes, and how to keep it.
func (c Composer) AccountDeleted(to string, deleteAt time.Time) (Draft, error) {
	return c.draft(KindAccountDeleted, to, map[string]string{"deleteDate": c.lang().Date(deleteAt), "signInUrl": c.SiteURL + "/auth/sign-in"})
}

// NewDevice tells an account that a device (its browser or app, and its platform: "Chrome" and
// "macOS") signed in at when from the network address ip, one the account had not used for
// window, with a link to the account page's devices card.
func (c Composer) NewDevice(to, browser, platform, ip string, when time.Time, window time.Duration) (Draft, error) {
	l := c.lang()
	if ip == "" {
		ip = l.T("device.unknown_address")
	}
	return c.draft(KindNewDevice, to, map[string]string{
		"device": l.DeviceName(browser, platform), "ip": ip, "when": l.DateTime(when),
		"devicesUrl": c.SiteURL + DevicesPath, "unseenFor": l.InLastDays(window),
	})
}

// SignInPaused tells an address that failures wrong codes entered for it paused signing in with
// it until until (catalogue #20: the person is told of the lock).
func (c Composer) SignInPaused(to string, failures int, until time.Time) (Draft, error) {
	return c.draft(KindSignInPaused, to, map[string]string{
		"failures": strconv.Itoa(failures), "until": c.lang().DateTime(until), "signInUrl": c.SiteURL + "/auth/sign-in",
	})
}

// DevicesPath is the account page's devices card, where a device is signed out.
const DevicesPath = "/account#devices"

// FormerAddressDeleted tells an old address, whose restore link still works until restoreUntil,
// that the account it used to sign in (now at currentEmail) was deleted.
func (c Composer) FormerAddressDeleted(to, currentEmail string, deleteAt, restoreUntil time.Time) (Draft, error) {
	l := c.lang()
	return c.draft(KindFormerAddressDeleted, to, map[string]string{
		"currentEmail": currentEmail, "deleteDate": l.Date(deleteAt), "restoreUntil": l.Date(restoreUntil),
	})
}
