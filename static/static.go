// Package static holds the pages' assets, embedded in the binary so `go run .` needs no Node:
// the built Tailwind CSS, the vendored htmx, the small script of the code input, the logo and the
// Inter font. Each asset is hashed at start and compressed once, when first asked for (so starting
// stays fast), linked with its hash in the query string and served with a one-year immutable cache
// lifetime. A stylesheet's url(/static/NAME) references get their asset's hash the same way.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
)

//go:embed *.css *.js *.svg *.woff2
var files embed.FS

// Asset is one embedded file; its compressed forms are made on first use.
type Asset struct {
	Name        string
	ContentType string
	Hash        string
	Raw         []byte
	// Precompressed says the file is compressed already (a font): it is sent as it is.
	Precompressed bool
	compressed    sync.Once
	gzip          []byte
	brotli        []byte
}

// compress makes the gzip and brotli forms.
func (a *Asset) compress() {
	a.compressed.Do(func() {
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(a.Raw)
		zw.Close()
		a.gzip = gz.Bytes()
		var br bytes.Buffer
		bw := brotli.NewWriterLevel(&br, brotli.BestCompression)
		bw.Write(a.Raw)
		bw.Close()
		a.brotli = br.Bytes()
	})
}

var assets = load()

func load() map[string]*Asset {
	out := map[string]*Asset{}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	// Stylesheets last: they name the other assets, with their hashes.
	sort.SliceStable(entries, func(i, j int) bool {
		return path.Ext(entries[i].Name()) != ".css" && path.Ext(entries[j].Name()) == ".css"
	})
	for _, e := range entries {
		raw, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		ext := path.Ext(e.Name())
		if ext == ".css" {
			raw = linkAssets(raw, out)
		}
		sum := sha256.Sum256(raw)
		a := &Asset{
			Name:        e.Name(),
			ContentType: mime.TypeByExtension(ext),
			Hash:        hex.EncodeToString(sum[:6]),
			Raw:         raw,
		}
		if ext == ".woff2" {
			a.ContentType, a.Precompressed = "font/woff2", true
		}
		if a.ContentType == "" {
			a.ContentType = "application/octet-stream"
		}
		out[e.Name()] = a
	}
	return out
}

// linkAssets gives each url(/static/NAME) of a stylesheet the hash of the asset it names.
func linkAssets(css []byte, known map[string]*Asset) []byte {
	for name, a := range known {
		css = bytes.ReplaceAll(css, []byte("url(/static/"+name+")"), []byte("url("+a.url()+")"))
	}
	return css
}

// Get returns the asset called name, or nil.
func Get(name string) *Asset { return assets[name] }

// URL is the address of the asset called name, with its content hash, so that a new build is
// fetched at once while an unchanged file stays cached for a year. It panics for an unknown
// name: a page linking a missing asset is a programming error, caught by any test of the page.
func URL(name string) string {
	a := assets[name]
	if a == nil {
		panic("static: no asset " + name)
	}
	return a.url()
}

// url is the asset's address with its content hash.
func (a *Asset) url() string { return "/static/" + a.Name + "?v=" + a.Hash }

// Pick chooses the encoding for an Accept-Encoding header: the body to send and the
// Content-Encoding to name ("" for none).
func (a *Asset) Pick(acceptEncoding string) ([]byte, string) {
	switch {
	case a.Precompressed:
		return a.Raw, ""
	case accepts(acceptEncoding, "br"):
		a.compress()
		return a.brotli, "br"
	case accepts(acceptEncoding, "gzip"):
		a.compress()
		return a.gzip, "gzip"
	}
	return a.Raw, ""
}

// accepts reports whether an Accept-Encoding header allows coding (a q of 0 refuses it).
func accepts(header, coding string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), coding) {
			continue
		}
		params = strings.TrimSpace(params)
		if q, ok := strings.CutPrefix(params, "q="); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
			return err == nil && v > 0
		}
		return true
	}
	return false
}
