package models

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// The session cases of the store conformance suite (conformance_test.go), and the fixtures of
// the session reads' tests (sessionreads_test.go).

// testNow is a time as the callers of the store hand it: UTC at the microsecond.
func testNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newHash is a random token hash, shaped as auth's (64 hex digits).
func newHash() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// addUser writes an account of email straight to the database.
func addUser(t testing.TB, db *gorm.DB, email string) User {
	t.Helper()
	at := testNow().Add(-time.Hour)
	u := User{ID: uuid.NewString(), Email: email, Name: "Someone", EmailVerified: true, CreatedAt: at, UpdatedAt: at}
	if err := db.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

// addSession writes a live session of user straight to the database, its token hash new.
func addSession(t testing.TB, db *gorm.DB, user User) Session {
	t.Helper()
	at := testNow()
	s := Session{
		ID: uuid.NewString(), Token: newHash(), UserID: user.ID,
		ExpiresAt: at.Add(24 * time.Hour), AbsoluteExpiresAt: at.Add(48 * time.Hour),
		IPAddress: "192.0.2.1", UserAgent: "test", CreatedAt: at, UpdatedAt: at,
	}
	if err := db.Create(&s).Error; err != nil {
		t.Fatal(err)
	}
	return s
}

// readSession is ReadSession into fresh values.
func readSession(t *testing.T, st *Store, hash string) (Session, User, bool) {
	t.Helper()
	var sess Session
	var user User
	found, err := st.ReadSession(context.Background(), hash, &sess, &user)
	if err != nil {
		t.Fatalf("reading the session of %q: %v", hash, err)
	}
	return sess, user, found
}

// sameTime fails the test unless got is want, in UTC.
func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("%s: got %v, want %v in UTC", what, got, want)
	}
}

// A live session is read with its user joined, every column as written and every time in UTC;
// the user's image comes back as written, present or absent. The token's hash is not read back:
// the caller has it. Expiry is the caller's rule, so an expired session is still found.
func TestStoreReadSessionJoinsItsUser(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		image := "https://example.com/me.png"
		for _, img := range []*string{nil, &image} {
			user := addUser(t, db, newHash()[:12]+"@example.com")
			if img != nil {
				if err := db.Exec("UPDATE users SET image = ? WHERE id = ?", *img, user.ID).Error; err != nil {
					t.Fatal(err)
				}
			}
			want := addSession(t, db, user)
			sess, got, found := readSession(t, st, want.Token)
			if !found {
				t.Fatal("a live session was not found")
			}
			if sess.ID != want.ID || sess.UserID != user.ID || sess.Token != "" || sess.IPAddress != want.IPAddress || sess.UserAgent != want.UserAgent {
				t.Errorf("session: got %+v, want %+v without its token", sess, want)
			}
			sameTime(t, "expires_at", sess.ExpiresAt, want.ExpiresAt)
			sameTime(t, "absolute_expires_at", sess.AbsoluteExpiresAt, want.AbsoluteExpiresAt)
			sameTime(t, "session created_at", sess.CreatedAt, want.CreatedAt)
			sameTime(t, "session updated_at", sess.UpdatedAt, want.UpdatedAt)
			if got.ID != user.ID || got.Email != user.Email || got.Name != user.Name || got.EmailVerified != user.EmailVerified || got.DeletedAt.Valid {
				t.Errorf("user: got %+v, want %+v", got, user)
			}
			if (got.Image == nil) != (img == nil) || img != nil && *got.Image != *img {
				t.Errorf("user image: got %v, want %v", got.Image, img)
			}
			sameTime(t, "user created_at", got.CreatedAt, user.CreatedAt)
			sameTime(t, "user updated_at", got.UpdatedAt, user.UpdatedAt)
		}

		expired := addSession(t, db, addUser(t, db, "expired@example.com"))
		past := testNow().Add(-time.Hour)
		if err := db.Model(&expired).Updates(map[string]any{"expires_at": past, "absolute_expires_at": past}).Error; err != nil {
			t.Fatal(err)
		}
		if sess, _, found := readSession(t, st, expired.Token); !found || !sess.ExpiresAt.Equal(past) {
			t.Errorf("an expired session: found %v, expiring %v; want it found, expiring %v", found, sess.ExpiresAt, past)
		}
	})
}

// The session of a deleted account, still within its grace period, is not found: signing in
// again restores the account, never an old session.
func TestStoreReadSessionOfADeletedUser(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		user := addUser(t, db, "leaving@example.com")
		sess := addSession(t, db, user)
		if err := db.Delete(&user).Error; err != nil { // soft: deleted_at is set
			t.Fatal(err)
		}
		if _, _, found := readSession(t, st, sess.Token); found {
			t.Fatal("the session of a deleted account was found")
		}
	})
}

// A hash that matches no session, or one signed out, is not found, without an error, and leaves
// the values alone rather than filling a zero session that happens to look expired.
func TestStoreReadSessionUnknownHash(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		gone := addSession(t, db, addUser(t, db, "someone@example.com"))
		if _, _, err := st.EndSession(context.Background(), gone.Token); err != nil {
			t.Fatal(err)
		}
		for _, hash := range []string{strings.Repeat("0", 64), "", gone.Token} {
			if sess, user, found := readSession(t, st, hash); found || sess.ID != "" || user.ID != "" {
				t.Errorf("hash %q: found %v, %+v, %+v; want nothing", hash, found, sess, user)
			}
		}
	})
}

// A refresh moves a live session's expiry and last refresh, as the next read sees; the refresh of
// a session signed out since it was read reports false, so the check refuses it.
func TestStoreRefreshSession(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		ctx := context.Background()
		sess := addSession(t, db, addUser(t, db, "returning@example.com"))
		at := testNow().Add(time.Minute)
		expires := at.Add(36 * time.Hour)
		live, err := st.RefreshSession(ctx, sess.ID, expires, at)
		if err != nil || !live {
			t.Fatalf("refreshing a live session: %v, %v; want true", live, err)
		}
		got, _, found := readSession(t, st, sess.Token)
		if !found {
			t.Fatal("the refreshed session was not found")
		}
		sameTime(t, "expires_at", got.ExpiresAt, expires)
		sameTime(t, "updated_at", got.UpdatedAt, at)
		sameTime(t, "created_at", got.CreatedAt, sess.CreatedAt)

		if err := st.DeleteSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		if live, err := st.RefreshSession(ctx, sess.ID, expires.Add(time.Hour), at.Add(time.Hour)); err != nil || live {
			t.Fatalf("refreshing a deleted session: %v, %v; want false", live, err)
		}
	})
}

// DeleteSession removes the session (an expired one, as the check finds it), and deleting it
// again is no error; other sessions of the account stay.
func TestStoreDeleteSession(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		ctx := context.Background()
		user := addUser(t, db, "two-devices@example.com")
		a, b := addSession(t, db, user), addSession(t, db, user)
		for range 2 {
			if err := st.DeleteSession(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, found := readSession(t, st, a.Token); found {
			t.Error("a deleted session was found")
		}
		if _, _, found := readSession(t, st, b.Token); !found {
			t.Error("deleting one session removed another")
		}
	})
}

// Ending a session by its token returns the session's id once: a second sign-out of the same
// token, and that of an unknown one, find nothing. The session is gone for every read after it.
func TestStoreEndSession(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, _ time.Time) {
		ctx := context.Background()
		user := addUser(t, db, "signing-out@example.com")
		sess, other := addSession(t, db, user), addSession(t, db, user)
		if id, user, err := st.EndSession(ctx, sess.Token); err != nil || id != sess.ID || user != sess.UserID {
			t.Fatalf("first sign-out: %q, %v; want %q", id, err, sess.ID)
		}
		if _, _, found := readSession(t, st, sess.Token); found {
			t.Error("a signed-out session was found")
		}
		for _, hash := range []string{sess.Token, newHash()} {
			if id, _, err := st.EndSession(ctx, hash); err != nil || id != "" {
				t.Errorf("signing out %q again: %q, %v; want nothing", hash, id, err)
			}
		}
		if _, _, found := readSession(t, st, other.Token); !found {
			t.Error("signing out one session removed another")
		}
	})
}

func TestStoreListsAndEndsAUsersSessions(t *testing.T) {
	storeEach(t, func(t *testing.T, st *Store, db *gorm.DB, now time.Time) {
		ctx := context.Background()
		u, other := addUser(t, db, "lister@x.io"), addUser(t, db, "other@x.io")
		var mine []Session
		for i := range 3 {
			s := addSession(t, db, u)
			// Distinct creation times, so newest first has an order.
			db.Model(&Session{}).Where("id = ?", s.ID).Update("created_at", now.Add(time.Duration(i)*time.Second))
			mine = append(mine, s)
		}
		theirs := addSession(t, db, other)
		expired := addSession(t, db, u)
		db.Model(&Session{}).Where("id = ?", expired.ID).Update("expires_at", now.Add(-time.Second))

		list, err := st.ListSessions(ctx, u.ID, now)
		if err != nil || len(list) != 3 || list[0].ID != mine[2].ID || list[2].ID != mine[0].ID {
			t.Fatalf("ListSessions: %v, %v; want the 3 live ones, newest first", list, err)
		}
		// Another account's session is never ended, by id or by token.
		if id, err := st.EndUserSession(ctx, u.ID, theirs.ID, "", ReasonRevoked); err != nil || id != "" {
			t.Fatalf("ending another account's session by id: %q, %v", id, err)
		}
		if id, err := st.EndUserSession(ctx, u.ID, "", theirs.Token, ReasonRevoked); err != nil || id != "" {
			t.Fatalf("ending another account's session by token: %q, %v", id, err)
		}
		if id, err := st.EndUserSession(ctx, u.ID, mine[0].ID, "", ReasonRevoked); err != nil || id != mine[0].ID {
			t.Fatalf("ending by id: %q, %v", id, err)
		}
		if id, err := st.EndUserSession(ctx, u.ID, "", mine[1].Token, ReasonRevoked); err != nil || id != mine[1].ID {
			t.Fatalf("ending by token: %q, %v", id, err)
		}
		// All but one, then the rest: the other account keeps its session throughout.
		addSession(t, db, u)
		ended, err := st.EndUserSessions(ctx, u.ID, mine[2].ID, ReasonRevoked)
		if err != nil || len(ended) != 2 {
			t.Fatalf("EndUserSessions keeping one: %v, %v; want the new and the expired one", ended, err)
		}
		if ended, err := st.EndUserSessions(ctx, u.ID, "", ReasonRevoked); err != nil || len(ended) != 1 || ended[0] != mine[2].ID {
			t.Fatalf("EndUserSessions: %v, %v", ended, err)
		}
		if n := rowCount(t, db, &Session{}); n != 1 {
			t.Fatalf("%d sessions left, want the other account's", n)
		}
	})
}
