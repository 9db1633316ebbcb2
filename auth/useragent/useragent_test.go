package useragent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	medama "github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/data"
)

var update = flag.Bool("update", false, "write table.bin from the library's trie")

// library is the parser whose answers this package gives.
var library = medama.NewParser()

// buildTable lays the library's trie out as table.bin does (see the layout in useragent.go),
// reading its nodes by reflection: breadth first from the root, so a node's edges sit together
// and each node's number is known when its parent's edges are written.
func buildTable() ([]byte, error) {
	var nodes, edges, results []byte
	queue := []reflect.Value{reflect.ValueOf(library.Trie).Elem()}
	for at := 0; at < len(queue); at++ {
		n := queue[at]
		nodes = binary.LittleEndian.AppendUint32(nodes, uint32(len(edges)/edgeSize))
		nodes = binary.LittleEndian.AppendUint16(nodes, uint16(len(results)/resultSize))
		rs := n.FieldByName("result")
		for i := range rs.Len() {
			r := rs.Index(i)
			m, typ, precedence := r.FieldByName("Match").Uint(), r.FieldByName("Type").Uint(), r.FieldByName("Precedence").Uint()
			// The library numbers its match types after its matches; the walk derives the
			// type from the match, so both must still agree.
			if m >= uint64(matchCount) || typ != uint64(matchCount)+uint64(match(m).kind()) || precedence > 255 {
				return nil, fmt.Errorf("node %d: result (match %d, type %d, precedence %d) is not one this package knows", at, m, typ, precedence)
			}
			results = append(results, byte(m), byte(precedence))
		}
		kids := n.FieldByName("childrenArr")
		for i := range kids.Len() {
			kid := kids.Index(i)
			r := kid.FieldByName("r").Int()
			if r < 0 || r > maxTableRune {
				return nil, fmt.Errorf("node %d: rune %U does not fit table.bin's layout", at, r)
			}
			edges = binary.LittleEndian.AppendUint16(edges, uint16(r))
			edges = binary.LittleEndian.AppendUint32(edges, uint32(len(queue)))
			queue = append(queue, kid.FieldByName("node").Elem())
		}
	}
	// The sentinel closes the last node's edges and results; every offset written is at most its.
	if len(queue) > 1<<32-1 || len(edges)/edgeSize > 1<<32-1 || len(results)/resultSize > 1<<16-1 {
		return nil, fmt.Errorf("the trie has outgrown table.bin's layout")
	}
	nodes = binary.LittleEndian.AppendUint32(nodes, uint32(len(edges)/edgeSize))
	nodes = binary.LittleEndian.AppendUint16(nodes, uint16(len(results)/resultSize))

	out := []byte(tableMagic)
	for _, n := range []int{len(queue), len(edges) / edgeSize, len(results) / resultSize} {
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
	}
	return append(append(append(out, nodes...), edges...), results...), nil
}

// table.bin is the library's trie, as the library of go.mod builds it: an upgrade that changes
// the trie fails here until the table is made again with -update. (The other tests of the run
// that writes it still read the table compiled in: run them again after.)
func TestTableIsTheLibrarys(t *testing.T) {
	built, err := buildTable()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("table.bin", built, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote table.bin, %d bytes", len(built))
		return
	}
	if !bytes.Equal(built, tableBytes) {
		t.Fatalf("table.bin (%d bytes) is not the trie of the library in go.mod (%d bytes): run go test ./auth/useragent -run TestTableIsTheLibrarys -update", len(tableBytes), len(built))
	}
}

// agree fails t if Parse and the library read header differently.
func agree(t *testing.T, header string) bool {
	t.Helper()
	lib := library.Parse(header)
	want := Agent{Browser: string(lib.Browser()), OS: string(lib.OS()), Device: string(lib.Device())}
	if got := Parse(header); got != want {
		t.Errorf("Parse(%q) = %+v, the library says %+v", header, got, want)
		return false
	}
	return true
}

// corpus is the library's own test corpus: its test cases and the headers of its data folder.
func corpus(t *testing.T) []string {
	t.Helper()
	headers := make([]string, 0, 120_000)
	for _, tc := range data.AllTestCases {
		headers = append(headers, tc.UserAgent)
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/medama-io/go-useragent").Output()
	if err != nil {
		t.Fatalf("finding the library's source: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "data", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the library's corpus is not in %s: %v", dir, err)
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(f)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			headers = append(headers, lines.Text())
		}
		f.Close()
		if err := lines.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return headers
}

// Every header of the library's corpus reads as the library reads it, so no device's name or
// known-device key changed when the service moved off the library's trie.
func TestParseAgreesWithTheLibrary(t *testing.T) {
	headers := corpus(t)
	if len(headers) < 100_000 {
		t.Fatalf("the corpus has %d headers, fewer than the library ships", len(headers))
	}
	failed := 0
	for _, h := range headers {
		if !agree(t, h) {
			if failed++; failed == 20 {
				t.Fatal("stopping after 20 disagreements")
			}
		}
	}
	t.Logf("%d headers agree", len(headers))
}

// Headers no one sent before, made by cutting, repeating and splicing the corpus's and by putting
// in the runes the walk treats specially, read as the library reads them too.
func TestParseAgreesOnMangledHeaders(t *testing.T) {
	headers := corpus(t)
	rng := new(splitmix)
	specials := []string{"(", ")", "((", "/", " ", ";", ".", "5", "..", "-", "_", "Mobile", "Android", "Version/", "Chrome/", "Safari", "\xff", "é", "日本", "\u2028"}
	failed := 0
	for range 200_000 {
		h := headers[rng.IntN(len(headers))]
		for range 1 + rng.IntN(4) {
			i, j := rng.IntN(len(h)+1), rng.IntN(len(h)+1)
			if i > j {
				i, j = j, i
			}
			switch rng.IntN(4) {
			case 0: // cut
				h = h[:i] + h[j:]
			case 1: // repeat a piece
				h = h[:j] + h[i:j] + h[j:]
			case 2: // splice in a piece of another header
				o := headers[rng.IntN(len(headers))]
				k := rng.IntN(len(o) + 1)
				h = h[:i] + o[k:k+min(len(o)-k, rng.IntN(40))] + h[i:]
			case 3:
				h = h[:i] + specials[rng.IntN(len(specials))] + h[i:]
			}
		}
		if !agree(t, h) {
			if failed++; failed == 20 {
				t.Fatal("stopping after 20 disagreements")
			}
		}
	}
}

// Parenthesis nesting past 255 wraps in the library's counter; the walk wraps the same way.
func TestParseAgreesOnDeepParentheses(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 512, 600} {
		header := "Mozilla/5.0 (Linux; Android 14; Pixel 8" + strings.Repeat("(", n) + "))) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
		agree(t, header)
		// The walk leaves the device model after 256 parentheses as after none, and reads Chrome.
		if n%256 == 0 && Parse(header).Browser != "Chrome" {
			t.Errorf("after %d parentheses: %+v", n, Parse(header))
		}
	}
}

// splitmix is a fixed sequence of numbers for TestParseAgreesOnMangledHeaders (SplitMix64), the
// same on every run; nothing here is a secret.
type splitmix uint64

// IntN is a number in [0, n).
func (s *splitmix) IntN(n int) int {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) % uint64(n))
}

// feed steps w through s, and appends s to header.
func (w *walk) feed(header *strings.Builder, s string) {
	for _, r := range s {
		w.step(r, -1)
		header.WriteRune(r)
	}
}

// settle writes what brings w back to matching, with nothing to skip: "!" ends a version and is
// skipped, a space ends a device ID, a ")" closes a device's model.
func (w *walk) settle(header *strings.Builder) {
	for w.skip > 0 || w.m != matching {
		switch {
		case w.skip > 0 || w.m == inVersion:
			w.feed(header, "!")
		case w.m == toSpace:
			w.feed(header, " ")
		default:
			w.feed(header, ")")
		}
	}
}

// A header's answer depends only on the nodes its walk passes and the results they fire, so the
// trie is covered whole by one header reaching each of its 82,657 nodes, each read as is and with
// a rune more, which fires that node's results. (Found by a review: three changes to the walk's
// modes that the corpus and the mangled headers missed fail here.)
func TestParseAgreesAtEveryNode(t *testing.T) {
	type reached struct {
		w      walk
		header string
	}
	tb := theTable()
	queue := []reached{{w: walk{t: tb}}}
	failed := 0
	for at := 0; at < len(queue); at++ {
		it := queue[at]
		for _, h := range []string{it.header, it.header + "!"} {
			if !agree(t, h) {
				if failed++; failed == 20 {
					t.Fatal("stopping after 20 disagreements")
				}
			}
		}
		for e := tb.nodeEdges[it.w.node]; e < tb.nodeEdges[it.w.node+1]; e++ {
			w := it.w
			var header strings.Builder
			header.WriteString(it.header)
			w.feed(&header, string(rune(tb.edgeRunes[e])))
			if w.node != tb.edgeNodes[e] {
				t.Fatalf("the walk at node %d did not follow the edge %q", it.w.node, rune(tb.edgeRunes[e]))
			}
			w.settle(&header)
			queue = append(queue, reached{w: w, header: header.String()})
		}
	}
	if n := len(tb.nodeEdges) - 1; len(queue) != n {
		t.Fatalf("reached %d of %d nodes", len(queue), n)
	}
}

// Headers that tell apart walks differing only in a mode's rules (found by the review's mutants):
// a "/" inside a version, the rune that ends a version, what ends a device ID, "," as a
// separator.
func TestParseAgreesOnTheModesCorners(t *testing.T) {
	for _, h := range []string{
		"Chrome//Mobile",
		"Opera_/.Linuxlike,TVTrident;NTé",
		"SAMSUNG-GT-E2202 Opera/9.80 (J2ME/MIDP; Opera /Mini/4.4.32208/37.6334; U; en) Presto/2.12.423 Version/12.16",
		"Mozilla/5.0 (Mobile;;rv:32.0) Gecko/32.0 Firefox/32.0",
		"Mozilla/5.0 (Mobile;\trv:32.0) Gecko/32.0 Firefox/32.0",
		"Mozilla/5.0 (compatible; MSI,E 10.0; Windows NT 6.2; Trident/6.0)",
		"BuildiGecko,",
	} {
		agree(t, h)
	}
}

// tokens are the words and separators of user agents, which random headers are made of.
var tokens = []string{"Mozilla", "Linux", "Android", "Mobile", "Chrome", "CriOS", "Version", "Opera", "Mini", "OPR", "Safari",
	"AppleWebKit", "KHTML", "like", "Gecko", "Firefox", "iPad", "iPhone", "iPod", "CPU", "OS", "Mac", "X", "Macintosh", "Intel",
	"Edg", "Edge", "EdgiOS", "Windows", "NT", "Win", "x", "Trident", "MSIE", "compatible", "SamsungBrowser", "YaBrowser", "Tablet", "TV",
	"SMART", "bot", "Googlebot", "Presto", "J2ME", "MIDP", "U", "en", "wv", "Build", "CrOS", "Kindle", "Silk", "Touch", "LG", "Galaxy",
	"/", "//", " ", ";", "(", ")", ",", ".", "5", "9.1", ".5", "\xff", "é", "\t", "_", "-", "\U0001F600", "((", "))", "/.", "a", "n", "e", "i"}

// Headers made of random runs of user agents' words and separators read as the library reads them.
func TestParseAgreesOnTokenHeaders(t *testing.T) {
	rng := new(splitmix)
	failed := 0
	for range 300_000 {
		var h strings.Builder
		for range 1 + rng.IntN(30) {
			h.WriteString(tokens[rng.IntN(len(tokens))])
		}
		if !agree(t, h.String()) {
			if failed++; failed == 20 {
				t.Fatal("stopping after 20 disagreements")
			}
		}
	}
}

// The Android Browser the walk infers takes a mobile token's precedence, as the table stores it.
func TestAndroidBrowserPrecedenceIsAMobileTokens(t *testing.T) {
	tb := theTable()
	seen := false
	for i := 0; i < len(tb.results); i += resultSize {
		if match(tb.results[i]) == deviceMobile {
			seen = true
			if tb.results[i+1] != androidBrowserPrecedence {
				t.Fatalf("the table gives Mobile precedence %d, the walk %d", tb.results[i+1], androidBrowserPrecedence)
			}
		}
	}
	if !seen {
		t.Fatal("the table has no Mobile result")
	}
}

// A damaged table is refused at its first use, not walked.
func TestTableCheckRefusesDamage(t *testing.T) {
	good := theTable()
	if err := good.check(); err != "" {
		t.Fatalf("table.bin: %s", err)
	}
	for name, damage := range map[string]func(t *table){
		"a run backwards":    func(t *table) { t.nodeEdges[5], t.nodeEdges[6] = t.nodeEdges[6]+1, t.nodeEdges[5] },
		"an edge too far":    func(t *table) { t.edgeNodes[3] = uint32(len(t.nodeEdges)) },
		"a result unknown":   func(t *table) { t.results[0] = byte(matchCount) },
		"a section too long": func(t *table) { t.edgeNodes = append(t.edgeNodes, 1) },
	} {
		bad := table{
			nodeEdges: slices.Clone(good.nodeEdges), nodeResults: slices.Clone(good.nodeResults),
			edgeRunes: slices.Clone(good.edgeRunes), edgeNodes: slices.Clone(good.edgeNodes),
			results: slices.Clone(good.results),
		}
		damage(&bad)
		if bad.check() == "" {
			t.Errorf("%s: check found nothing", name)
		}
	}
}

// FuzzParseTokens builds headers of user agents' words, where the trie has paths to follow.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte{0, 56, 1, 57, 2, 59, 60, 3, 56, 4, 56, 66})
	f.Add([]byte{4, 56, 56, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h strings.Builder
		for _, c := range b {
			h.WriteString(tokens[int(c)%len(tokens)])
		}
		agree(t, h.String())
	})
}

func FuzzParse(f *testing.F) {
	for _, tc := range data.AllTestCases {
		f.Add(tc.UserAgent)
	}
	f.Fuzz(func(t *testing.T, header string) {
		agree(t, header)
		if !utf8.ValidString(header) {
			agree(t, strings.ToValidUTF8(header, "\uFFFD"))
		}
	})
}

func TestParseAllocatesNothing(t *testing.T) {
	h := data.AllTestCases[0].UserAgent
	if n := testing.AllocsPerRun(100, func() { _ = Parse(h) }); n != 0 {
		t.Errorf("Parse allocates %v times", n)
	}
}

func BenchmarkParse(b *testing.B) {
	h := data.AllTestCases[0].UserAgent
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			_ = Parse(h)
		}
	})
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			_ = library.Parse(h)
		}
	})
}
