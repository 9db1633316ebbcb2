package deploy

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"codeauth/internal/testdb"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// scripts/fill (issue 19 #2) makes what it says, on a fresh database: here a small fill, so the
// script cannot rot between the measurements it exists for.
func TestFillScript(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("psql is required (CI=true)")
		}
		t.Skip("psql is not installed")
	}
	base := testdb.Base(t)
	admin := testdb.Admin(t)
	// Through a pooler the database is reached directly for this: the script uses psql.
	if os.Getenv("TEST_DATABASE_POOLER") != "" {
		t.Skip("the fill script talks to PostgreSQL itself, not through the pooler")
	}
	name := "codeauth_fill_test_" + strconv.Itoa(os.Getpid())
	admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	q.Del("default_query_exec_mode")
	u.RawQuery = q.Encode()
	root, _ := filepath.Abs("..")
	cmd := exec.Command(filepath.Join(root, "scripts", "fill"), u.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "USERS=300", "OUTBOX=500")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/fill: %v\n%s", err, out)
	}
	db, err := gorm.Open(postgres.Open(u.String()), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	for table, want := range map[string]int64{"users": 300, "user_data": 300, "sessions": 900, "verifications": 300, "outbox": 500} {
		var n int64
		db.Raw("SELECT count(*) FROM " + table).Scan(&n)
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	var expired int64
	db.Raw("SELECT count(*) FROM sessions WHERE expires_at < now()").Scan(&expired)
	if expired != 300 {
		t.Errorf("%d expired sessions, want a third of 900", expired)
	}
}
