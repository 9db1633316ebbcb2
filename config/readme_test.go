package config

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration table is the option table printed (`codeauth config`): a variable
// added, renamed or given another default here fails this test until the README says so too.
func TestREADMETableIsTheOptionTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const header = "| Variable | Default | Meaning |\n"
	readme := string(b)
	start := strings.Index(readme, header)
	if start < 0 {
		t.Fatalf("README.md has no configuration table (a line %q)", strings.TrimSpace(header))
	}
	// The table runs to the first line that is not a row.
	var rows []string
	for _, line := range strings.SplitAfter(readme[start:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		rows = append(rows, line)
	}
	got, want := strings.Join(rows, ""), Markdown()
	if got == want {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("README.md's configuration table differs from the options (go run . config prints them) at row %d:\n got: %s\nwant: %s", i+1, g, w)
		}
	}
}
