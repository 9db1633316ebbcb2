package handlers_test

import (
	"fmt"
	"testing"
	"time"

	"codeauth/internal/testkit"
	"codeauth/models"

	"github.com/aclements/go-moremath/stats"
	"github.com/google/uuid"
)

// Catalogue #106, ASVS 6.3.8: with sign-up closed, asking for a code for an address that has an
// account takes as long as for one that has none (whose e-mail is withheld), so the timing of the
// answer does not tell who has an account. The same statistical test as the address change's
// (emailchange_timing_test.go): 200 alternating samples of each, Mann-Whitney U at the 1 % level,
// failing only on two failures in a row. Skipped under -short.
func TestSignUpGating_KnownAndUnknownAddressesTakeTheSameTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a statistical timing test; run without -short")
	}
	testkit.ForEachDB(t, func(t *testing.T, e *testkit.Env) {
		for attempt := 1; ; attempt++ {
			known, unknown := gatedSendTimings(t, e, fmt.Sprint(attempt), 200)
			res, err := stats.MannWhitneyUTest(known, unknown, stats.LocationDiffers)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("attempt %d: median known %v, unknown %v, p = %.3g", attempt, median(known), median(unknown), res.P)
			if res.P > 0.01 {
				return
			}
			if attempt == 2 {
				t.Fatalf("addresses with and without an account differ in time (p = %.3g twice running)", res.P)
			}
		}
	}, testkit.WithEnv("AUTH_DISABLE_SIGNUP", "true"))
}

// gatedSendTimings times n sends for addresses with an account and n for addresses without,
// alternating which goes first, in microseconds; each address is used once.
func gatedSendTimings(t *testing.T, e *testkit.Env, round string, n int) (known, unknown []float64) {
	t.Helper()
	now := e.Clock.Now()
	for i := 0; i < n; i++ {
		u := models.User{ID: uuid.NewString(), Email: fmt.Sprintf("known-%s-%d@example.com", round, i), EmailVerified: true, CreatedAt: now, UpdatedAt: now}
		if err := e.DB.Create(&u).Error; err != nil {
			t.Fatal(err)
		}
	}
	send := func(email string) float64 {
		start := time.Now()
		r := e.Post("/api/auth/email-otp/send-verification-otp", map[string]any{"email": email, "type": "sign-in"})
		d := time.Since(start)
		if r.Status != 200 {
			t.Fatalf("send for %s: %d %s", email, r.Status, r.Body)
		}
		return float64(d.Microseconds())
	}
	for i := 0; i < 10; i++ {
		send(fmt.Sprintf("warm-%s-%d@example.com", round, i))
	}
	for i := 0; i < n; i++ {
		k, u := fmt.Sprintf("known-%s-%d@example.com", round, i), fmt.Sprintf("unknown-%s-%d@example.com", round, i)
		if i%2 == 0 {
			known = append(known, send(k))
			unknown = append(unknown, send(u))
		} else {
			unknown = append(unknown, send(u))
			known = append(known, send(k))
		}
	}
	return known, unknown
}
