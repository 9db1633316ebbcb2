// Package useragent reads a User-Agent header: the browser, the operating system and the kind of
// device it names, with the results of github.com/medama-io/go-useragent (MIT licence, copyright
// medama-io), which the service used directly until issue 19.
//
// That library builds a trie of 82,657 nodes at its first use, about 6.6 MB of small objects
// joined by pointers, which the collector marked at every cycle: 7–8 % of a sign-up flow's CPU
// (docs/performance.md). This package walks the same trie the same way, laid out flat in
// table.bin, which this package's tests make from the library's own trie (`go test
// ./auth/useragent -run TestTableIsTheLibrarys -update`). The table is embedded in the binary and
// decoded on first use, in about a millisecond, into 1 MB of arrays without pointers, which the
// collector never scans. The library is only a dependency of the tests: they hold Parse to its
// answers for a header reaching each node of the trie, for the headers of its test corpus and
// data files (120,286), for mangled, random and fuzzed ones, and fail after an upgrade that
// changes its trie until table.bin is made again. The library's licence is in LICENSE-medama.
package useragent

import (
	_ "embed"
	"encoding/binary"
	"sync"
)

// Agent is what a User-Agent header names, in the library's words. An empty field is unknown.
type Agent struct {
	// Browser is the browser's family: "Chrome", "Safari", "Edge", "Firefox", "Opera Mini", …
	Browser string
	// OS is the operating system: "Windows", "MacOS", "iOS", "Android", "Linux", "ChromeOS", …
	OS string
	// Device is "Desktop", "Mobile", "Tablet", "TV" or "Bot".
	Device string
}

// The names the library gives its findings.
const (
	// DeviceDesktop is a computer.
	DeviceDesktop = "Desktop"
	// DeviceMobile is a phone.
	DeviceMobile = "Mobile"
	// DeviceTablet is a tablet.
	DeviceTablet = "Tablet"
	// DeviceTV is a television or a box plugged into one.
	DeviceTV = "TV"
	// DeviceBot is a crawler, a preview fetcher or an HTTP library.
	DeviceBot = "Bot"
)

// match is one finding of the trie. The values are the library's own numbering, which table.bin
// stores; the tests fail if the library renumbers.
//
// Every edge of the trie is an ASCII letter (the library's token list is letters only), so the
// walk's special runes, digits and anything outside the table's 16 bits never lead anywhere.
type match uint8

const (
	unknown match = iota
	browserAndroid
	browserChrome
	browserEdge
	browserFirefox
	browserIE
	browserOpera
	browserOperaMini
	browserSafari
	browserVivaldi
	browserSamsung
	browserSilk
	browserFalkon
	browserNintendo
	browserYandex
	osAndroid
	osChromeOS
	osIOS
	osLinux
	osFreeBSD
	osOpenBSD
	osMacOS
	osWindows
	deviceDesktop
	deviceMobile
	deviceTablet
	deviceTV
	deviceBot
	tokenVersion
	tokenMobileDevice
	matchCount
)

// names are the matches' names as Agent gives them. FreeBSD has none: the library names no
// system for it, and neither does this package, so that a device's name and known-device key stay
// what they were.
var names = [matchCount]string{
	browserAndroid: "Android Browser", browserChrome: "Chrome", browserEdge: "Edge",
	browserFirefox: "Firefox", browserIE: "IE", browserOpera: "Opera", browserOperaMini: "Opera Mini",
	browserSafari: "Safari", browserVivaldi: "Vivaldi", browserSamsung: "Samsung Browser",
	browserSilk: "Amazon Silk", browserFalkon: "Falkon", browserNintendo: "Nintendo Browser",
	browserYandex: "Yandex Browser",
	osAndroid:     "Android", osChromeOS: "ChromeOS", osIOS: "iOS", osLinux: "Linux",
	osOpenBSD: "OpenBSD", osMacOS: "MacOS", osWindows: "Windows",
	deviceDesktop: DeviceDesktop, deviceMobile: DeviceMobile, deviceTablet: DeviceTablet,
	deviceTV: DeviceTV, deviceBot: DeviceBot,
}

// kind is what a match is about.
type kind uint8

const (
	kindNone kind = iota
	kindBrowser
	kindOS
	kindDevice
	kindVersion
)

func (m match) kind() kind {
	switch {
	case m >= browserAndroid && m <= browserYandex:
		return kindBrowser
	case m >= osAndroid && m <= osWindows:
		return kindOS
	case m >= deviceDesktop && m <= deviceBot, m == tokenMobileDevice:
		return kindDevice
	case m == tokenVersion:
		return kindVersion
	}
	return kindNone
}

// androidBrowserPrecedence is the precedence the library gives the Android Browser it infers from
// an Android header that named no browser before it: a mobile token's (2), above Safari's (1), so
// the "Safari" every such header ends with does not replace it, while any other browser's token
// does.
const androidBrowserPrecedence = 2

// table.bin's layout, little-endian throughout:
//
//	magic "UAT1", then the numbers of nodes N, of edges E and of results R, uint32 each;
//	N+1 nodes of 6 bytes: the first edge (uint32) and the first result (uint16), the node's edges
//	  and results running to the next node's (the last node is a sentinel); node 0 is the root;
//	E edges of 6 bytes: the rune (uint16) and the node it leads to (uint32);
//	R results of 2 bytes: the match and its precedence.
const (
	tableMagic   = "UAT1"
	headerSize   = len(tableMagic) + 3*4
	nodeSize     = 6
	edgeSize     = 6
	resultSize   = 2
	maxTableRune = 0xFFFF
)

//go:embed table.bin
var tableBytes []byte

// table is table.bin decoded, once, into arrays without pointers, which the collector does not
// scan: about 1 MB, against the library's 6.6 MB of linked nodes.
type table struct {
	// nodeEdges[n] is node n's first edge, nodeResults[n] its first result; each node's run
	// ends where the next node's begins.
	nodeEdges   []uint32
	nodeResults []uint16
	// edgeRunes[e] is edge e's label, edgeNodes[e] the node it leads to.
	edgeRunes []uint16
	edgeNodes []uint32
	// results holds each result's match and precedence, two bytes each.
	results []byte
}

// theTable decodes table.bin once. It panics on a table of the wrong shape, which the tests
// would have caught: the table is a fixed, trusted part of the binary.
var theTable = sync.OnceValue(func() *table {
	b := tableBytes
	if len(b) < headerSize || string(b[:len(tableMagic)]) != tableMagic {
		panic("useragent: table.bin is not a user-agent table")
	}
	n := int(binary.LittleEndian.Uint32(b[4:])) + 1
	e := int(binary.LittleEndian.Uint32(b[8:]))
	r := int(binary.LittleEndian.Uint32(b[12:]))
	b = b[headerSize:]
	if len(b) != n*nodeSize+e*edgeSize+r*resultSize {
		panic("useragent: table.bin has the wrong size")
	}
	t := &table{
		nodeEdges: make([]uint32, n), nodeResults: make([]uint16, n),
		edgeRunes: make([]uint16, e), edgeNodes: make([]uint32, e),
		results: b[n*nodeSize+e*edgeSize:],
	}
	for i := range n {
		t.nodeEdges[i] = binary.LittleEndian.Uint32(b[i*nodeSize:])
		t.nodeResults[i] = binary.LittleEndian.Uint16(b[i*nodeSize+4:])
	}
	b = b[n*nodeSize:]
	for i := range e {
		t.edgeRunes[i] = binary.LittleEndian.Uint16(b[i*edgeSize:])
		t.edgeNodes[i] = binary.LittleEndian.Uint32(b[i*edgeSize+2:])
	}
	if err := t.check(); err != "" {
		panic("useragent: table.bin is damaged: " + err)
	}
	return t
})

// check says what is wrong with a decoded table, so that a damaged one fails at its first use
// rather than answering wrongly or indexing out of range inside a request.
func (t *table) check() string {
	n := len(t.nodeEdges) - 1
	if n < 1 || t.nodeEdges[0] != 0 || t.nodeResults[0] != 0 ||
		int(t.nodeEdges[n]) != len(t.edgeNodes) || int(t.nodeResults[n])*resultSize != len(t.results) {
		return "its runs do not start at 0 and end at its sections' ends"
	}
	for i := range n {
		if t.nodeEdges[i] > t.nodeEdges[i+1] || t.nodeResults[i] > t.nodeResults[i+1] {
			return "its runs go backwards"
		}
	}
	for _, to := range t.edgeNodes {
		if int(to) >= n {
			return "an edge leads past the last node"
		}
	}
	for i := 0; i < len(t.results); i += resultSize {
		if match(t.results[i]) >= matchCount {
			return "a result names no match"
		}
	}
	return ""
}

// child is the node the edge labelled r leads to from node, if there is one.
func (t *table) child(node uint32, r rune) (uint32, bool) {
	if r < 0 || r > maxTableRune {
		return 0, false
	}
	from, to := t.nodeEdges[node], t.nodeEdges[node+1]
	for i, label := range t.edgeRunes[from:to] {
		if rune(label) == r {
			return t.edgeNodes[from+uint32(i)], true
		}
	}
	return 0, false
}

// mode is what the walk is doing with the header's next runes.
type mode uint8

const (
	// matching walks the trie, skipping separators and version numbers.
	matching mode = iota
	// inVersion reads the version number after a browser's name or a "Version" token: digits
	// and dots, "/" skipped, up to the first other rune, which it takes.
	inVersion
	// toSpace skips a device ID glued to a mobile token ("Mobile/14F89"), up to a space.
	toSpace
	// toParenthesis skips an Android device's model, up to the parenthesis that closes it.
	toParenthesis
)

// found is the walk's findings so far, each with the precedence of the match that set it: a
// later match of the same kind replaces it only with a higher precedence.
type found struct {
	browser, os, device                               match
	browserPrecedence, osPrecedence, devicePrecedence uint8
}

// walk is a header's walk through the trie, one rune at a time.
type walk struct {
	t    *table
	node uint32
	m    mode
	skip uint8
	// depth counts the parentheses opened inside the one toParenthesis waits for; it wraps
	// after 255 as the library's does.
	depth uint8
	// version is whether a version number has been read since the last match that wants one.
	version bool
	f       found
}

// Parse reads a User-Agent header. It allocates nothing (after the first call, which decodes the
// table).
func Parse(header string) Agent {
	w := walk{t: theTable()}
	for i, r := range header {
		next := -1
		if i+1 < len(header) {
			next = int(header[i+1])
		}
		w.step(r, next)
	}
	return Agent{Browser: names[w.f.browser], OS: names[w.f.os], Device: names[w.f.device]}
}

// step takes the header's next rune r; next is the byte after it, or -1 at the end.
func (w *walk) step(r rune, next int) {
	if w.skip > 0 {
		w.skip--
		return
	}
	switch w.m {
	case toSpace:
		if r == ' ' {
			w.m = matching
		}
	case toParenthesis:
		switch r {
		case '(':
			w.depth++
		case ')':
			if w.depth == 0 {
				w.m = matching
			} else {
				w.depth--
			}
		}
	case inVersion:
		switch {
		case r == '/':
			// Skipped anywhere in a version, as after an "Edg" that was "Edge".
		case isDigit(r) || r == '.':
			w.version = true
		default:
			// The rune that ends the version is taken by it, not matched.
			w.m = matching
		}
	case matching:
		switch r {
		case ' ', ';', ')', '(', ',', '_', '-', '/':
			return
		}
		if isDigit(r) || r == '.' && next >= 0 && isDigit(rune(next)) {
			return
		}
		t := w.t
		for j := int(t.nodeResults[w.node]); j < int(t.nodeResults[w.node+1]); j++ {
			hit, precedence := match(t.results[j*resultSize]), t.results[j*resultSize+1]
			took := w.f.add(hit, precedence)
			if took && hit.kind() == kindBrowser && hit != browserSafari ||
				hit.kind() == kindVersion && !w.version {
				// Read the version that follows, past the "/" after the name.
				w.version = false
				w.skip = 1
				w.m = inVersion
			}
			if took && hit == deviceMobile {
				w.m = toSpace
			}
			if took && hit == osAndroid {
				w.m = toParenthesis
			}
		}
		// Without an edge for r the walk stays where it is and tries the next rune.
		if child, ok := t.child(w.node, r); ok {
			w.node = child
		}
	}
}

// add takes a match if its precedence is above that of the finding of its kind so far, and says
// whether it did.
func (f *found) add(m match, precedence uint8) bool {
	switch m.kind() {
	case kindBrowser:
		if precedence <= f.browserPrecedence {
			return false
		}
		switch m {
		case browserAndroid:
			// Only ever inferred, below: no token names it.
		case browserOperaMini:
			f.browser, f.device = m, deviceMobile
		default:
			f.browser = m
		}
		f.browserPrecedence = precedence
	case kindOS:
		if precedence <= f.osPrecedence {
			return false
		}
		f.os = m
		switch m {
		case osAndroid:
			f.device = deviceMobile
			if f.browser == unknown {
				// An Android header naming no browser so far: the old stock browser.
				f.browser, f.browserPrecedence = browserAndroid, androidBrowserPrecedence
			}
		case osIOS:
			if f.device != deviceTablet {
				f.device = deviceMobile
			}
		case osLinux:
			if f.device != deviceTablet && f.device != deviceTV {
				f.device = deviceDesktop
			}
		default:
			f.device = deviceDesktop
		}
		f.osPrecedence = precedence
	case kindDevice:
		if precedence <= f.devicePrecedence {
			return false
		}
		switch m {
		case deviceMobile, tokenMobileDevice:
			if f.device != deviceTablet {
				f.device = deviceMobile
			}
		default:
			f.device = m
		}
		f.devicePrecedence = precedence
	default:
		return false
	}
	return true
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }
