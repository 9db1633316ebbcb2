package betterauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/gofiber/fiber/v2"
)

// better-auth's admin plugin, under /api/auth/admin: the same paths, bodies, answers and error
// codes, so dashboards written against authClient.admin work unchanged. Every route needs a
// session checked against the database (401 without); a session that is not an admin's own is
// refused with the route's own 403 code (YOU_ARE_NOT_ALLOWED_TO_...). The rules are auth's
// (auth/admin.go).

// mountAdmin registers the admin routes on ba (the /api/auth group).
func (h *API) mountAdmin(ba fiber.Router, fromDB fiber.Handler) {
	ad := ba.Group("/admin", fromDB)
	ad.Get("/list-users", h.adminListUsers)
	ad.Get("/get-user", h.adminGetUser)
	ad.Post("/update-user", h.adminUpdateUser)
	ad.Post("/set-role", h.adminSetRole)
	ad.Post("/ban-user", h.adminBanUser)
	ad.Post("/unban-user", h.adminUnbanUser)
	ad.Post("/list-user-sessions", h.adminListUserSessions)
	ad.Post("/revoke-user-session", h.adminRevokeUserSession)
	ad.Post("/revoke-user-sessions", h.adminRevokeUserSessions)
	ad.Post("/remove-user", h.adminRemoveUser)
	ad.Post("/impersonate-user", h.adminImpersonate)
	ad.Post("/stop-impersonating", h.adminStopImpersonating)
	ad.Post("/has-permission", h.adminHasPermission)
	ad.Get("/audit-log", h.adminAuditLog)
}

// The admin plugin's refusals, each route with its own.
var (
	errNotAllowedListUsers    = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS", "You are not allowed to list users")
	errNotAllowedGetUser      = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_GET_USER", "You are not allowed to get user")
	errNotAllowedUpdateUsers  = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_USERS", "You are not allowed to update users")
	errNotAllowedChangeRole   = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_CHANGE_USERS_ROLE", "You are not allowed to change users role")
	errNotAllowedBan          = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS", "You are not allowed to ban users")
	errNotAllowedListSessions = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS_SESSIONS", "You are not allowed to list users sessions")
	errNotAllowedRevoke       = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_REVOKE_USERS_SESSIONS", "You are not allowed to revoke users sessions")
	errNotAllowedDelete       = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_DELETE_USERS", "You are not allowed to delete users")
	errNotAllowedImpersonate  = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_IMPERSONATE_USERS", "You are not allowed to impersonate users")
	errNotAllowedSetEmail     = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_SET_USERS_EMAIL", "You are not allowed to update users email")
	errPasswordViaUpdate      = newError(fiber.StatusBadRequest, "PASSWORD_CANNOT_BE_UPDATED_VIA_UPDATE_USER", "Password cannot be updated through update-user. Use the set-user-password endpoint instead")
	errAdminSessionNotFound   = newError(fiber.StatusBadRequest, "ADMIN_SESSION_NOT_FOUND", "Failed to find admin session")
	errNoPermissions          = newError(fiber.StatusBadRequest, "BAD_REQUEST", "invalid permission check. no permission(s) were passed.")
)

// adminAnswer is err with auth.ErrNotAdmin worded as the route's own refusal.
func adminAnswer(err, notAllowed error) error {
	if errors.Is(err, auth.ErrNotAdmin) {
		return notAllowed
	}
	return err
}

// adminUserRequest is the body of the routes that name one account: {userId}.
type adminUserRequest struct{ UserID string }

func (r *adminUserRequest) decode(b *jsonBody) error {
	r.UserID = b.str("userId", true)
	return nil
}

// listUsersResponse is the answer of list-users.
type listUsersResponse struct {
	Users  []userJSON `json:"users"`
	Total  int64      `json:"total"`
	Limit  int        `json:"limit"`
	Offset int        `json:"offset"`
}

// adminListUsers is GET /admin/list-users: a page of the accounts, searched, filtered and sorted
// as the query asks. Without a limit the page holds auth.DefaultUserPage accounts, at most
// auth.MaxUserPage (better-auth returns every account).
func (h *API) adminListUsers(c *fiber.Ctx) error {
	q, err := userQuery(c)
	if err != nil {
		return err
	}
	users, total, used, err := h.auth.ListUsers(c.UserContext(), middleware.Current(c), q)
	if errors.Is(err, auth.ErrInvalidUserQuery) {
		return validationError("[query] Invalid input: a field, operator or value that cannot be searched by")
	}
	if err != nil {
		return adminAnswer(err, errNotAllowedListUsers)
	}
	out := listUsersResponse{Users: make([]userJSON, len(users)), Total: total, Limit: used.Limit, Offset: used.Offset}
	for i, u := range users {
		out.Users[i] = toUserJSON(u)
	}
	return c.JSON(out)
}

// wireUserFields are the user fields of the wire format the list can search, filter and sort by.
var wireUserFields = map[string]models.UserField{
	"id": models.UserFieldID, "email": models.UserFieldEmail, "name": models.UserFieldName,
	"emailVerified": models.UserFieldEmailVerified, "role": models.UserFieldRole, "banned": models.UserFieldBanned,
	"banExpires": models.UserFieldBanExpires, "createdAt": models.UserFieldCreatedAt, "updatedAt": models.UserFieldUpdatedAt,
}

// userQuery reads list-users' query string: searchValue, searchField (email, name),
// searchOperator (contains, starts_with, ends_with), limit, offset, sortBy, sortDirection (asc,
// desc), filterField, filterValue and filterOperator (eq, ne, lt, lte, gt, gte, in, not_in,
// contains, starts_with, ends_with). A filter value is read as its field's type: true or false,
// a date (ISO 8601 or milliseconds since 1970), or text; for in and not_in, a JSON array or a
// comma-separated list.
func userQuery(c *fiber.Ctx) (models.UserQuery, error) {
	var q models.UserQuery
	var issues []string
	issue := func(field, reason string) { issues = append(issues, "[query."+field+"] "+reason) }
	number := func(name string) int {
		v := c.Query(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			issue(name, "Invalid input: expected a whole number of 0 or more")
		}
		return n
	}
	q.Limit, q.Offset = number("limit"), number("offset")
	if v := c.Query("searchValue"); v != "" {
		field := c.Query("searchField", "email")
		op := models.Operator(c.Query("searchOperator", string(models.OpContains)))
		if field != "email" && field != "name" {
			issue("searchField", `Invalid option: expected one of "email"|"name"`)
		}
		if op != models.OpContains && op != models.OpStartsWith && op != models.OpEndsWith {
			issue("searchOperator", `Invalid option: expected one of "contains"|"starts_with"|"ends_with"`)
		}
		q.Where = append(q.Where, models.UserCondition{Field: wireUserFields[field], Op: op, Value: v})
	}
	if sortBy := c.Query("sortBy"); sortBy != "" {
		field, ok := wireUserFields[sortBy]
		if !ok {
			issue("sortBy", "Invalid input: not a field users can be sorted by")
		}
		q.SortBy = field
	}
	switch dir := c.Query("sortDirection", "asc"); dir {
	case "asc":
	case "desc":
		q.Desc = true
	default:
		issue("sortDirection", `Invalid option: expected one of "asc"|"desc"`)
	}
	// better-fetch sends an array as the key repeated (filterValue=a&filterValue=b), which
	// better-auth reads as that array.
	if raws := c.Request().URI().QueryArgs().PeekMulti("filterValue"); len(raws) > 0 {
		name := c.Query("filterField", "email")
		field, ok := wireUserFields[name]
		if !ok {
			issue("filterField", "Invalid input: not a field users can be filtered by")
		}
		op := models.Operator(c.Query("filterOperator", string(models.OpEq)))
		value, err := filterValue(field, op, raws)
		if err != nil {
			issue("filterValue", err.Error())
		}
		q.Where = append(q.Where, models.UserCondition{Field: field, Op: op, Value: value})
	}
	if len(issues) > 0 {
		return q, validationError(strings.Join(issues, "; "))
	}
	return q, nil
}

// filterValue reads a filter's value, given as the query's filterValue once or more, as its
// field's type; a list for in and not_in, from the key repeated, or given once as a JSON array or
// a comma-separated list. Another operator takes one value.
func filterValue(field models.UserField, op models.Operator, raws [][]byte) (any, error) {
	one := func(s string) (any, error) {
		switch field {
		case models.UserFieldBanned, models.UserFieldEmailVerified:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return nil, errors.New("Invalid input: expected true or false")
			}
			return b, nil
		case models.UserFieldCreatedAt, models.UserFieldUpdatedAt, models.UserFieldBanExpires:
			var t time.Time
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
				t = time.UnixMilli(ms).UTC()
			} else if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return nil, errors.New("Invalid input: expected an ISO 8601 date or milliseconds since 1970")
			}
			// Both databases compare the years 1 to 9999 (SQLite as text, which a fifth digit
			// would sort wrongly; PostgreSQL overflows far past them), of the time in UTC, as
			// it is stored: "9999-12-31T23:00:00-02:00" is in the year 10000.
			if t = t.UTC(); t.Year() < 1 || t.Year() > 9999 {
				return nil, errors.New("Invalid input: expected a date between the years 1 and 9999")
			}
			return t.UTC(), nil
		}
		return s, nil
	}
	list := op == models.OpIn || op == models.OpNotIn
	if !list && len(raws) > 1 {
		return nil, errors.New("Invalid input: expected one value for this operator")
	}
	raw := string(raws[0])
	if !list {
		return one(raw)
	}
	var items []string
	switch {
	case len(raws) > 1:
		for _, r := range raws {
			items = append(items, string(r))
		}
	case strings.HasPrefix(raw, "["):
		var decoded []any
		if err := json.Unmarshal([]byte(raw), &decoded); err != nil {
			return nil, errors.New("Invalid input: expected a JSON array or a comma-separated list")
		}
		for _, d := range decoded {
			switch v := d.(type) {
			case string:
				items = append(items, v)
			case float64, bool:
				b, _ := json.Marshal(v)
				items = append(items, string(b))
			default:
				return nil, errors.New("Invalid input: expected a list of strings, numbers or booleans")
			}
		}
	default:
		items = strings.Split(raw, ",")
	}
	values := make([]any, 0, len(items))
	for _, it := range items {
		v, err := one(strings.TrimSpace(it))
		if err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	return values, nil
}

// adminGetUser is GET /admin/get-user?id=: the account, as better-auth answers it (the user
// itself, not wrapped).
func (h *API) adminGetUser(c *fiber.Ctx) error {
	if !c.Request().URI().QueryArgs().Has("id") {
		// better-auth's query schema asks for the id before anything else.
		return validationError("[query.id] Invalid input: expected string, received undefined")
	}
	u, err := h.auth.AdminGetUser(c.UserContext(), middleware.Current(c), c.Query("id"))
	if err != nil {
		return adminAnswer(err, errNotAllowedGetUser)
	}
	return c.JSON(toUserJSON(u))
}

// adminUpdateUserRequest is the body of POST /admin/update-user: {userId, data}. data may change
// the name and the image; the address changes only through its owner's confirmation, and roles
// and bans through their own routes.
type adminUpdateUserRequest struct {
	UserID string
	Update auth.UserUpdate
	// refusal is an answer decided by what data holds, after the body's own checks.
	refusal error
}

func (r *adminUpdateUserRequest) decode(b *jsonBody) error {
	r.UserID = b.str("userId", true)
	data := b.object("data")
	if data == nil {
		if !b.has("data") {
			b.issue("data", "Invalid input: expected object, received undefined")
		}
		return nil
	}
	inner := &jsonBody{fields: data}
	for name := range data {
		switch name {
		case "name", "image":
		case "email", "emailVerified":
			r.refusal = errNotAllowedSetEmail
		case "password":
			r.refusal = errPasswordViaUpdate
		case "role":
			r.refusal = errNotAllowedChangeRole
		case "banned", "banReason", "banExpires":
			r.refusal = errNotAllowedBan
		default:
			inner.issue(name, "Invalid input: not a field an admin can update")
		}
	}
	r.Update.Name = inner.optStr("name")
	r.Update.Image, r.Update.SetImage = inner.nullableStr("image")
	for _, i := range inner.issues {
		b.issues = append(b.issues, strings.Replace(i, "[body.", "[body.data.", 1))
	}
	return nil
}

// adminUpdateUser is POST /admin/update-user: the account's name or image; answers the user.
func (h *API) adminUpdateUser(c *fiber.Ctx) error {
	var req adminUpdateUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	st := middleware.Current(c)
	if !auth.IsAdmin(st.User) || st.Session.ImpersonatedBy != nil {
		return errNotAllowedUpdateUsers
	}
	if req.refusal != nil {
		return req.refusal
	}
	u, err := h.auth.AdminUpdateUser(c.UserContext(), st, req.UserID, req.Update)
	if errors.Is(err, auth.ErrNothingToUpdate) {
		return newError(fiber.StatusBadRequest, "NO_DATA_TO_UPDATE", "No data to update")
	}
	if err != nil {
		return adminAnswer(err, errNotAllowedUpdateUsers)
	}
	return c.JSON(toUserJSON(u))
}

// setRoleRequest is the body of POST /admin/set-role: {userId, role}, role a string or an array.
type setRoleRequest struct {
	UserID string
	Roles  []string
}

func (r *setRoleRequest) decode(b *jsonBody) error {
	r.UserID = b.str("userId", true)
	r.Roles = b.strings("role")
	return nil
}

// userResponse is {"user": ...}, the answer of set-role, ban-user and unban-user.
type userResponse struct {
	User userJSON `json:"user"`
}

// adminSetRole is POST /admin/set-role.
func (h *API) adminSetRole(c *fiber.Ctx) error {
	var req setRoleRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	u, err := h.auth.SetRole(c.UserContext(), middleware.Current(c), req.UserID, req.Roles)
	if err != nil {
		return adminAnswer(err, errNotAllowedChangeRole)
	}
	return c.JSON(userResponse{User: toUserJSON(u)})
}

// banUserRequest is the body of POST /admin/ban-user: {userId, banReason?, banExpiresIn?}, the
// expiry in seconds from now.
type banUserRequest struct {
	UserID    string
	Reason    string
	ExpiresIn time.Duration
}

func (r *banUserRequest) decode(b *jsonBody) error {
	r.UserID = b.str("userId", true)
	if reason := b.optStr("banReason"); reason != nil {
		r.Reason = *reason
	}
	if secs := b.optNumber("banExpiresIn"); secs != nil {
		// At most a hundred years: a longer ban is a ban for good, and the time must fit.
		// 0 is "not given", as better-auth reads it: a ban for good.
		switch {
		case *secs < 0 || math.IsNaN(*secs):
			b.issue("banExpiresIn", "Invalid input: expected a number of seconds, 0 (for good) or more")
		case *secs > maxBanSeconds:
			b.issue("banExpiresIn", fmt.Sprintf("Too big: expected at most %d seconds (100 years; 0 bans for good)", maxBanSeconds))
		default:
			// Whole seconds, rounded up: a fraction of a second must not become 0, "for good".
			r.ExpiresIn = time.Duration(math.Ceil(*secs)) * time.Second
		}
	}
	return nil
}

// maxBanSeconds is the longest banExpiresIn: a hundred years.
const maxBanSeconds = 100 * 365 * 24 * 3600

// adminBanUser is POST /admin/ban-user: the account is banned and every session of it ends.
func (h *API) adminBanUser(c *fiber.Ctx) error {
	var req banUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	u, err := h.auth.BanUser(c.UserContext(), middleware.Current(c), req.UserID, req.Reason, req.ExpiresIn)
	if err != nil {
		return adminAnswer(err, errNotAllowedBan)
	}
	return c.JSON(userResponse{User: toUserJSON(u)})
}

// adminUnbanUser is POST /admin/unban-user.
func (h *API) adminUnbanUser(c *fiber.Ctx) error {
	var req adminUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	u, err := h.auth.UnbanUser(c.UserContext(), middleware.Current(c), req.UserID)
	if err != nil {
		return adminAnswer(err, errNotAllowedBan)
	}
	return c.JSON(userResponse{User: toUserJSON(u)})
}

// sessionsResponse is {"sessions": [...]}, the answer of list-user-sessions.
type sessionsResponse struct {
	Sessions []sessionJSON `json:"sessions"`
}

// adminListUserSessions is POST /admin/list-user-sessions: the account's live sessions, each
// with its handle as its token, as list-sessions gives them.
func (h *API) adminListUserSessions(c *fiber.Ctx) error {
	var req adminUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	sessions, err := h.auth.UserSessions(c.UserContext(), middleware.Current(c), req.UserID)
	if errors.Is(err, auth.ErrNoSuchUser) {
		sessions, err = nil, nil // as better-auth: an account that does not exist has no session
	}
	if err != nil {
		return adminAnswer(err, errNotAllowedListSessions)
	}
	return c.JSON(sessionsResponse{Sessions: listedSessions(sessions)})
}

// revokeUserSessionRequest is the body of POST /admin/revoke-user-session: {sessionToken}, a
// session's handle (or its raw token).
type revokeUserSessionRequest struct{ SessionToken string }

func (r *revokeUserSessionRequest) decode(b *jsonBody) error {
	r.SessionToken = b.str("sessionToken", true)
	return nil
}

// adminRevokeUserSession is POST /admin/revoke-user-session: any account's session ends at once.
// A handle that names no session (gone already, or never one) ends nothing and answers success,
// as better-auth does.
func (h *API) adminRevokeUserSession(c *fiber.Ctx) error {
	var req revokeUserSessionRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	err := h.auth.RevokeUserSession(c.UserContext(), middleware.Current(c), req.SessionToken)
	if err != nil && !errors.Is(err, auth.ErrSessionNotFound) {
		return adminAnswer(err, errNotAllowedRevoke)
	}
	return c.JSON(successResponse{Success: true})
}

// adminRevokeUserSessions is POST /admin/revoke-user-sessions: every session of the account ends.
// An account that does not exist has none to end: success, as better-auth answers.
func (h *API) adminRevokeUserSessions(c *fiber.Ctx) error {
	var req adminUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	err := h.auth.RevokeUserSessions(c.UserContext(), middleware.Current(c), req.UserID)
	if err != nil && !errors.Is(err, auth.ErrNoSuchUser) {
		return adminAnswer(err, errNotAllowedRevoke)
	}
	return c.JSON(successResponse{Success: true})
}

// adminRemoveUser is POST /admin/remove-user: the account is erased at once, without the grace
// period of a deletion.
func (h *API) adminRemoveUser(c *fiber.Ctx) error {
	var req adminUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	if err := h.auth.RemoveUser(c.UserContext(), middleware.Current(c), req.UserID); err != nil {
		return adminAnswer(err, errNotAllowedDelete)
	}
	return c.JSON(successResponse{Success: true})
}

// impersonationResponse is {session, user}, the answer of impersonate-user and
// stop-impersonating.
type impersonationResponse struct {
	Session sessionJSON `json:"session"`
	User    userJSON    `json:"user"`
}

// adminImpersonate is POST /admin/impersonate-user: a session as the account for an hour, marked
// with the admin's id. The browser's session becomes it, and the admin's own is kept in the
// signed admin session cookie until stop-impersonating; a bearer client gets the new token in
// the answer and in set-auth-token.
func (h *API) adminImpersonate(c *fiber.Ctx) error {
	var req adminUserRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	admin := middleware.Current(c)
	st, err := h.auth.Impersonate(c.UserContext(), admin, req.UserID,
		auth.ClientMeta{IPAddress: middleware.VouchedIP(c), UserAgent: c.Get(fiber.HeaderUserAgent)})
	if err != nil {
		return adminAnswer(err, errNotAllowedImpersonate)
	}
	h.sessions.KeepAdminSession(c, admin.Token, auth.ImpersonationLifetime)
	h.sessions.Issue(c, st, true)
	return c.JSON(impersonationResponse{Session: toSessionJSON(st), User: toUserJSON(st.User)})
}

// adminStopImpersonating is POST /admin/stop-impersonating: the impersonation session ends and
// the admin's own, kept in the admin session cookie, is the browser's session again.
func (h *API) adminStopImpersonating(c *fiber.Ctx) error {
	if err := h.body.read(c, emptyRequest{}); err != nil {
		return err
	}
	adminToken, ok := h.sessions.AdminSession(c)
	if !ok && middleware.Current(c).Session.ImpersonatedBy != nil {
		return errAdminSessionNotFound
	}
	admin, err := h.auth.StopImpersonating(c.UserContext(), middleware.Current(c), adminToken)
	if errors.Is(err, auth.ErrNotImpersonating) {
		return newError(fiber.StatusBadRequest, "BAD_REQUEST", "You are not impersonating anyone")
	}
	if errors.Is(err, auth.ErrSessionNotFound) {
		return errAdminSessionNotFound
	}
	if err != nil {
		return err
	}
	h.sessions.ClearAdminSession(c)
	h.sessions.Issue(c, admin, true)
	return c.JSON(impersonationResponse{Session: toSessionJSON(admin), User: toUserJSON(admin.User)})
}

// hasPermissionRequest is the body of POST /admin/has-permission: {permissions} (or the older
// {permission}), resource → actions. The caller's own role is checked, as better-auth does for
// any request with a session.
type hasPermissionRequest struct{ Permissions auth.Permissions }

func (r *hasPermissionRequest) decode(b *jsonBody) error {
	name := "permissions"
	if !b.has(name) && b.has("permission") {
		name = "permission"
	}
	fields := b.object(name)
	if fields == nil {
		if !b.has(name) {
			return errNoPermissions
		}
		return nil
	}
	r.Permissions = auth.Permissions{}
	for resource, raw := range fields {
		var actions []string
		if err := json.Unmarshal(raw, &actions); err != nil {
			b.issue(name+"."+resource, "Invalid input: expected array of strings")
			continue
		}
		r.Permissions[resource] = actions
	}
	return nil
}

// hasPermissionResponse is {"error": null, "success": bool}.
type hasPermissionResponse struct {
	Error   *string `json:"error"`
	Success bool    `json:"success"`
}

// adminHasPermission is POST /admin/has-permission: whether the caller's roles grant every
// permission asked. Any signed-in account may ask about itself.
func (h *API) adminHasPermission(c *fiber.Ctx) error {
	var req hasPermissionRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	st := middleware.Current(c)
	role := st.User.Role
	if st.Session.ImpersonatedBy != nil {
		role = auth.RoleUser
	}
	return c.JSON(hasPermissionResponse{Success: auth.HasPermission(role, req.Permissions)})
}

// auditEventJSON is one event of the audit log.
type auditEventJSON struct {
	ID        string          `json:"id"`
	At        isoTime         `json:"at"`
	ActorID   *string         `json:"actorId"`
	UserID    *string         `json:"userId"`
	Action    string          `json:"action"`
	IPAddress string          `json:"ipAddress"`
	UserAgent string          `json:"userAgent"`
	RequestID string          `json:"requestId"`
	Detail    json.RawMessage `json:"detail"`
}

// auditLogResponse is the answer of audit-log.
type auditLogResponse struct {
	Events []auditEventJSON `json:"events"`
	Total  int64            `json:"total"`
	Limit  int              `json:"limit"`
	Offset int              `json:"offset"`
}

// errNotAllowedAudit refuses the audit log to a session that is not an admin's own.
var errNotAllowedAudit = newError(fiber.StatusForbidden, "YOU_ARE_NOT_ALLOWED_TO_READ_THE_AUDIT_LOG", "You are not allowed to read the audit log")

// adminAuditLog is GET /admin/audit-log?userId=&action=&limit=&offset= (ours, beside better-auth's
// routes): the audit log, newest first, of one account or action when asked.
func (h *API) adminAuditLog(c *fiber.Ctx) error {
	var issues []string
	number := func(name string) int {
		v := c.Query(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			issues = append(issues, "[query."+name+"] Invalid input: expected a whole number of 0 or more")
		}
		return n
	}
	q := models.AuditQuery{SubjectID: c.Query("userId"), Action: c.Query("action"), Limit: number("limit"), Offset: number("offset")}
	if len(q.SubjectID) > 64 || len(q.Action) > 64 {
		issues = append(issues, "[query] Invalid input: too long")
	}
	if len(issues) > 0 {
		return validationError(strings.Join(issues, "; "))
	}
	events, total, used, err := h.auth.AuditLog(c.UserContext(), middleware.Current(c), q)
	if errors.Is(err, auth.ErrInvalidUserQuery) {
		return validationError("[query.userId] Invalid input: expected a user id")
	}
	if errors.Is(err, auth.ErrInvalidAuditAction) {
		return validationError("[query.action] Invalid input: expected an action's name")
	}
	if err != nil {
		return adminAnswer(err, errNotAllowedAudit)
	}
	out := auditLogResponse{Events: make([]auditEventJSON, len(events)), Total: total, Limit: used.Limit, Offset: used.Offset}
	for i, ev := range events {
		out.Events[i] = auditEventJSON{ID: ev.ID, At: isoTime(ev.At), ActorID: ev.ActorID, UserID: ev.SubjectID, Action: ev.Action,
			IPAddress: ev.IPAddress, UserAgent: ev.UserAgent, RequestID: ev.RequestID, Detail: json.RawMessage(ev.Detail)}
	}
	return c.JSON(out)
}
