package models

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// The store conformance suite: each case runs on SQLite and on PostgreSQL (forEachStore), through
// the store's methods, and checks what they wrote with plain reads. The rules that use these
// methods are tested in auth; these cases pin down what each method promises.

// storeEach runs fn with a store on a fresh database of each kind (forEachStore), its GORM handle
// for setting up and reading rows, and the time its rows use.
func storeEach(t *testing.T, fn func(t *testing.T, s *Store, db *gorm.DB, now time.Time)) {
	forEachStore(t, func(t *testing.T, s *Store, _ func() *Store) {
		fn(t, s, s.db, time.Now().UTC().Truncate(time.Microsecond))
	})
}

// code is a sign-in code row for email, created at now.
func testCode(email string, now time.Time) Verification {
	return Verification{ID: uuid.NewString(), Purpose: "sign-in", Subject: email, Email: email,
		CodeHash: "hash-" + uuid.NewString(), ExpiresAt: now.Add(5 * time.Minute), CreatedAt: now}
}

// mail is an outbox row to to, queued at now.
func testMail(to, supersede string, now time.Time) OutboxMessage {
	return OutboxMessage{ID: uuid.NewString(), Kind: "sign-in-code", Recipient: to, Supersede: supersede,
		Payload: []byte("sealed"), Status: "pending", NextAttemptAt: now, CreatedAt: now}
}

func rowCount(t *testing.T, db *gorm.DB, model any, where ...any) int64 {
	t.Helper()
	var n int64
	q := db.Unscoped().Model(model)
	if len(where) > 0 {
		q = q.Where(where[0], where[1:]...)
	}
	if err := q.Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStoreCountsInWindowsAndReportsLocks(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		c := Count{Key: "send:a", ResetAt: now.Add(time.Minute), Now: now, LockKey: "fail:a", MaxFailures: 2}
		for want := 1; want <= 3; want++ {
			got, err := s.Count(ctx, c)
			if err != nil || got.Count != want || !got.ResetAt.Equal(now.Add(time.Minute)) || got.Locked {
				t.Fatalf("count %d: got %+v, %v", want, got, err)
			}
		}
		// Past its window the counter starts again at 1, with the new window.
		later := c
		later.Now, later.ResetAt = now.Add(time.Minute), now.Add(2*time.Minute)
		if got, err := s.Count(ctx, later); err != nil || got.Count != 1 || !got.ResetAt.Equal(later.ResetAt) {
			t.Fatalf("after the window: got %+v, %v", got, err)
		}
		// Two failures lock the address while their window lasts.
		for range 2 {
			if _, err := s.Count(ctx, Count{Key: "fail:a", ResetAt: now.Add(time.Hour), Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.Count(ctx, c); err != nil || !got.Locked {
			t.Fatalf("locked: got %+v, %v", got, err)
		}
		row, err := s.Counter(ctx, "fail:a")
		if err != nil || row.Count != 2 {
			t.Fatalf("Counter: %+v, %v", row, err)
		}
		if _, err := s.Counter(ctx, "fail:none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a missing counter: %v, want ErrNotFound", err)
		}
	})
}

func TestStoreIssuesCodesWithinTheLimitOnly(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		send := func(lockKey string) (Counted, bool) {
			t.Helper()
			issued, err := s.IssueCode(ctx, SendCode{
				Count: Count{Key: "send:b", ResetAt: now.Add(time.Minute), Now: now, LockKey: lockKey, MaxFailures: 1},
				Limit: 2, Code: testCode("b@x.io", now), Mail: func(string) (OutboxMessage, error) { return testMail("b@x.io", "sign-in-code:b@x.io", now), nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			return issued.Counted, issued.Stored
		}
		for i := 1; i <= 2; i++ {
			if c, stored := send(""); !stored || c.Count != i {
				t.Fatalf("send %d: %+v, stored %v", i, c, stored)
			}
		}
		// One live code and one pending e-mail: each send replaced the one before.
		if n, m := rowCount(t, db, &Verification{}), rowCount(t, db, &OutboxMessage{}); n != 1 || m != 1 {
			t.Fatalf("%d codes and %d e-mails, want 1 and 1", n, m)
		}
		if c, stored := send(""); stored || c.Count != 3 {
			t.Fatalf("past the limit: %+v, stored %v", c, stored)
		}
		// A lock refuses the send, however many are left.
		db.Create(&AuthThrottle{Key: "fail:b", Count: 1, ResetAt: now.Add(time.Hour), UpdatedAt: now})
		db.Where("key = ?", "send:b").Delete(&AuthThrottle{})
		if c, stored := send("fail:b"); stored || !c.Locked || c.Count != 1 {
			t.Fatalf("locked: %+v, stored %v", c, stored)
		}
	})
}

func TestStoreSpendsAttemptsWithinTheBudget(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		v := testCode("c@x.io", now)
		if err := db.Create(&v).Error; err != nil {
			t.Fatal(err)
		}
		attempt := Attempt{Purpose: "sign-in", Subject: "c@x.io", Email: "c@x.io", MaxAttempts: 2, Now: now,
			LockKey: "fail:c", MaxFailures: 10, FailureResetAt: now.Add(time.Hour)}
		// An attempt naming another address spends nothing and counts nothing.
		other := attempt
		other.Email = "d@x.io"
		if a, err := s.SpendAttempt(ctx, other); err != nil || a != nil {
			t.Fatalf("another address: %+v, %v", a, err)
		}
		for i := 1; i <= 2; i++ {
			a, err := s.SpendAttempt(ctx, attempt)
			if err != nil || a == nil || a.ID != v.ID || a.Attempts != i || a.CodeHash != v.CodeHash || a.Failures != i ||
				!a.FailuresResetAt.Equal(now.Add(time.Hour)) {
				t.Fatalf("attempt %d: %+v, %v", i, a, err)
			}
		}
		if a, err := s.SpendAttempt(ctx, attempt); err != nil || a != nil {
			t.Fatalf("past the budget: %+v, %v", a, err)
		}
		got, err := s.Code(ctx, "sign-in", "c@x.io", "c@x.io")
		if err != nil || got.Attempts != 2 {
			t.Fatalf("Code: %+v, %v", got, err)
		}
		if first, err := s.MarkCodeExhausted(ctx, v.ID); err != nil || !first {
			t.Fatalf("first exhaustion: %v, %v", first, err)
		}
		if first, err := s.MarkCodeExhausted(ctx, v.ID); err != nil || first {
			t.Fatalf("second exhaustion: %v, %v", first, err)
		}
		// A locked address spends nothing on a fresh code either.
		w := testCode("e@x.io", now)
		db.Create(&w)
		db.Create(&AuthThrottle{Key: "fail:e", Count: 10, ResetAt: now.Add(time.Hour), UpdatedAt: now})
		locked := attempt
		locked.Subject, locked.Email, locked.LockKey = "e@x.io", "e@x.io", "fail:e"
		if a, err := s.SpendAttempt(ctx, locked); err != nil || a != nil {
			t.Fatalf("locked: %+v, %v", a, err)
		}
		if n := rowCount(t, db, &Verification{}, "id = ? AND attempts = 0", w.ID); n != 1 {
			t.Fatal("a locked address's code lost an attempt")
		}
	})
}

// signIn is the SignIn of a fresh account for email with the code v.
func testSignIn(email string, v Verification, now time.Time) SignIn {
	id := uuid.NewString()
	return SignIn{
		Fresh:      User{ID: id, Email: email, Name: "N", EmailVerified: true, CreatedAt: now, UpdatedAt: now},
		UserData:   UserData{ID: uuid.NewString(), UserID: id, IsTrialEligible: true, CreatedAt: now, UpdatedAt: now},
		Code:       v,
		FailureKey: "fail:" + email,
		Session: Session{ID: uuid.NewString(), Token: uuid.NewString(), ExpiresAt: now.Add(time.Hour),
			AbsoluteExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now},
		Welcome:     testMail(email, "", now),
		GraceCutoff: now.Add(-24 * time.Hour),
		Now:         now,
	}
}

func TestStoreCompletesSignInsOnce(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		db.Create(&Purchase{ID: uuid.NewString(), Email: "f@x.io", Product: "p", PurchasedAt: now, CreatedAt: now})
		db.Create(&AuthThrottle{Key: "fail:f@x.io", Count: 3, ResetAt: now.Add(time.Hour), UpdatedAt: now})
		v := testCode("f@x.io", now)
		db.Create(&v)
		in := testSignIn("f@x.io", v, now)
		done, err := s.CompleteSignIn(ctx, in)
		if err != nil || !done.Created || done.User.ID != in.Fresh.ID {
			t.Fatalf("sign-up: %+v, %v", done, err)
		}
		for what, n := range map[string]int64{
			"session":          rowCount(t, db, &Session{}, "id = ? AND user_id = ?", in.Session.ID, in.Fresh.ID),
			"user data":        rowCount(t, db, &UserData{}, "user_id = ?", in.Fresh.ID),
			"linked purchase":  rowCount(t, db, &Purchase{}, "user_id = ?", in.Fresh.ID),
			"welcome e-mail":   rowCount(t, db, &OutboxMessage{}),
			"no code":          1 - rowCount(t, db, &Verification{}),
			"no failure count": 1 - rowCount(t, db, &AuthThrottle{}),
		} {
			if n != 1 {
				t.Errorf("%s: %d", what, n)
			}
		}
		if ok, err := s.SessionExists(ctx, in.Session.ID); err != nil || !ok {
			t.Fatalf("SessionExists: %v, %v", ok, err)
		}
		// The code is gone: the same sign-in again loses, and writes nothing.
		again := testSignIn("f@x.io", v, now)
		if _, err := s.CompleteSignIn(ctx, again); !errors.Is(err, ErrLost) {
			t.Fatalf("a used code: %v, want ErrLost", err)
		}
		if n := rowCount(t, db, &Session{}); n != 1 {
			t.Fatalf("%d sessions after a lost sign-in", n)
		}
		// A new code signs the existing account in: not created, no welcome.
		w := testCode("f@x.io", now)
		db.Create(&w)
		done, err = s.CompleteSignIn(ctx, testSignIn("f@x.io", w, now))
		if err != nil || done.Created || done.User.ID != in.Fresh.ID {
			t.Fatalf("sign-in: %+v, %v", done, err)
		}
		// Only the sign-up queued its welcome.
		if n := rowCount(t, db, &OutboxMessage{}); n != 1 {
			t.Fatalf("%d e-mails queued, want the one welcome", n)
		}
	})
}

func TestStoreSignInRestoresOrPurgesDeletedAccounts(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		for _, tc := range []struct {
			email     string
			deletedAt time.Time
			restored  bool
		}{
			{"in-grace@x.io", now.Add(-time.Hour), true},
			{"past-grace@x.io", now.Add(-48 * time.Hour), false},
		} {
			old := User{ID: uuid.NewString(), Email: tc.email, Name: "Old", EmailVerified: true, CreatedAt: now, UpdatedAt: now,
				DeletedAt: gorm.DeletedAt{Time: tc.deletedAt, Valid: true}}
			db.Create(&old)
			v := testCode(tc.email, now)
			db.Create(&v)
			done, err := s.CompleteSignIn(ctx, testSignIn(tc.email, v, now))
			if err != nil {
				t.Fatal(err)
			}
			if tc.restored {
				if done.Created || done.User.ID != old.ID || done.User.DeletedAt.Valid || rowCount(t, db, &User{}, "id = ? AND deleted_at IS NULL", old.ID) != 1 {
					t.Errorf("%s: %+v, want the old account restored", tc.email, done)
				}
			} else if !done.Created || done.User.ID == old.ID || rowCount(t, db, &User{}, "id = ?", old.ID) != 0 {
				t.Errorf("%s: %+v, want the old account purged and a new one", tc.email, done)
			}
			// A new account is welcomed; a restored one is not.
			if n, want := rowCount(t, db, &OutboxMessage{}, "recipient = ?", tc.email), map[bool]int64{true: 0, false: 1}[tc.restored]; n != want {
				t.Errorf("%s: %d welcomes, want %d", tc.email, n, want)
			}
		}
	})
}

func TestStoreMovesAndRestoresAddresses(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		u := User{ID: uuid.NewString(), Email: "old@x.io", Name: "U", EmailVerified: true, CreatedAt: now, UpdatedAt: now}
		taken := User{ID: uuid.NewString(), Email: "taken@x.io", Name: "T", EmailVerified: true, CreatedAt: now, UpdatedAt: now}
		db.Create(&u)
		db.Create(&taken)
		sessions := make([]Session, 3)
		for i := range sessions {
			sessions[i] = Session{ID: uuid.NewString(), Token: uuid.NewString(), UserID: u.ID, ExpiresAt: now.Add(time.Hour),
				AbsoluteExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
			db.Create(&sessions[i])
		}
		change := func(newEmail string, v Verification) (User, []string, error) {
			link := Verification{ID: uuid.NewString(), Purpose: "email-restore", Subject: u.ID + ":old@x.io", Email: "old@x.io",
				CodeHash: "r", ExpiresAt: now.Add(time.Hour), CreatedAt: now}
			return s.ApplyEmailChange(ctx, EmailChange{UserID: u.ID, OldEmail: "old@x.io", NewEmail: newEmail, Code: v,
				KeepSession: sessions[0].ID, PendingPurposes: []string{"change-email", "change-email-link"}, FailureKeys: []string{"fail:" + newEmail},
				RestoreLink: link, Notice: testMail("old@x.io", "", now), Now: now})
		}
		v := Verification{ID: uuid.NewString(), Purpose: "change-email", Subject: u.ID, Email: "taken@x.io", CodeHash: "h",
			ExpiresAt: now.Add(time.Hour), CreatedAt: now}
		db.Create(&v)
		if _, _, err := change("taken@x.io", v); !errors.Is(err, ErrAddressTaken) {
			t.Fatalf("a taken address: %v, want ErrAddressTaken", err)
		}
		if n := rowCount(t, db, &Verification{}, "id = ?", v.ID); n != 1 {
			t.Fatal("a refused change consumed its code")
		}
		v.Email = "new@x.io"
		db.Save(&v)
		user, revoked, err := change("new@x.io", v)
		if err != nil || user.Email != "new@x.io" || len(revoked) != 2 {
			t.Fatalf("change: %+v, %v, %v", user, revoked, err)
		}
		if n := rowCount(t, db, &Session{}, "user_id = ?", u.ID); n != 1 {
			t.Fatalf("%d sessions left, want the kept one", n)
		}
		// The code is used: the same change again is lost (the address moved too).
		if _, _, err := change("new@x.io", v); !errors.Is(err, ErrLost) {
			t.Fatalf("a used code: %v, want ErrLost", err)
		}
		link, err := s.CodeByID(ctx, mustRestoreLink(t, db, u.ID).ID, "email-restore")
		if err != nil {
			t.Fatal(err)
		}
		restore := EmailRestore{UserID: u.ID, Email: "old@x.io", Code: link, RestorePurpose: "email-restore",
			PendingPurposes: []string{"change-email", "change-email-link"}, GraceCutoff: now.Add(-time.Hour), Now: now}
		before, revoked, err := s.RestoreEmail(ctx, restore)
		if err != nil || before.Email != "new@x.io" || len(revoked) != 1 {
			t.Fatalf("restore: %+v, %v, %v", before, revoked, err)
		}
		if got, err := s.User(ctx, u.ID); err != nil || got.Email != "old@x.io" {
			t.Fatalf("after the restore: %+v, %v", got, err)
		}
		if _, _, err := s.RestoreEmail(ctx, restore); !errors.Is(err, ErrLost) {
			t.Fatalf("a used restore link: %v, want ErrLost", err)
		}
	})
}

func mustRestoreLink(t *testing.T, db *gorm.DB, userID string) Verification {
	t.Helper()
	var v Verification
	if err := db.Where("purpose = ? AND subject = ?", "email-restore", userID+":old@x.io").Take(&v).Error; err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStoreDeletesAndPurgesAccounts(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		u := User{ID: uuid.NewString(), Email: "g@x.io", Name: "G", EmailVerified: true, CreatedAt: now, UpdatedAt: now}
		db.Create(&u)
		sess := Session{ID: uuid.NewString(), Token: uuid.NewString(), UserID: u.ID, ExpiresAt: now.Add(time.Hour),
			AbsoluteExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
		db.Create(&sess)
		db.Create(&Verification{ID: uuid.NewString(), Purpose: "email-restore", Subject: u.ID + ":h@x.io", Email: "h@x.io",
			CodeHash: "r", ExpiresAt: now.Add(time.Hour), CreatedAt: now})
		db.Create(&Verification{ID: uuid.NewString(), Purpose: "change-email", Subject: u.ID, Email: "i@x.io",
			CodeHash: "c", ExpiresAt: now.Add(time.Hour), CreatedAt: now})
		deletion := AccountDeletion{UserID: u.ID, SessionID: sess.ID, RestorePurpose: "email-restore", Now: now,
			Notices: func(user User, links []Verification) ([]OutboxMessage, error) {
				if user.Email != "g@x.io" || len(links) != 1 || links[0].Email != "h@x.io" {
					t.Errorf("notices for %+v and %+v", user, links)
				}
				return []OutboxMessage{testMail(user.Email, "", now), testMail(links[0].Email, "", now)}, nil
			}}
		revoked, err := s.DeleteAccount(ctx, deletion)
		if err != nil || len(revoked) != 1 || revoked[0] != sess.ID {
			t.Fatalf("delete: %v, %v", revoked, err)
		}
		if rowCount(t, db, &OutboxMessage{}) != 2 || rowCount(t, db, &Verification{}) != 1 || rowCount(t, db, &Session{}) != 0 {
			t.Fatal("the deletion did not end the sessions, drop the change code and keep the restore link, and queue two notices")
		}
		// Its session ended: the same deletion again finds nothing to delete from.
		if _, err := s.DeleteAccount(ctx, deletion); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a deletion from an ended session: %v, want ErrNotFound", err)
		}
		if n, err := s.PurgeDeleted(ctx, now.Add(-time.Second)); err != nil || n != 0 {
			t.Fatalf("a purge before the cutoff: %d, %v", n, err)
		}
		if n, err := s.PurgeDeleted(ctx, now); err != nil || n != 1 {
			t.Fatalf("the purge: %d, %v", n, err)
		}
		if rowCount(t, db, &User{}) != 0 || rowCount(t, db, &Verification{}) != 0 {
			t.Fatal("the purge left the account or its links")
		}
	})
}

func TestStorePrunesOnlyExpiredRowsInBatches(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		for i := range 5 {
			expiry := now.Add(-time.Second)
			if i == 4 {
				expiry = now.Add(time.Minute)
			}
			db.Create(&AuthThrottle{Key: uuid.NewString(), Count: 1, ResetAt: expiry, UpdatedAt: now})
		}
		var total int64
		for _, want := range []int64{2, 2, 0} {
			n, err := s.PruneCounters(ctx, now, 2)
			if err != nil || n != want {
				t.Fatalf("a batch deleted %d (%v), want %d", n, err, want)
			}
			total += n
		}
		if total != 4 || rowCount(t, db, &AuthThrottle{}) != 1 {
			t.Fatal("the prune did not delete exactly the expired counters")
		}
	})
}

// Catalogue R1 (performance that holds as the tables churn): codes are deleted once used, so
// VACUUM finds their table nearly empty. It keeps the table's pages (vacuum_truncate off), and
// the generic plans a prepared statement keeps for the rest of its connection's life, made right
// after such a VACUUM, find a code through an index, not by reading the table, which fills with
// dead rows until the next VACUUM.
func TestStoreCodesArePlannedWithIndexesAfterAVacuum(t *testing.T) {
	storeEach(t, func(t *testing.T, s *Store, db *gorm.DB, now time.Time) {
		if !s.postgres {
			t.Skip("SQLite plans from its indexes, not from measured statistics")
		}
		// As a burst of sign-ins leaves it: every code used, and deleted.
		if err := db.Exec(`INSERT INTO verifications (id, purpose, subject, email, code_hash, attempts, exhausted, expires_at, created_at)
 SELECT gen_random_uuid(), 'sign-in', 'u' || g || '@x.io', 'u' || g || '@x.io', 'hash', 0, false, now(), now() FROM generate_series(1, 3000) g`).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("DELETE FROM verifications").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("VACUUM ANALYZE verifications").Error; err != nil {
			t.Fatal(err)
		}
		var pages int64
		if err := db.Raw("SELECT relpages FROM pg_class WHERE oid = 'verifications'::regclass").Scan(&pages).Error; err != nil || pages == 0 {
			t.Fatalf("the codes' table after VACUUM: %d pages (%v); want its pages kept", pages, err)
		}
		for what, st := range map[string]struct{ query, args string }{
			"the live-code check":  {liveCodeQuery, `'sign-in', 'a@x.io', 'a@x.io', 3, now()`},
			"an attempt":           {spendAndReserveQuery, `'sign-in', 'a@x.io', 'a@x.io', 3, now(), '', '', 'fail:a', 10, now(), 'fail:a', now(), now(), now(), now()`},
			"a code's consumption": {"DELETE FROM verifications WHERE id = ? AND code_hash = ?", `gen_random_uuid(), 'hash'`},
		} {
			var plan []string
			err := db.Transaction(func(tx *gorm.DB) error {
				for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE planned AS " + parse(st.query).numbered} {
					if err := tx.Exec(stmt).Error; err != nil {
						return err
					}
				}
				defer tx.Exec("DEALLOCATE planned")
				return tx.Raw("EXPLAIN EXECUTE planned(" + st.args + ")").Scan(&plan).Error
			})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			text := strings.Join(plan, "\n")
			if strings.Contains(text, "Seq Scan on verifications") || !strings.Contains(text, "Index Scan") {
				t.Errorf("%s is planned\n%s\nwant an index scan", what, text)
			}
		}
	})
}
