package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
	"codeauth/mail"
	"codeauth/models"
)

// The new-device notice: an e-mail to the account when it signs in from a browser or app (its
// family and system) it has not used for 90 days, once per such device, never on the first
// sign-in, naming the device and linking to the devices card, through the outbox.

// notices are the new-device notices delivered to email.
func notices(e *testkit.Env, email string) []mail.Message {
	return e.Mailer.Find(mail.KindNewDevice, email)
}

func TestNewDeviceNotice_OncePerNewDevice(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		email := "traveller@example.com"
		signInFrom(t, e, email, uaChromeMac, "203.0.113.7") // sign-up: its first device, no notice
		signInFrom(t, e, email, uaChromeMac, "203.0.113.99")
		// An update of the same browser is the same device.
		signInFrom(t, e, email, strings.Replace(uaChromeMac, "Chrome/131.0.0.0", "Chrome/132.0.6834.57", 1), "203.0.113.8")
		if n := len(notices(e, email)); n != 0 {
			t.Fatalf("%d notices for the first device", n)
		}

		e.Clock.Advance(time.Minute)
		signInFrom(t, e, email, uaFirefoxWin, "198.51.100.23")
		got := notices(e, email)
		if len(got) != 1 {
			t.Fatalf("%d notices for a new device, want 1", len(got))
		}
		m := got[0]
		for _, want := range []string{"Firefox on Windows", "198.51.100.23", e.URL + "/account#devices", "1 March 2026"} {
			if !strings.Contains(m.Text, want) || !strings.Contains(m.HTML, want) {
				t.Errorf("the notice does not say %q:\n%s", want, m.Text)
			}
		}
		if !strings.Contains(m.Subject, "Firefox on Windows") || m.Code != "" {
			t.Errorf("the notice's subject %q, code %q", m.Subject, m.Code)
		}
		signInFrom(t, e, email, uaFirefoxWin, "198.51.100.24")
		if n := len(notices(e, email)); n != 1 {
			t.Fatalf("%d notices after a second sign-in from the same device", n)
		}

		// 90 days unused, and the device is new again; within them, it is not.
		e.Clock.Advance(89 * 24 * time.Hour)
		signInFrom(t, e, email, uaFirefoxWin, "198.51.100.25")
		if n := len(notices(e, email)); n != 1 {
			t.Fatalf("a device seen 89 days ago was new: %d notices", n)
		}
		e.Clock.Advance(auth.KnownDeviceWindow + time.Minute)
		signInFrom(t, e, email, uaFirefoxWin, "198.51.100.26")
		if n := len(notices(e, email)); n != 2 {
			t.Fatalf("a device unused for 90 days was not new: %d notices", n)
		}
		// A hostile header names no words of its own in the e-mail.
		signInFrom(t, e, email, hostileUA, "198.51.100.27")
		last := notices(e, email)
		if len(last) != 3 || strings.Contains(last[2].Text, "locked") || strings.Contains(last[2].HTML, "<script>") ||
			!strings.Contains(last[2].Text, "Unknown device") {
			t.Fatalf("the notice of a hostile header: %d notices, %q", len(last), last[len(last)-1].Text)
		}
		// The table holds keyed hashes, never the header.
		var devices []models.KnownDevice
		e.DB.Find(&devices)
		for _, d := range devices {
			if strings.Contains(d.DeviceKey, "Firefox") || len(d.DeviceKey) != 43 {
				t.Fatalf("a device is stored as %q", d.DeviceKey)
			}
		}
		if len(devices) != 3 {
			t.Fatalf("%d devices recorded, want 3", len(devices))
		}
	}, behindProxy)
}

// Devices unseen for 90 days are pruned; they go with their account too.
func TestNewDeviceNotice_Prune(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		signInFrom(t, e, "old@example.com", uaChromeMac, "203.0.113.7")
		e.Clock.Advance(auth.KnownDeviceWindow + time.Hour)
		signInFrom(t, e, "new@example.com", uaChromeMac, "203.0.113.8")
		r, err := e.Auth.PruneExpired(t.Context())
		if err != nil || r.KnownDevices != 1 || e.Count(&models.KnownDevice{}) != 1 {
			t.Fatalf("prune: %+v, %v; %d devices left", r, err, e.Count(&models.KnownDevice{}))
		}
		admin := e.SignIn(adminEmail)
		var user models.User
		e.DB.Take(&user, "email = ?", "new@example.com")
		if r := adminPost(e, admin, "remove-user", map[string]any{"userId": user.ID}); r.Status != http.StatusOK {
			t.Fatalf("remove-user: %d %s", r.Status, r.Body)
		}
		if n := e.Count(&models.KnownDevice{}, "user_id = ?", user.ID); n != 0 {
			t.Fatalf("%d devices outlived their account", n)
		}
	}, withAdmin)
}

func TestNewDeviceNotice_Off(t *testing.T) {
	e := testkit.New(t, testkit.SQLite, testkit.WithEnv("AUTH_NEW_DEVICE_NOTICE", "false"))
	signInFrom(t, e, "quiet@example.com", uaChromeMac, "203.0.113.7")
	signInFrom(t, e, "quiet@example.com", uaFirefoxWin, "203.0.113.8")
	if n := len(notices(e, "quiet@example.com")); n != 0 || e.Count(&models.KnownDevice{}) != 0 {
		t.Fatalf("with the notice off: %d notices, %d devices", n, e.Count(&models.KnownDevice{}))
	}
}

// An address whose deleted account is past its grace period signs up afresh: the new account
// records its first device even when the purged one had seen that device the same day, so its
// next sign-in from it is not taken for a new device.
func TestNewDeviceNotice_AfterThePurgeOfTheAddressesAccount(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		email := "again@example.com"
		s := signInFrom(t, e, email, uaChromeMac, "203.0.113.7")
		if r := e.Post("/api/account/delete", map[string]any{}, "Authorization", "Bearer "+s.Bearer); r.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		e.Clock.Advance(2 * time.Hour) // past the grace period, the purge not yet run
		signInFrom(t, e, email, uaChromeMac, "203.0.113.7")
		var fresh models.User
		e.DB.Take(&fresh, "email = ?", email)
		if n := e.Count(&models.KnownDevice{}, "user_id = ?", fresh.ID); n != 1 {
			t.Fatalf("the new account recorded %d devices, want its first", n)
		}
		e.Clock.Advance(25 * time.Hour)
		signInFrom(t, e, email, uaChromeMac, "203.0.113.7")
		if n := len(notices(e, email)); n != 0 {
			t.Fatalf("%d notices for the device the new account signed up on", n)
		}
	}, testkit.WithDeletionGrace(time.Hour))
}
