package pages

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/i18n"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// The admin pages: the accounts, searched and paged, and one account with its sessions, ban and
// audit trail. They call the same rules as the admin API (auth/admin.go), with the admin's
// session checked against the database; another session gets 403. Every form is a plain form
// answered by a redirect back to the account's page with what was done, so they work without
// JavaScript; the destructive ones act only with their box ticked.

// adminPageSize is how many accounts a page of the list shows.
const adminPageSize = 50

// errBadSearch refuses a search text the databases cannot compare (a NUL, invalid UTF-8).
var errBadSearch = fiber.NewError(fiber.StatusBadRequest, "That search cannot be run: it holds characters no address has.")

// errAdminsOnly refuses the admin pages to anyone but an admin.
var errAdminsOnly = fiber.NewError(fiber.StatusForbidden, "This page is for admins.")

// adminSession is the request's session when it is an admin's own, checked against the database.
func (h *Pages) adminSession(c *fiber.Ctx) (*auth.SessionState, error) {
	st, err := h.signedIn(c)
	if err != nil {
		return nil, err
	}
	if !auth.IsAdmin(st.User) || st.Session.ImpersonatedBy != nil {
		return nil, errAdminsOnly
	}
	// The admin pages are in English only (README): every page and refusal past this point.
	h.locales.Use(c, i18n.English())
	return st, nil
}

// adminUsers is GET /admin?q=&page=.
func (h *Pages) adminUsers(c *fiber.Ctx) error {
	st, err := h.adminSession(c)
	if err != nil {
		return err
	}
	v := views.AdminUsers{Query: strings.TrimSpace(c.Query("q")), Page: 1}
	if n, err := strconv.Atoi(c.Query("page")); err == nil && n > 1 && n < 1_000_000 {
		v.Page = n
	}
	users, total, err := h.auth.SearchUsers(c.UserContext(), st, v.Query, adminPageSize, (v.Page-1)*adminPageSize)
	if errors.Is(err, auth.ErrInvalidUserQuery) {
		return errBadSearch
	}
	if err != nil {
		return err
	}
	v.Total, v.Pages = total, int((total+adminPageSize-1)/adminPageSize)
	for _, u := range users {
		v.Users = append(v.Users, adminRow(u.ID, u.Email, u.Name, u.Role, u.CreatedAt, u.Banned))
	}
	p, err := h.adminPage(c, "Accounts")
	if err != nil {
		return err
	}
	return h.render(c, fiber.StatusOK, views.AdminUsersPage(p, v))
}

func adminRow(id, email, name, role string, created time.Time, banned bool) views.AdminUserRow {
	return views.AdminUserRow{ID: id, Email: email, Name: name, Role: role, Created: i18n.English().Date(created), Banned: banned}
}

// adminPage is the layout's model of an admin page titled title: in English, without the
// language switch.
func (h *Pages) adminPage(c *fiber.Ctx, title string) (views.Page, error) {
	p, err := h.page(c, "")
	p.Title, p.NoLocaleSwitch = title, true
	return p, err
}

// adminStatuses are the words of ?done= on an account's page, after each action.
var adminStatuses = map[string]string{
	"banned":   "The account is banned and signed out everywhere.",
	"unbanned": "The ban is lifted.",
	"revoked":  "Every device of the account is signed out.",
	"session":  "That device is signed out.",
}

// adminUser is GET /admin/users/:id.
func (h *Pages) adminUser(c *fiber.Ctx) error {
	st, err := h.adminSession(c)
	if err != nil {
		return err
	}
	return h.renderAdminUser(c, st, fiber.StatusOK, adminStatuses[c.Query("done")], "", views.AdminBanForm{})
}

// renderAdminUser answers with status and an account's admin page, saying what was done (done)
// or why it was not (problem), with the ban form as ban holds it.
func (h *Pages) renderAdminUser(c *fiber.Ctx, st *auth.SessionState, status int, done, problem string, ban views.AdminBanForm) error {
	ctx := c.UserContext()
	id := c.Params("id")
	u, err := h.auth.AdminGetUser(ctx, st, id)
	if errors.Is(err, auth.ErrNoSuchUser) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	v := views.AdminUser{Row: adminRow(u.ID, u.Email, u.Name, u.Role, u.CreatedAt, u.Banned), Status: done, Error: problem,
		Self: u.ID == st.User.ID, Ban: ban}
	if u.BanReason != nil {
		v.BanReason = *u.BanReason
	}
	if u.BanExpires != nil {
		v.BanUntil = u.BanExpires.UTC().Format("2 January 2006, 15:04 MST")
	}
	devices, err := h.auth.UserDevices(ctx, st, u.ID)
	if err != nil {
		return err
	}
	for _, d := range devices {
		v.Sessions = append(v.Sessions, views.Device{ID: d.ID, Name: d.Device.Name(), IPAddress: d.IPAddress,
			Active: views.ActiveText(i18n.English(), d.IdleFor, d.ActiveAt), SignedIn: i18n.English().Date(d.SignedInAt)})
	}
	events, err := h.auth.UserAudit(ctx, st, u.ID, 50)
	if err != nil {
		return err
	}
	for _, e := range events {
		actor := ""
		switch {
		case e.ActorID == nil:
			actor = "by the service"
		case *e.ActorID != u.ID:
			actor = "by an admin"
		}
		words, ok := auditWords[e.Action]
		if !ok {
			words = e.Action
		}
		v.Audit = append(v.Audit, views.AdminAuditRow{At: e.At.UTC().Format("2006-01-02 15:04"), Action: e.Action, Words: words,
			Actor: actor, Detail: auditDetail(e.Detail), IPAddress: e.IPAddress})
	}
	p, err := h.adminPage(c, u.Email)
	if err != nil {
		return err
	}
	return h.render(c, status, views.AdminUserPage(p, v))
}

// adminAction runs one action of an account's page and sends the admin back to it, saying what
// was done; a refusal is shown on the page.
func (h *Pages) adminAction(done string, act func(c *fiber.Ctx, st *auth.SessionState, id string) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		st, err := h.adminSession(c)
		if err != nil {
			return err
		}
		id := c.Params("id")
		if err := act(c, st, id); err != nil {
			if errors.Is(err, auth.ErrNoSuchUser) {
				return fiber.ErrNotFound
			}
			// The ban form comes back as it was sent (the other actions send none of it), and a
			// refused reason is said at its field. The admin pages are in English (lang="en"),
			// their refusals too.
			ban := views.AdminBanForm{Reason: strings.ToValidUTF8(formValue(c, "reason"), "\uFFFD"), For: formValue(c, "for")}
			message, ok := adminProblems[err]
			var fe *auth.FieldError
			if !ok && errors.As(err, &fe) && fe.Field == auth.FieldBanReason {
				pr, _ := explain(i18n.English(), err, countedRequests)
				ban.ReasonError, message, ok = pr.message, "", true
			}
			if !ok {
				pr, known := explain(i18n.English(), err, countedRequests)
				if !known {
					return err
				}
				message = pr.message
			}
			return h.renderAdminUser(c, st, fiber.StatusUnprocessableEntity, "", message, ban)
		}
		if done == "removed" {
			return c.Redirect("/admin", fiber.StatusSeeOther)
		}
		return c.Redirect(views.AdminPageURL(id)+"?done="+url.QueryEscape(done), fiber.StatusSeeOther)
	}
}

// auditWords are the audit log's actions in words, as an account's admin page shows them.
var auditWords = map[string]string{
	auth.AuditSignUp:               "Signed up",
	auth.AuditSignIn:               "Signed in",
	auth.AuditVerificationLocked:   "Code entry locked after failed codes",
	auth.AuditSignOut:              "Signed out",
	auth.AuditSessionRevoked:       "Devices signed out",
	auth.AuditEmailChangeRequested: "Asked to change the e-mail address",
	auth.AuditEmailChanged:         "Changed the e-mail address",
	auth.AuditEmailRestored:        "E-mail address restored",
	auth.AuditConsentGranted:       "Agreed to product news",
	auth.AuditConsentWithdrawn:     "Withdrew from product news",
	auth.AuditDeletionRequested:    "Asked to delete the account",
	auth.AuditDeletionRestored:     "Kept the account it had asked to delete",
	auth.AuditPurged:               "Erased",
	auth.AuditRoleSet:              "Role set",
	auth.AuditUserUpdated:          "Account edited",
	auth.AuditBanned:               "Banned",
	auth.AuditUnbanned:             "Ban lifted",
	auth.AuditUserRemoved:          "Removed",
	auth.AuditImpersonationStarted: "An admin signed in as the account",
	auth.AuditImpersonationStopped: "The admin signed in as the account left",
}

// auditDetail writes an audit event's detail, a JSON object, for a person: each field's name and
// value, in the stored (alphabetical) order, times to the minute in UTC, true and false as yes
// and no, null as none, lists joined; "" for an empty one. A detail it cannot read is shown as
// stored.
func auditDetail(detail string) string {
	var fields map[string]any
	if err := json.Unmarshal([]byte(detail), &fields); err != nil {
		return detail
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, strings.ReplaceAll(name, "_", " ")+" "+auditValue(fields[name]))
	}
	return strings.Join(parts, " · ")
}

// auditValue writes one value of an audit event's detail (auditDetail).
func auditValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format("2006-01-02 15:04 UTC")
		}
		return v
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			items[i] = auditValue(item)
		}
		return strings.Join(items, ", ")
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// errNotConfirmed refuses a destructive action whose box was not ticked.
var errNotConfirmed = errors.New("pages: not confirmed")

// adminProblems word the refusals of the admin rules on the account's page.
var adminProblems = map[error]string{
	errNotConfirmed:          "Tick the box to confirm.",
	auth.ErrCannotBanSelf:    "You cannot ban yourself.",
	auth.ErrCannotRemoveSelf: "You cannot remove yourself.",
	auth.ErrInvalidBanLength: "Choose how long the ban lasts.",
	auth.ErrSessionNotFound:  "That device is signed out already.",
	auth.ErrLastAdmin:        "This is the last admin: make another account an admin first.",
}

func confirmed(c *fiber.Ctx) error {
	if formValue(c, "confirm") != "yes" {
		return errNotConfirmed
	}
	return nil
}

// mountAdmin registers the admin pages.
func (h *Pages) mountAdmin(app *fiber.App, formLimit fiber.Handler) {
	app.Get("/admin", h.adminUsers)
	app.Get("/admin/users/:id", h.adminUser)
	app.Post("/admin/users/:id/ban", formLimit, h.adminAction("banned", func(c *fiber.Ctx, st *auth.SessionState, id string) error {
		if err := confirmed(c); err != nil {
			return err
		}
		d, err := auth.ParseBanLength(formValue(c, "for"))
		if err != nil {
			return err
		}
		_, err = h.auth.BanUser(c.UserContext(), st, id, formValue(c, "reason"), d)
		return err
	}))
	app.Post("/admin/users/:id/unban", formLimit, h.adminAction("unbanned", func(c *fiber.Ctx, st *auth.SessionState, id string) error {
		_, err := h.auth.UnbanUser(c.UserContext(), st, id)
		return err
	}))
	app.Post("/admin/users/:id/revoke", formLimit, h.adminAction("revoked", func(c *fiber.Ctx, st *auth.SessionState, id string) error {
		if err := confirmed(c); err != nil {
			return err
		}
		return h.auth.RevokeUserSessions(c.UserContext(), st, id)
	}))
	app.Post("/admin/users/:id/sessions/revoke", formLimit, h.adminAction("session", func(c *fiber.Ctx, st *auth.SessionState, id string) error {
		return h.auth.RevokeAccountSession(c.UserContext(), st, id, formValue(c, "session"))
	}))
	app.Post("/admin/users/:id/remove", formLimit, h.adminAction("removed", func(c *fiber.Ctx, st *auth.SessionState, id string) error {
		if err := confirmed(c); err != nil {
			return err
		}
		return h.auth.RemoveUser(c.UserContext(), st, id)
	}))
	// As the account's forms' addresses (formPages): a refused action is answered at its own
	// address, which asked for with GET goes to the account's page, not to a 405.
	for _, action := range []string{"ban", "unban", "revoke", "sessions/revoke", "remove"} {
		app.Get("/admin/users/:id/"+action, func(c *fiber.Ctx) error {
			return c.Redirect("/admin/users/"+url.PathEscape(c.Params("id")), fiber.StatusSeeOther)
		})
	}
}

// adminLink is whether the header shows the way to the admin pages for st.
func adminLink(st *auth.SessionState) bool {
	return st != nil && auth.IsAdmin(st.User) && st.Session.ImpersonatedBy == nil
}
