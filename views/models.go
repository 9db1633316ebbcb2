// Package views holds the templ components of the pages: the layouts, the code-entry component
// shared by sign-in, sign-up and checkout, and one component per page, each fed a view model.
package views

import (
	"html"
	"net/url"
	"strconv"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/i18n"

	"github.com/a-h/templ"
)

// Page is what every layout needs. The page's language is its context's (i18n.FromContext).
type Page struct {
	Title    string
	SiteName string
	// User is the signed-in person, or nil.
	User *User
	// Here is where the language switch brings the person back to: this page's path and query
	// (for a page that answered a form, the page the form was on), or "" for the front page.
	Here string
	// NoLocaleSwitch leaves the language switch out: the admin pages are in English only.
	NoLocaleSwitch bool
	// Focused is a page of one task (sign-in, sign-up, an e-mail link's page): no header, the
	// logo above its card. The page's component sets it.
	Focused bool
	// PrivacyURL and TermsURL are the operator's policies (SITE_PRIVACY_URL, SITE_TERMS_URL),
	// linked from the footer when set.
	PrivacyURL, TermsURL string
}

// tryAgainURL is where an error page's "Try again" goes: the page that failed, or for a form the
// page it was sent from (p.Here, a path of this site), or the front page.
func tryAgainURL(p Page) string {
	if p.Here == "" {
		return "/"
	}
	return p.Here
}

// focused is p as a focused page.
func focused(p Page) Page {
	p.Focused = true
	return p
}

// User is the signed-in person as pages show them.
type User struct {
	Email string
	Name  string
	// Admin shows the way to the admin pages.
	Admin bool
}

// Mode is what the code-entry component is used for; the verify endpoint is the same for all.
type Mode string

// The uses of the code-entry component.
const (
	ModeSignIn   Mode = "sign-in"
	ModeSignUp   Mode = "sign-up"
	ModeCheckout Mode = "checkout"
)

// ParseMode reads a mode sent back by a form, defaulting to sign-in.
func ParseMode(s string) Mode {
	switch Mode(s) {
	case ModeSignUp, ModeCheckout:
		return Mode(s)
	}
	return ModeSignIn
}

// Step is where the code-entry component is.
type Step int

// The steps of the code-entry component.
const (
	StepEmail Step = iota
	StepCode
	StepVerified
)

// Entry is the state of the code-entry component.
type Entry struct {
	Mode     Mode
	Step     Step
	Email    string
	Redirect string
	Purchase string
	Error    string
	// Cooldown is how many seconds the resend button stays disabled; ResendAfter is when that
	// ends (Unix seconds), carried by the verify form so a wrong code's answer keeps counting down
	// rather than offering a resend at once.
	Cooldown    int
	ResendAfter int64
	// Swap means the component answers an htmx request, so the page's script runs: the resend
	// button is rendered disabled while it cools down, rather than enabled until the script
	// disables it. A whole page (no script, perhaps) renders it enabled.
	Swap bool
	// Reauth means a signed-in person is asked to sign in again before a sensitive change.
	Reauth bool
	// SignUpNote says who may create an account here when sign-up is gated (AUTH_DISABLE_SIGNUP,
	// AUTH_ALLOWED_EMAIL_DOMAINS); empty when anyone may. With it, the code step does not claim
	// that a code was sent, since it was not for an address that could never use it.
	SignUpNote string
	// Resent means the code step follows a resend: it says the code went out again. It does not
	// say whether it is the same code (a resend while the code lives sends it again) or a new
	// one, which would tell anyone whether someone asked for a code lately; the newest e-mail
	// always carries the code that works.
	Resent bool
}

// ResendCooldown is the wait, in seconds, before the page offers to send another code. It is
// the client's side only: the server's limits are in auth.
const ResendCooldown = 30

// OTPLength is the code length for the input's maxlength and the script (auth.OTPLength).
func OTPLength() string { return strconv.Itoa(auth.OTPLength) }

// OTPAlphabet is the characters a code may contain, for the script (auth.OTPAlphabet).
func OTPAlphabet() string { return auth.OTPAlphabet }

// OTPInputMode is the input's inputmode, "numeric" for digit codes.
func OTPInputMode() string { return auth.OTPInputMode() }

// OTPPattern is the input's pattern attribute: exactly OTPLength characters of OTPAlphabet, with
// spaces anywhere around and between them (" 709 775 " pasted from an e-mail; the page's verify
// takes them out). Browsers compile patterns in the regular expression v mode, where punctuation
// in a class is escaped.
func OTPPattern() string {
	var class strings.Builder
	if auth.OTPAlphabet == "0123456789" {
		class.WriteString("0-9")
	} else {
		for _, r := range auth.OTPAlphabet {
			if strings.ContainsRune(`()[]{}/\|-&!#%,:;<=>@`+"`"+`~^$.*+?`, r) {
				class.WriteByte('\\')
			}
			class.WriteRune(r)
		}
	}
	return `\s*(?:[` + class.String() + `]\s*){` + strconv.Itoa(auth.OTPLength) + "}"
}

// OTPMaxLength is the input's maxlength: room for the code with a space between each of its
// characters and around it, so a pasted code with spaces is never cut.
func OTPMaxLength() string { return strconv.Itoa(2*auth.OTPLength + 1) }

// Account is the account page.
type Account struct {
	Email          string
	Name           string
	MarketingOptIn bool
	// NameError and NameSaved report the last name change.
	NameError string
	NameSaved bool
	// ChangeSentTo is the address a confirmation link just went to; ChangeError explains a
	// refused change, and ChangeTyped is the address it was asked for, shown again to correct.
	ChangeSentTo string
	ChangeError  string
	ChangeTyped  string
	// DeleteError explains a refused deletion.
	DeleteError string
	// ReauthURL, when set, means the session is too old to change the address or delete the
	// account: instead of those forms the page offers to sign in again there.
	ReauthURL string
	// Devices is the "Your devices" card.
	Devices Devices
}

// Devices is the account page's "Your devices" card: every signed-in session of the account,
// this browser's first.
type Devices struct {
	List []Device
	// Status says what was just done ("Signed out Firefox on Windows."); Error why it was not.
	Status string
	Error  string
}

// Device is one signed-in session on the devices card.
type Device struct {
	// ID is the session's handle, which the sign-out form sends back.
	ID string
	// Name is the device as people read it, "Chrome on macOS".
	Name string
	// Kind is "phone", "tablet", "tv" or "" (a computer or unknown), for its icon.
	Kind      string
	IPAddress string
	// Active says when it was last seen ("Active now", "Active 3 hours ago", ActiveText);
	// ActiveAt is that time, for the <time> element.
	Active   string
	ActiveAt time.Time
	// SignedIn is the day the session began, "24 November 2026".
	SignedIn string
	// Current is this browser's session.
	Current bool
}

// ActiveText says in l's words when a device was last active, idle ago (at): "Active a moment
// ago", "Active 3 minutes ago", "Active 1 hour ago", "Active 5 days ago", and the day beyond 30
// days.
func ActiveText(l *i18n.Locale, idle time.Duration, at time.Time) string {
	switch {
	case idle < time.Minute:
		return l.T("devices.active_moment")
	case idle < time.Hour:
		return l.Tn("devices.active_minutes", int(idle/time.Minute), nil)
	case idle < 24*time.Hour:
		return l.Tn("devices.active_hours", int(idle/time.Hour), nil)
	case idle < 31*24*time.Hour:
		return l.Tn("devices.active_days", int(idle/(24*time.Hour)), nil)
	}
	return l.Tf("devices.active_on", map[string]any{"Date": l.Date(at)})
}

// DeviceID is the id of a device's row, which its sign-out button names as what it acts on.
func DeviceID(d Device) string { return "device-" + d.ID }

// EmailLink is the landing page of an e-mail link (confirming a new address, or restoring an old
// one): what it will do, the button that does it, and the result.
type EmailLink struct {
	Token       string
	CallbackURL string
	// From and To are the addresses before and after.
	From, To string
	Error    string
	// Dead means Error is that the link itself no longer works (used, replaced or expired): the
	// page is headed so, rather than with the action the link was for.
	Dead bool
	Done bool
	// Deleted means the account is in its deletion grace period (restore links only).
	Deleted bool
}

// SignInLink is the page of the code e-mail's sign-in link: the address it signs in, whether it
// was opened in the browser that asked for the code, and if not the device, network and time of
// the asking (in the page's language); or the Error that it cannot sign in.
type SignInLink struct {
	Token, Email   string
	SameBrowser    bool
	Device, IP     string
	AskedAt, Error string
	// Dead is EmailLink's.
	Dead bool
}

// Checkout is the checkout success page: the purchase and the code-entry component that claims it.
type Checkout struct {
	Found       bool
	PurchaseID  string
	Product     string
	PurchasedAt time.Time
	// Claimed reports that the purchase belongs to the signed-in person.
	Claimed bool
	// ClaimError explains a claim that was refused.
	ClaimError string
	// Announce means the claim's result is swapped into the page (htmx): it takes the focus, so
	// the keyboard and the screen reader are where the news is.
	Announce bool
	Entry    Entry
}

func itoa(n int) string { return strconv.Itoa(n) }

// addressParts splits an e-mail address where a line may break: before the "@" and after each
// dot of the domain ("ada", "@example.", "com").
func addressParts(email string) []string {
	local, domain, ok := strings.Cut(email, "@")
	if !ok {
		return []string{email}
	}
	parts := []string{local}
	labels := strings.SplitAfter(domain, ".")
	labels[0] = "@" + labels[0]
	return append(parts, labels...)
}

// breakableAddress writes an e-mail address, escaped, that may break before its "@" and after
// the dots of its domain (<wbr>), so a long one wraps at its joints rather than mid-word.
func breakableAddress(email string) templ.Component { return breakable(addressParts(email)) }

// breakableIP writes an IP address, escaped, that may break after the colons of an IPv6 one
// (<wbr>), so that on a phone it wraps between its groups rather than inside one.
func breakableIP(ip string) templ.Component { return breakable(strings.SplitAfter(ip, ":")) }

// breakable writes parts, each escaped, with a place the line may break (<wbr>) between them.
func breakable(parts []string) templ.Component {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		escaped[i] = html.EscapeString(p)
	}
	return templ.Raw(strings.Join(escaped, "<wbr>"))
}

// invalid marks a field whose value was refused (aria-invalid="true", which the stylesheet
// shows as a red border), or nothing.
func invalid(refused bool) templ.Attributes {
	if refused {
		return templ.Attributes{"aria-invalid": "true"}
	}
	return nil
}

// testID marks an element with data-testid when id is not "".
func testID(id string) templ.Attributes {
	if id != "" {
		return templ.Attributes{"data-testid": id}
	}
	return nil
}

// refusedBy marks a field that a message (the element id) refused: invalid, and described by
// the message; nothing when it was not refused.
func refusedBy(id string, refused bool) templ.Attributes {
	if refused {
		return templ.Attributes{"aria-invalid": "true", "aria-describedby": id}
	}
	return nil
}

// changeDescribedBy is the new-address field's description: its hint, and the refusal or the
// notice of a sent link when the page shows one.
func changeDescribedBy(a Account) string {
	switch {
	case a.ChangeError != "":
		return "new-email-error change-hint"
	case a.ChangeSentTo != "":
		return "change-status change-hint"
	}
	return "change-hint"
}

// boolString is "true" or "false", for ARIA states.
func boolString(b bool) string { return strconv.FormatBool(b) }

// restartURL goes back to step one of the component, keeping its context.
func restartURL(e Entry) string {
	q := url.Values{}
	if e.Redirect != "" {
		q.Set("redirect", e.Redirect)
	}
	base := "/auth/sign-in"
	switch e.Mode {
	case ModeSignUp:
		base = "/auth/sign-up"
	case ModeCheckout:
		base = "/checkout/success"
		q.Set("purchase", e.Purchase)
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

// continueURL is where a signed-in person goes next: the checked redirect target, or home.
func continueURL(e Entry) string {
	if e.Redirect != "" {
		return e.Redirect
	}
	return "/"
}

// otherModeURL links sign-in and sign-up to each other, keeping the redirect target.
func otherModeURL(e Entry) string {
	other := Entry{Mode: ModeSignUp, Redirect: e.Redirect}
	if e.Mode == ModeSignUp {
		other.Mode = ModeSignIn
	}
	return restartURL(other)
}

// stepHead names the messages of a step's heading and of the line under it ("" for none).
type stepHead struct{ heading, lead string }

// emailStep is the head of the code-entry component's first step for e's use: none in the
// checkout, whose page has its own.
func emailStep(e Entry) stepHead {
	switch {
	case e.Mode == ModeCheckout:
		return stepHead{}
	case e.Reauth:
		return stepHead{"signin.reauth_heading", "signin.reauth_lead"}
	case e.Mode == ModeSignUp:
		return stepHead{"signin.sign_up_heading", "signin.sign_up_lead"}
	}
	return stepHead{"signin.heading", "signin.lead"}
}

// current reports whether the page is path (the header marks it aria-current rather than
// linking to it).
func current(p Page, path string) bool {
	here, _, _ := strings.Cut(p.Here, "?")
	if here == "" {
		here = "/"
	}
	return here == path
}

// codeSentMessage is the code step's sentence for e: that the code was sent (or, when sign-up
// is gated, was sent if the address may sign in here), with its length in digits or in
// characters.
func codeSentMessage(e Entry) string {
	digits := auth.OTPInputMode() == "numeric"
	switch {
	case e.SignUpNote != "" && digits:
		return "entry.gated_sent_digits"
	case e.SignUpNote != "":
		return "entry.gated_sent_chars"
	case digits:
		return "entry.code_sent_digits"
	}
	return "entry.code_sent_chars"
}

// lifetimeMinutes is how long a code works, in minutes.
func lifetimeMinutes() int { return i18n.Minutes(auth.OTPLifetime) }

// AdminUsers is the admin page's list of accounts.
type AdminUsers struct {
	Query string
	Users []AdminUserRow
	// Total is how many accounts match; Page is the page shown (from 1), Pages how many.
	Total       int64
	Page, Pages int
}

// AdminUserRow is one account in the admin's list.
type AdminUserRow struct {
	ID, Email, Name, Role, Created string
	Banned                         bool
}

// AdminUser is the admin page of one account.
type AdminUser struct {
	Row AdminUserRow
	// BanReason and BanUntil describe a ban in force ("" for good).
	BanReason, BanUntil string
	Sessions            []Device
	Audit               []AdminAuditRow
	// Status says what was just done; Error why it was not.
	Status, Error string
	// Self is the admin's own account: it cannot be banned or removed from here.
	Self bool
	// Ban is the ban form as the admin left it, when a ban was refused.
	Ban AdminBanForm
}

// AdminBanForm is the ban form of an account's admin page: the reason typed and the length
// chosen, kept when the ban was refused so that nothing typed is lost, and why the reason was
// refused ("" when it was not).
type AdminBanForm struct {
	Reason, For, ReasonError string
}

// BanLengths are the ban form's choices: a length ParseBanLength reads, and its words.
var BanLengths = []struct{ Value, Text string }{
	{"24h", "A day"}, {"168h", "A week"}, {"720h", "30 days"}, {"0", "Until lifted"},
}

// AdminAuditRow is one audit event on an account's admin page: when (UTC), the action as stored
// and in words, who did it when not the account ("by an admin"), its detail in words, and the
// address the request came from.
type AdminAuditRow struct {
	At, Action, Words, Actor, Detail, IPAddress string
}

// countText writes n things in words: "1 account", "3 accounts".
func countText(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.FormatInt(n, 10) + " " + thing + "s"
}

// AdminPageURL is the admin page of an account.
func AdminPageURL(id string) string { return "/admin/users/" + url.PathEscape(id) }

// AdminListURL is a page of the admin's list for query.
func AdminListURL(query string, page int) string {
	v := url.Values{}
	if query != "" {
		v.Set("q", query)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return "/admin"
	}
	return "/admin?" + v.Encode()
}
