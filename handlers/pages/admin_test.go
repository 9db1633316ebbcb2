package pages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// An audit event's detail reads as words on an account's admin page, whatever it holds.
func TestAuditDetail(t *testing.T) {
	cases := map[string]string{
		`{}`: "",
		`{"method":"email-otp","new_device":false}`:                                 "method email-otp · new device no",
		`{"expires":"2026-03-08T12:00:00.123Z","reason":"spam","sessions_ended":2}`: "expires 2026-03-08 12:00 UTC · reason spam · sessions ended 2",
		`{"expires":null,"reason":"Spam"}`:                                          "expires none · reason Spam",
		`{"by":"admin","sessions":["a1","b2"]}`:                                     "by admin · sessions a1, b2",
		`{"impersonated":true,"nested":{"k":1}}`:                                    `impersonated yes · nested {"k":1}`,
		`not json`:                                                                  "not json",
		`{"purge_at":"2026-04-01T00:00:00+02:00"}`:                                  "purge at 2026-03-31 22:00 UTC",
	}
	for in, want := range cases {
		if got := auditDetail(in); got != want {
			t.Errorf("auditDetail(%s) = %q, want %q", in, got, want)
		}
	}
}

// Every action the audit log records (the string constants of auth/audit.go named Audit…) has
// its words on the admin page.
func TestAuditWordsCoverEveryAction(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../../auth/audit.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, decl := range file.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !strings.HasPrefix(name.Name, "Audit") || !ok || lit.Kind != token.STRING {
					continue
				}
				n++
				if action, _ := strconv.Unquote(lit.Value); auditWords[action] == "" {
					t.Errorf("no words for %s (%s)", name.Name, action)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d actions in auth/audit.go", n)
	}
}
