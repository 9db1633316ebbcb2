package static

import (
	"strings"
	"testing"
)

// The stylesheet names the font with its content hash, so the font is cached for a year and a
// new one is fetched at once; the font is sent as it is (woff2 is compressed already).
func TestStylesheetLinksTheFontByHash(t *testing.T) {
	css, font := Get("app.css"), Get("inter.woff2")
	if css == nil || font == nil {
		t.Fatal("app.css or inter.woff2 is not embedded")
	}
	if want := "url(" + URL("inter.woff2") + ")"; !strings.Contains(string(css.Raw), want) {
		t.Fatalf("app.css does not link %s", want)
	}
	if strings.Contains(string(css.Raw), "url(/static/inter.woff2)") {
		t.Fatal("app.css still links the font without its hash")
	}
	if body, enc := font.Pick("br, gzip"); enc != "" || len(body) != len(font.Raw) || font.ContentType != "font/woff2" {
		t.Fatalf("the font is sent as %q (%d bytes, %s), want as it is", enc, len(body), font.ContentType)
	}
}
