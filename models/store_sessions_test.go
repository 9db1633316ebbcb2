package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"codeauth/models"

	"gorm.io/gorm"
)

// readSession is ReadSession into fresh values.
func readSession(t *testing.T, st *models.Store, hash string) (models.Session, models.User, bool) {
	t.Helper()
	var sess models.Session
	var user models.User
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
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
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
		past := now().Add(-time.Hour)
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
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
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
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
		gone := addSession(t, db, addUser(t, db, "someone@example.com"))
		if _, _, err := st.DeleteSessionByToken(context.Background(), gone.Token); err != nil {
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
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
		ctx := context.Background()
		sess := addSession(t, db, addUser(t, db, "returning@example.com"))
		at := now().Add(time.Minute)
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
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
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

// Deleting by token returns the session's id once: a second sign-out of the same token, and
// that of an unknown one, find nothing. The session is gone for every read after it.
func TestStoreDeleteSessionByToken(t *testing.T) {
	forEachStore(t, func(t *testing.T, st *models.Store, db *gorm.DB) {
		ctx := context.Background()
		user := addUser(t, db, "signing-out@example.com")
		sess, other := addSession(t, db, user), addSession(t, db, user)
		id, found, err := st.DeleteSessionByToken(ctx, sess.Token)
		if err != nil || !found || id != sess.ID {
			t.Fatalf("first sign-out: %q, %v, %v; want %q", id, found, err, sess.ID)
		}
		if _, _, found := readSession(t, st, sess.Token); found {
			t.Error("a signed-out session was found")
		}
		for _, hash := range []string{sess.Token, newHash()} {
			if id, found, err := st.DeleteSessionByToken(ctx, hash); err != nil || found || id != "" {
				t.Errorf("signing out %q again: %q, %v, %v; want nothing", hash, id, found, err)
			}
		}
		if _, _, found := readSession(t, st, other.Token); !found {
			t.Error("signing out one session removed another")
		}
	})
}
