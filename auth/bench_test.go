package auth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"codeauth/auth"
	"codeauth/internal/testkit"
)

// BenchmarkSessionLookup is the session check of a protected request that the cookie cache cannot
// answer (every bearer request): one indexed query joining the session to its live user.
func BenchmarkSessionLookup(b *testing.B) {
	benchSessionChecks(b, func(b *testing.B, check func() error) {
		for b.Loop() {
			if err := check(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSessionLookupParallel is the same check from 32 goroutines at once, as 32 busy
// connections make it. On PostgreSQL reads that arrive while a query runs share the next one;
// reads/query reports how many a query answered.
func BenchmarkSessionLookupParallel(b *testing.B) {
	benchSessionChecks(b, func(b *testing.B, check func() error) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := check(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// benchSessionChecks runs loop on each database with a check of one signed-in session from the
// database, and reports how many reads a query answered.
func benchSessionChecks(b *testing.B, loop func(b *testing.B, check func() error)) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		b.Run(dialect, func(b *testing.B) {
			e := testkit.New(b, dialect)
			s := e.SignIn("bench@example.com")
			q := auth.SessionQuery{Token: s.Token, FromDatabase: true, NoRefresh: true}
			ctx := context.Background()
			check := func() error {
				if st, err := e.Auth.Session(ctx, q); err != nil || st == nil {
					return fmt.Errorf("no session: %v", err)
				}
				return nil
			}
			before := e.Auth.Stats()
			b.ReportAllocs()
			loop(b, check)
			after := e.Auth.Stats()
			if queries := after.SessionQueries - before.SessionQueries; queries > 0 {
				b.ReportMetric(float64(after.SessionReads-before.SessionReads)/float64(queries), "reads/query")
			}
		})
	}
}

// BenchmarkVerifyCode is a right code's verification for a new address: the attempt spent and
// the failure reserved before the constant-time comparison, then the code consumed, the account
// created with its sign-up effects, and the session opened, in one transaction. Sending the code
// is not timed.
func BenchmarkVerifyCode(b *testing.B) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		b.Run(dialect, func(b *testing.B) {
			e := testkit.New(b, dialect)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				email := fmt.Sprintf("bench-%d@example.com", i)
				if err := e.Auth.SendSignInCode(ctx, email, "en", ""); err != nil {
					b.Fatal(err)
				}
				code := e.Mailer.LastCode(email)
				b.StartTimer()
				if _, err := e.Auth.SignIn(ctx, auth.SignInInput{Email: email, Code: code}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyCodeReturning is a right code's verification for an existing account from a
// device it knows: the sign-in most people make, with the new-device check (on by default).
func BenchmarkVerifyCodeReturning(b *testing.B) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		b.Run(dialect, func(b *testing.B) {
			e := testkit.New(b, dialect)
			ctx := context.Background()
			const email = "returning@example.com"
			client := auth.ClientMeta{IPAddress: "203.0.113.7", UserAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				e.Clock.Advance(4 * time.Minute) // within the address's send limit
				if err := e.Auth.SendSignInCode(ctx, email, "en", ""); err != nil {
					b.Fatal(err)
				}
				code := e.Mailer.LastCode(email)
				b.StartTimer()
				if _, err := e.Auth.SignIn(ctx, auth.SignInInput{Email: email, Code: code, Client: client}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSendCode is a first send of a code to a new address: the send counted, the account's
// language read, the code made, sealed and stored and its e-mail composed and queued, in one
// transaction.
func BenchmarkSendCode(b *testing.B) {
	for _, dialect := range []string{testkit.SQLite, testkit.Postgres} {
		b.Run(dialect, func(b *testing.B) {
			e := testkit.New(b, dialect)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := e.Auth.SendSignInCode(ctx, fmt.Sprintf("send-%d@example.com", i), "en", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
