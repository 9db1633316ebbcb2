// Package testdb gives tests a PostgreSQL schema of their own in the TEST_DATABASE_URL database.
// It imports nothing of the project, so the tests inside models use it as well as the harness
// (internal/testkit), which builds on models.
package testdb

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

var (
	adminOnce sync.Once
	adminDB   *gorm.DB
	adminErr  error
)

// Base is TEST_DATABASE_URL. Without it the test is skipped, or fails under CI=true, where every
// test runs on PostgreSQL too.
func Base(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is not set: CI runs every test on PostgreSQL too (use scripts/test)")
		}
		t.Skip("TEST_DATABASE_URL is not set; run scripts/test to include PostgreSQL")
	}
	return base
}

// Admin is a connection to the TEST_DATABASE_URL database as its own user, for what a test does
// to the server around the service: schemas, roles, ending backends.
func Admin(t testing.TB) *gorm.DB {
	t.Helper()
	base := Base(t)
	adminOnce.Do(func() {
		adminDB, adminErr = gorm.Open(postgres.Open(base), &gorm.Config{Logger: logger.Discard})
	})
	if adminErr != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", adminErr)
	}
	return adminDB
}

// PostgresURL creates a schema of its own for one test in the TEST_DATABASE_URL database and
// returns a URL whose connections use it. The schema is dropped when the test ends.
//
// Behind a pooler in transaction mode (TEST_DATABASE_POOLER=transaction: scripts/test runs the
// PostgreSQL suite once more through PgBouncer), a search_path in the URL would be lost: PgBouncer
// passes on only the startup parameters it tracks. There the test gets a role of its own instead,
// whose default search_path is its schema, and the URL names that role: the pooler keeps a pool
// per role, so no other test's connections see the schema.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := Base(t)
	admin := Admin(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	if os.Getenv("TEST_DATABASE_POOLER") == "transaction" {
		for _, stmt := range []string{
			"CREATE ROLE " + schema + " LOGIN",
			"CREATE SCHEMA " + schema + " AUTHORIZATION " + schema,
			"ALTER ROLE " + schema + " SET search_path = " + schema,
		} {
			if err := admin.Exec(stmt).Error; err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		t.Cleanup(func() {
			admin.Exec("DROP SCHEMA " + schema + " CASCADE")
			admin.Exec("DROP ROLE " + schema)
		})
		u.User = url.User(schema)
		return u.String()
	}
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
