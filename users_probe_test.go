package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"codeauth/internal/testkit"
	"codeauth/models"
)

// Defects found by probing `codeauth users` (review of issue 16). Each test fails until its defect
// is fixed.

// users runs `codeauth users args…` in-process against e's service.
func users(t *testing.T, e *testkit.Env, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runUsers(context.Background(), e.Server, args, &out, &errOut)
	return out.String() + errOut.String(), code
}

// `users ban X -for -1h` (a typo, or a shell variable gone negative) bans the account for good
// and exits 0: BanUser reads a negative length as "no expiry". The command should refuse a
// negative duration, as the API refuses a negative banExpiresIn.
func TestUsers_BanWithANegativeDurationIsRefused(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("negative@example.com")
		out, code := users(t, e, "ban", "negative@example.com", "-for", "-1h")
		var u models.User
		e.DB.Take(&u, "id = ?", s.UserID)
		if code == 0 && u.Banned && u.BanExpires == nil {
			t.Fatalf("ban -for -1h banned the account for good (exit %d):\n%s", code, out)
		}
	})
}

// `users ban X -for 0.5ns` (or 999ms) is a length that rounds to nothing: refused, never read as
// "until lifted" (second review of issue 16). "-for 0" is the way to ban until lifted.
func TestUsers_BanWithATinyDurationIsRefused(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		s := e.SignIn("tiny@example.com")
		for _, length := range []string{"0.5ns", "999ms", "0s"} {
			out, code := users(t, e, "ban", "tiny@example.com", "-for", length)
			var u models.User
			e.DB.Take(&u, "id = ?", s.UserID)
			if code != 2 || u.Banned {
				t.Fatalf("ban -for %s: exit %d, banned %v:\n%s", length, code, u.Banned, out)
			}
		}
		if out, code := users(t, e, "ban", "tiny@example.com", "-for", "0"); code != 0 {
			t.Fatalf("ban -for 0: exit %d:\n%s", code, out)
		}
		var u models.User
		e.DB.Take(&u, "id = ?", s.UserID)
		if !u.Banned || u.BanExpires != nil {
			t.Fatalf("ban -for 0: banned %v until %v", u.Banned, u.BanExpires)
		}
	})
}

// `users remove` is "erase now", and the store's RemoveAccount erases an account in its deletion
// grace period too (the API's remove-user does), but the command first looks the account up
// among the live ones only, so an account its owner deleted cannot be erased from a shell, by
// address or by id: "no such account".
func TestUsers_RemoveErasesAnAccountInItsDeletionGrace(t *testing.T) {
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for i, byID := range []bool{false, true} {
			email := fmt.Sprintf("deleted%d@example.com", i)
			s := e.SignIn(email)
			if r := e.Post("/api/account/delete", nil, "Authorization", "Bearer "+s.Bearer); r.Status != http.StatusOK {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			target := email
			if byID {
				target = s.UserID
			}
			out, code := users(t, e, "remove", target)
			var n int64
			e.DB.Unscoped().Model(&models.User{}).Where("id = ?", s.UserID).Count(&n)
			if code != 0 || n != 0 {
				t.Errorf("users remove %s of an account in its grace period: exit %d, %d rows left:\n%s", target, code, n, out)
			}
		}
	})
}

// The operator's commands (users, jwt:rotate, the jobs) build the whole server, which listens on
// METRICS_ADDR: run with the service's own environment next to the running service (kubectl exec,
// a cron job on the host), they fail with "address already in use" and do nothing, the
// emergency `jwt:rotate --now` included.
func TestBinary_UsersNextToTheServiceWithMetricsAddr(t *testing.T) {
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "AUTH_SECRET=0123456789abcdef0123456789abcdef", "LOG_LEVEL=warn", "DATA_DIR=" + dir,
		fmt.Sprintf("METRICS_ADDR=127.0.0.1:%d", freePort(t))}
	start(t, env[1:]...)
	for _, args := range [][]string{{"users", "list"}, {"jwt:rotate"}} {
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("codeauth %s next to the running service: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
