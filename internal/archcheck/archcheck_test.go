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
	"codeauth":                                {"config", "server", "auth", "middleware", "models"},
	"codeauth/server":                         {"config", "auth", "mail", "models", "middleware", "handlers", "metrics"},
	"codeauth/metrics":                        {"auth", "middleware", "models", "lograte"},
	"codeauth/config":                         {"auth", "mail", "i18n"},
	"codeauth/handlers":                       {"auth", "middleware", "static", "i18n", "handlers/betterauth", "handlers/betterauth/credential", "handlers/pages"},
	"codeauth/handlers/betterauth":            {"auth", "middleware", "models", "handlers/betterauth/credential"},
	"codeauth/handlers/betterauth/credential": {"auth"},
	"codeauth/handlers/pages":                 {"auth", "middleware", "views", "static", "i18n"},
	"codeauth/middleware":                     {"auth", "handlers/betterauth/credential", "i18n"},
	"codeauth/views":                          {"auth", "static", "i18n"},
	"codeauth/auth":                           {"mail", "models", "i18n", "auth/useragent", "lograte"},
	"codeauth/auth/useragent":                 {},
	"codeauth/mail":                           {"models", "i18n", "lograte"},
	"codeauth/models":                         {},
	"codeauth/static":                         {},
	"codeauth/i18n":                           {},
	"codeauth/lograte":                        {},
	"codeauth/cmd/...":                        {},
	"codeauth/internal/...":                   {"..."},
}

// storage are the imports that reach the database directly; only models (and the test harness,
// which inspects what the service stored) may use them.
var storage = []string{"gorm.io/", "github.com/jackc/pgx", "database/sql", "github.com/glebarez/"}

// storageAllowed are the packages that may import storage.
var storageAllowed = []string{"codeauth/models", "codeauth/internal/..."}

// httpOrViews are the imports the domain (auth) and the storage (models) must not use. (mail may:
// its provider client speaks HTTP.)
var httpOrViews = []string{"github.com/gofiber/", "github.com/valyala/", "github.com/a-h/templ", "net/http"}

// domainRooms must stay free of HTTP and views.
var domainRooms = []string{"codeauth/auth", "codeauth/models"}

// sqlText matches a string that is a SQL statement or a piece of one, in any case: a statement's
// start, a FROM … WHERE or JOIN, an upsert or RETURNING clause, or a condition with a placeholder
// as GORM's Where takes it ("id = ?"). Each pattern asks for SQL's own structure (a table name
// after FROM, a parenthesis after INSERT INTO …, a placeholder), so prose ("Delete from your
// account") is not taken for SQL. Strings are checked whole: a statement written as a sum of
// literals and constants is folded first (fold).
var sqlText = regexp.MustCompile(`(?is)^\s*(select\s.+?\sfrom\s+\w+|insert\s+into\s+\w+\s*\(|delete\s+from\s+\w+\s*(\swhere\s|$)` +
	`|update\s+\w+\s+set\s+\w+\s*=|with\s+\w+\s+as\s*\()` +
	`|(?is)\bfrom\s+\w+(\s+\w+)?\s+(where\s+\w+(\.\w+)?\s*(=|<|>|in\b|is\b|like\b)|join\s+\w+)` +
	`|(?i)\bon\s+conflict\s*(\(|on\b|do\b)|(?i)\breturning\s+(\*|\w+\s*(,|$))` +
	`|(?i)^\s*\w+(\.\w+)?\s*(=|<>|<=|>=|<|>|\bin\b|\blike\b)\s*\(?\?`)

// storageCalls are the methods of models.Store that hand out the database itself; only models
// and the test harness call them.
var storageCalls = []string{"DB"}

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

// consts are the string values of a package's constants, by name, as far as fold can work them
// out.
type consts map[string]string

// constsOf folds the string constants (and string variables set once at package level) of p.
func constsOf(p *pkg) consts {
	c := consts{}
	for changed := true; changed; {
		changed = false
		for _, f := range p.files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						if _, done := c[name.Name]; done {
							continue
						}
						if v, ok := c.fold(vs.Values[i]); ok {
							c[name.Name], changed = v, true
						}
					}
				}
			}
		}
	}
	return c
}

// fold is the string value of e when it is a string literal, a constant of the package, or a sum
// of those.
func (c consts) fold(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := c[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return c.fold(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := c.fold(e.X)
		if !ok {
			return "", false
		}
		y, ok := c.fold(e.Y)
		return x + y, ok
	}
	return "", false
}

func TestOnlyModelsWritesSQL(t *testing.T) {
	for _, p := range load(t) {
		if p.path == "codeauth/models" || matches("codeauth/internal/...", p.path) {
			continue
		}
		c := constsOf(p)
		for i, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit, *ast.BinaryExpr, *ast.Ident:
					if s, ok := c.fold(n.(ast.Expr)); ok && sqlText.MatchString(s) {
						t.Errorf("%s/%s: SQL outside models: %.60q", p.path, p.names[i], s)
						return false
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "Dialector" {
						t.Errorf("%s/%s: a dialect branch outside models", p.path, p.names[i])
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 0 && slices.Contains(storageCalls, sel.Sel.Name) {
						t.Errorf("%s/%s: %s() hands out the database: only models and the test harness call it", p.path, p.names[i], sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// The checks must be able to fail: a package that breaks each rule is caught.
func TestTheChecksCatchABreach(t *testing.T) {
	for _, sql := range []string{"DELETE FROM sessions WHERE id = ?", "delete from sessions where user_id = ?", " SELECT s.id FROM sessions s",
		"insert into x (a) values (?)", "INSERT INTO x (a) VALUES (?) ON CONFLICT (a) DO NOTHING", "id = ?", "token in ?",
		" s.id FROM sessions s JOIN users u ON u.id = s.user_id", "update users set email = ?", "UPDATE x SET a = 1 RETURNING id"} {
		if !sqlText.MatchString(sql) {
			t.Errorf("sqlText misses %q", sql)
		}
	}
	for _, prose := range []string{"select a code", "Delete from your account", "Sign in to update your settings", "a code from us",
		"returning the favour", "on conflict, the newer wins", "What is your e-mail address?"} {
		if sqlText.MatchString(prose) {
			t.Errorf("sqlText takes prose for SQL: %q", prose)
		}
	}
	// A statement split over literals and constants is folded before it is checked.
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", `package x
const table = " FROM sessions"
const q = "DELETE" + table + " WHERE user_id = ?"`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := constsOf(&pkg{files: []*ast.File{f}})["q"]; !ok || !sqlText.MatchString(q) {
		t.Errorf("the split statement folds to %q, %v, and is not caught", q, ok)
	}
	if room, _ := roomOf("codeauth/auth"); anyMatch(rooms[room], "handlers/betterauth") || anyMatch(rooms[room], "views") {
		t.Fatal("auth may import the adapter or the views")
	}
	if room, _ := roomOf("codeauth/handlers/pages"); anyMatch(rooms[room], "handlers/betterauth") || anyMatch(rooms[room], "models") {
		t.Fatal("the pages may import the JSON adapter or the storage")
	}
	if !anyMatch(storageAllowed, "codeauth/models") || anyMatch(storageAllowed, "codeauth/auth") {
		t.Fatal("the storage rule lets auth reach the database")
	}
	if _, err := os.Stat("../../auth"); err != nil {
		t.Fatal(err)
	}
}
