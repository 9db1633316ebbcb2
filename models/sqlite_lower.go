package models

import (
	"database/sql/driver"
	"strings"

	sqlitedriver "github.com/glebarez/go-sqlite"
)

// SQLite's own LOWER folds ASCII letters only, so the admin's search for "élodie" would not find
// "Élodie" there while PostgreSQL's does. LOWER is replaced, on every SQLite connection this
// process opens, with Go's Unicode case mapping, which is what the search lowers its pattern
// with (UserCondition.sql).
func init() {
	sqlitedriver.MustRegisterDeterministicScalarFunction("lower", 1, func(_ *sqlitedriver.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return strings.ToLower(v), nil
		case []byte:
			return strings.ToLower(string(v)), nil
		}
		return args[0], nil // NULL and numbers have no case
	})
}
