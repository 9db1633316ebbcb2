package betterauth

import (
	"errors"

	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/models"

	"github.com/gofiber/fiber/v2"
)

// better-auth's session management routes. Every one needs a session, checked against the
// database (a revoked session cannot list or revoke), by cookie or bearer token.

// listSessions is GET /list-sessions: the caller's live sessions, newest first. We keep only the
// hashes of tokens, so each session's "token" is its handle (its id): revoke-session takes it,
// and it is no credential (CONTRACT.md), the caller's own session's included. A client finds
// its own by comparing ids with get-session's session.id.
func (h *API) listSessions(c *fiber.Ctx) error {
	sessions, err := h.auth.ListSessions(c.UserContext(), middleware.Current(c))
	if err != nil {
		return err
	}
	return c.JSON(listedSessions(sessions))
}

// listedSessions are sessions as the session lists give them: each with its handle (its id) as
// its token.
func listedSessions(sessions []models.Session) []sessionJSON {
	out := make([]sessionJSON, len(sessions))
	for i, s := range sessions {
		out[i] = sessionJSON{
			ID: s.ID, UserID: s.UserID, Token: s.ID, ExpiresAt: isoTime(s.ExpiresAt),
			IPAddress: s.IPAddress, UserAgent: s.UserAgent, CreatedAt: isoTime(s.CreatedAt), UpdatedAt: isoTime(s.UpdatedAt),
			ImpersonatedBy: s.ImpersonatedBy,
		}
	}
	return out
}

// revokeSession is POST /revoke-session {token}: it ends one of the caller's sessions on every
// device. A handle that names none of the caller's sessions (gone already, unknown, another
// account's) ends nothing and gets the same {"status":true}, as better-auth answers: a double
// click is no error, and the answer says nothing about which handles exist. Revoking the session
// in use also expires its cookies.
func (h *API) revokeSession(c *fiber.Ctx) error {
	var req revokeSessionRequest
	if err := h.body.read(c, &req); err != nil {
		return err
	}
	current, err := h.auth.RevokeSession(c.UserContext(), middleware.Current(c), req.Token)
	if err != nil && !errors.Is(err, auth.ErrSessionNotFound) {
		return err
	}
	if current {
		h.sessions.Clear(c)
	}
	return c.JSON(statusResponse{Status: true})
}

// revokeSessions is POST /revoke-sessions: every session of the caller ends, this one too, whose
// cookies are expired.
func (h *API) revokeSessions(c *fiber.Ctx) error {
	return h.revokeAll(c, false)
}

// revokeOtherSessions is POST /revoke-other-sessions: every session of the caller but this one
// ends.
func (h *API) revokeOtherSessions(c *fiber.Ctx) error {
	return h.revokeAll(c, true)
}

func (h *API) revokeAll(c *fiber.Ctx, keepCurrent bool) error {
	if err := h.body.read(c, emptyRequest{}); err != nil {
		return err
	}
	if err := h.auth.RevokeSessions(c.UserContext(), middleware.Current(c), keepCurrent); err != nil {
		return err
	}
	if !keepCurrent {
		h.sessions.Clear(c)
	}
	return c.JSON(statusResponse{Status: true})
}

// deleteUser is POST /delete-user (better-auth's deleteUser): the account is deleted with the
// service's grace period, every session ends, and signing in before the grace period ends
// restores it. The session must have signed in within auth.FreshAge, 20 minutes (better-auth's
// default is a session signed in within a day), else 400 SESSION_EXPIRED, as better-auth answers
// a session past its freshness.
func (h *API) deleteUser(c *fiber.Ctx) error {
	if err := h.body.read(c, &deleteUserRequest{}); err != nil {
		return err
	}
	if _, err := h.auth.DeleteAccount(c.UserContext(), middleware.Current(c)); err != nil {
		return err
	}
	h.sessions.Clear(c)
	return c.JSON(deleteUserResponse{Success: true, Message: "User deleted"})
}

// listAccounts is GET /list-accounts: the accounts of other providers linked to the caller's.
// Sign-in here is by e-mail code only and links none, so the list is empty; the route answers so
// that better-auth clients and UI kits that ask for it work.
func (h *API) listAccounts(c *fiber.Ctx) error {
	return c.JSON([]accountJSON{})
}
