package archcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module path of the project.
const module = "codeauth"

// rooms lists, for each package of the project (a path ending in "/..." covers the packages
// under it), the project packages it may import. Data flows one way, top to bottom, as
// docs/architecture.md draws it; a package not listed here fails the test, so a new package must
// be given its place.
var rooms = map[string][]string{
	"codeauth":              {"config", "server", "auth", "models", "middleware", "mail", "handlers"},
	"codeauth/server":       {"config", "auth", "mail", "models", "middleware", "handlers/..."},
	"codeauth/config":       {"auth"},
	"codeauth/handlers/...": {"auth", "mail", "models", "middleware", "views", "static", "handlers/..."},
	"codeauth/middleware":   {"auth", "handlers/betterauth/credential"},
	"codeauth/views":        {"auth", "mail", "static"},
	"codeauth/auth":         {"mail", "models"},
	"codeauth/mail":         {"models"},
	"codeauth/models":       {},
	"codeauth/static":       {},
	"codeauth/cmd/...":      {},
	"codeauth/internal/...": {"..."},
}

// storage are the imports that reach the database directly; only models (and the test harness,
// which inspects what the service stored) may use them.
var storage = []string{"gorm.io/", "github.com/jackc/pgx", "database/sql", "github.com/glebarez/"}

// storageAllowed are the packages that may import storage.
var storageAllowed = []string{"codeauth/models", "codeauth/internal/..."}

// httpOrViews are the imports the domain (auth) and the storage (models, mail) must not use.
var httpOrViews = []string{"github.com/gofiber/", "github.com/valyala/", "github.com/a-h/templ", "net/http"}

// domainRooms must stay free of HTTP and views.
var domainRooms = []string{"codeauth/auth", "codeauth/models"}

// sqlText matches a string literal that is a SQL statement or a piece of one: a statement's
// start, a FROM … WHERE or JOIN, an upsert or RETURNING clause, or a condition with a placeholder
// as GORM's Where takes it ("id = ?"). The keywords are upper-case, as every statement here writes
// them, so prose ("Delete from your account") is not taken for SQL.
var sqlText = regexp.MustCompile(`(?s)^\s*(SELECT\s.+\sFROM\s|INSERT\s+INTO\s|DELETE\s+FROM\s|UPDATE\s+\w+\s+SET\s|WITH\s+\w+\s+AS\s*\()` +
	`|\bFROM\s+\w+(\s+\w+)?\s+(WHERE|JOIN)\s|\bON CONFLICT\b|\bRETURNING\b` +
	`|^\s*\w+(\.\w+)?\s*(=|<>|<=|>=|<|>|\bIN\b|\bLIKE\b)\s*\(?\?`)

type pkg struct {
	path    string
	imports map[string][]string // import path -> files that import it
	files   []*ast.File
	names   []string
}

// load parses the non-test Go files of every package of the project.
func load(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		ip := module
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		p := pkgs[ip]
		if p == nil {
			p = &pkg{path: ip, imports: map[string][]string{}}
			pkgs[ip] = p
		}
		p.files = append(p.files, f)
		p.names = append(p.names, filepath.Base(path))
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			p.imports[imp] = append(p.imports[imp], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pkgs["codeauth/auth"]; !ok {
		t.Fatal("found no package codeauth/auth: is the test run from internal/archcheck?")
	}
	return pkgs
}

// matches reports whether the package path p is named by pattern (a path, or a path ending in
// "/..." for it and every package under it).
func matches(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// roomOf is the entry of rooms that covers p, the most specific one.
func roomOf(p string) (string, bool) {
	best := ""
	for pattern := range rooms {
		if matches(pattern, p) && len(pattern) > len(best) {
			best = pattern
		}
	}
	return best, best != ""
}

func anyMatch(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pattern string) bool { return matches(pattern, p) })
}

func TestImportsFollowTheRooms(t *testing.T) {
	for _, p := range load(t) {
		room, ok := roomOf(p.path)
		if !ok {
			t.Errorf("%s has no room in archcheck's table: give it one (and a place in docs/architecture.md)", p.path)
			continue
		}
		for imp, files := range p.imports {
			own, isOurs := strings.CutPrefix(imp, module+"/")
			if isOurs && !anyMatch(rooms[room], own) && !anyMatch(rooms[room], "...") {
				t.Errorf("%s imports %s (%s): not a room below it", p.path, imp, strings.Join(files, ", "))
			}
			if slices.ContainsFunc(storage, func(s string) bool { return strings.HasPrefix(imp, s) }) && !anyMatch(storageAllowed, p.path) {
				t.Errorf("%s imports %s (%s): only models reaches the database", p.path, imp, strings.Join(files, ", "))
			}
			if slices.Contains(domainRooms, p.path) && slices.ContainsFunc(httpOrViews, func(s string) bool { return strings.HasPrefix(imp, s) }) {
				t.Errorf("%s imports %s (%s): the domain and the storage know nothing of HTTP or views", p.path, imp, strings.Join(files, ", "))
			}
		}
	}
}

func TestOnlyModelsWritesSQL(t *testing.T) {
	for _, p := range load(t) {
		if p.path == "codeauth/models" || matches("codeauth/internal/...", p.path) {
			continue
		}
		for i, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if s, err := strconv.Unquote(n.Value); err == nil && sqlText.MatchString(s) {
							t.Errorf("%s/%s: SQL outside models: %.60q", p.path, p.names[i], s)
						}
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "Dialector" {
						t.Errorf("%s/%s: a dialect branch outside models", p.path, p.names[i])
					}
				}
				return true
			})
		}
	}
}

// The checks must be able to fail: a package that breaks each rule is caught.
func TestTheChecksCatchABreach(t *testing.T) {
	if !sqlText.MatchString("DELETE FROM sessions WHERE id = ?") || !sqlText.MatchString(" SELECT s.id FROM sessions s") ||
		!sqlText.MatchString("INSERT INTO x (a) VALUES (?) ON CONFLICT (a) DO NOTHING") || !sqlText.MatchString("id = ?") ||
		!sqlText.MatchString(" s.id FROM sessions s JOIN users u ON u.id = s.user_id") || sqlText.MatchString("select a code") ||
		sqlText.MatchString("Delete from your account") {
		t.Fatal("sqlText does not tell SQL from prose")
	}
	if room, _ := roomOf("codeauth/auth"); anyMatch(rooms[room], "handlers/betterauth") || anyMatch(rooms[room], "views") {
		t.Fatal("auth may import the adapter or the views")
	}
	if !anyMatch(storageAllowed, "codeauth/models") || anyMatch(storageAllowed, "codeauth/auth") {
		t.Fatal("the storage rule lets auth reach the database")
	}
	if _, err := os.Stat("../../auth"); err != nil {
		t.Fatal(err)
	}
}
