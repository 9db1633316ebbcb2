package pages

import (
	"codeauth/auth"
	"codeauth/middleware"
	"codeauth/views"

	"github.com/gofiber/fiber/v2"
)

// The account page's "Your devices" card: the account's sessions as devices, with a way to sign
// out one and every other. Without JavaScript each form posts and the browser is sent back to
// the card; with htmx the card is swapped in place, saying what was done.

// devicesAnchor is where a sign-out without JavaScript lands: the card, on the account page.
const devicesAnchor = "/account#devices"

// devices lists st's account's devices for the card.
func (h *Pages) devices(c *fiber.Ctx, st *auth.SessionState) ([]views.Device, error) {
	list, err := h.auth.Devices(c.UserContext(), st)
	if err != nil {
		return nil, err
	}
	l := h.lang(c)
	out := make([]views.Device, len(list))
	for i, d := range list {
		out[i] = views.Device{
			ID: d.ID, Name: l.DeviceName(d.Device.Browser, d.Device.Platform()), Kind: d.Device.Kind, IPAddress: d.IPAddress,
			Active: views.ActiveText(l, d.IdleFor, d.ActiveAt), ActiveAt: d.ActiveAt,
			SignedIn: l.Date(d.SignedInAt), Current: d.Current,
		}
		if d.Current {
			out[i].Active = l.T("devices.active_now")
		}
	}
	return out, nil
}

// signedInDevices is the database-checked session of a sign-out form and the devices its card
// showed.
func (h *Pages) signedInDevices(c *fiber.Ctx) (*auth.SessionState, []views.Device, error) {
	st, err := h.signedIn(c)
	if err != nil {
		return nil, nil, err
	}
	list, err := h.devices(c, st)
	return st, list, err
}

// signOutDevice is POST /account/devices/sign-out {session}: the device of that session (a
// handle of the card) is signed out everywhere at once, as by revoke-session. A handle that names
// no session of the account, another account's included, is refused alike and changes nothing.
// The handle of this browser's own session signs this browser out.
func (h *Pages) signOutDevice(c *fiber.Ctx) error {
	st, before, err := h.signedInDevices(c)
	if err != nil {
		return err
	}
	handle := formValue(c, "session")
	current, err := h.auth.RevokeSession(c.UserContext(), st, handle)
	if current {
		h.sessions.Clear(c)
		if isHTMX(c) {
			c.Set("HX-Redirect", middleware.SignInPath)
			return c.SendStatus(fiber.StatusNoContent)
		}
		return c.Redirect(middleware.SignInPath, fiber.StatusSeeOther)
	}
	card := views.Devices{List: before[:0]}
	for _, d := range before {
		if d.ID == handle && err == nil {
			card.Status = h.lang(c).Tf("devices.signed_out", map[string]any{"Device": d.Name})
			continue
		}
		card.List = append(card.List, d)
	}
	return h.answerDevices(c, st, card, err)
}

// signOutOtherDevices is POST /account/devices/sign-out-others: every session of the account
// but this browser's ends at once, as by revoke-other-sessions.
func (h *Pages) signOutOtherDevices(c *fiber.Ctx) error {
	st, before, err := h.signedInDevices(c)
	if err != nil {
		return err
	}
	if err := h.auth.RevokeSessions(c.UserContext(), st, true); err != nil {
		return err
	}
	card := views.Devices{List: before[:0]}
	for _, d := range before {
		if d.Current {
			card.List = append(card.List, d)
		}
	}
	if others := len(before) - len(card.List); others == 0 {
		card.Status = h.lang(c).T("devices.no_others")
	} else {
		card.Status = h.lang(c).Tn("devices.signed_out_others", others, nil)
	}
	return h.answerDevices(c, st, card, nil)
}

// answerDevices answers a sign-out form: with htmx, the card with what was done or why not;
// without, the account page (a refusal, explained on the card) or a redirect back to the card.
func (h *Pages) answerDevices(c *fiber.Ctx, st *auth.SessionState, card views.Devices, err error) error {
	status := fiber.StatusOK
	if err != nil {
		pr, known := explain(h.lang(c), err, countedRequests)
		if !known {
			return err
		}
		card.Error, status = pr.message, pr.status
	}
	if isHTMX(c) {
		return h.render(c, status, views.DevicesCard(card))
	}
	if err != nil {
		return h.accountWith(c, status, views.Account{Email: st.User.Email, Name: st.User.Name, Devices: card})
	}
	return c.Redirect(devicesAnchor, fiber.StatusSeeOther)
}
