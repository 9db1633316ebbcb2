// Package i18n holds the words of the pages and e-mails in every language the service speaks,
// and what depends on the language around them: plural forms (CLDR's rules, through
// github.com/nicksnyder/go-i18n/v2), dates, durations and device names, and the choice of a
// language for a request.
//
// The messages are TOML files embedded in the binary, one per language (locales/<code>.toml),
// English being the reference every other file must match key for key. Each language is built
// once, when the package loads: its Localizer, and every message that needs no values already
// rendered, so a page's plain words cost a map lookup and no request builds anything.
//
// Only the pages and the e-mails are localised: the JSON API's messages are better-auth's wire
// contract and stay English, and so do the admin pages.
package i18n

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"github.com/nicksnyder/go-i18n/v2/i18n/template"
	"golang.org/x/text/language"
)

//go:embed locales/*.toml
var localeFiles embed.FS

// Reference is the language whose file defines the keys: every other file has exactly its keys.
// A message missing in another language would fall back to it.
const Reference = "en"

// Locale is one language of the service, built once: its messages and the way it writes dates,
// durations and device names.
type Locale struct {
	code string
	tag  language.Tag
	name string
	dir  string
	loc  *goi18n.Localizer
	// plain are the messages that take no values and have no plural forms, rendered once.
	plain map[string]string
	// months are the month names, January first.
	months [12]string
	// counted caches the plural messages Tn renders with no values but their count: the
	// durations of e-mails ("in 10 minutes"), a handful of counts each, asked for on every send.
	counted sync.Map // countedKey → string
}

// countedKey is a plural message and its count.
type countedKey struct {
	id string
	n  int
}

// maxCounted bounds the counts Tn caches, so the cache holds a few hundred entries at most.
const maxCounted = 100

// Code is the language's code, as the language switch, the cookie and the account store it
// ("de").
func (l *Locale) Code() string { return l.code }

// Tag is the language's BCP 47 tag.
func (l *Locale) Tag() language.Tag { return l.tag }

// Name is the language's name in itself ("Deutsch"), as the language switch shows it.
func (l *Locale) Name() string { return l.name }

// Dir is the direction of its script, "ltr" or "rtl", for the dir attribute of pages and e-mails.
func (l *Locale) Dir() string { return l.dir }

// parser renders messages with values; a value a message names but the caller did not give is
// an error (and the message's key is shown), never the text "<no value>". It has no functions, so
// go-i18n parses each message once and keeps it.
var parser = &template.TextParser{Option: "missingkey=error"}

// T is the message id, for a message that takes no values. An unknown id gives the id itself, so
// a mistake shows on the page rather than an empty space (the tests keep every id used defined).
func (l *Locale) T(id string) string {
	if s, ok := l.plain[id]; ok {
		return s
	}
	return l.Tf(id, nil)
}

// Tf is the message id with the values data fills in ({{.Email}} in the message is data["Email"]).
func (l *Locale) Tf(id string, data map[string]any) string {
	s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: data, TemplateParser: parser})
	if err != nil {
		return id
	}
	return s
}

// Tn is the plural message id in the form the language uses for n, with n as {{.Count}} and
// the other values of data.
func (l *Locale) Tn(id string, n int, data map[string]any) string {
	cacheable := len(data) == 0 && n >= 0 && n <= maxCounted
	if cacheable {
		if s, ok := l.counted.Load(countedKey{id, n}); ok {
			return s.(string)
		}
	}
	values := make(map[string]any, len(data)+1)
	for k, v := range data {
		values[k] = v
	}
	values["Count"] = n
	s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, PluralCount: n, TemplateData: values, TemplateParser: parser})
	if err != nil {
		return id
	}
	if cacheable {
		l.counted.Store(countedKey{id, n}, s)
	}
	return s
}

// All are the service's languages, ordered by code.
func All() []*Locale { return locales }

// Lookup is the language of code (case does not matter), or false when the service does not
// speak it.
func Lookup(code string) (*Locale, bool) {
	for _, l := range locales {
		if strings.EqualFold(l.code, code) {
			return l, true
		}
	}
	return nil, false
}

// English is the reference language: the admin pages' and the fallback of every other.
func English() *Locale {
	l, _ := Lookup(Reference)
	return l
}

// Codes are the codes of every language, for messages that list them ("de, en, es, fr").
func Codes() []string {
	out := make([]string, len(locales))
	for i, l := range locales {
		out[i] = l.code
	}
	return out
}

var locales = load()

// monthKeys are the keys of the month names, January first.
var monthKeys = [12]string{"date.month_1", "date.month_2", "date.month_3", "date.month_4", "date.month_5", "date.month_6",
	"date.month_7", "date.month_8", "date.month_9", "date.month_10", "date.month_11", "date.month_12"}

// Files are the embedded message files by language code, for the tests that compare them.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	names, err := fs.Glob(localeFiles, "locales/*.toml")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := localeFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(path.Base(name), ".toml")] = b
	}
	return out, nil
}

// load parses every message file into one bundle and builds each language. The files are part of
// the binary, so a broken one is a programming error: it panics, and every test fails with it.
func load() []*Locale {
	b := goi18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	files, err := Files()
	if err != nil {
		panic(err)
	}
	var ids []string
	var out []*Locale
	for code, data := range files {
		mf, err := b.ParseMessageFileBytes(data, code+".toml")
		if err != nil {
			panic(fmt.Sprintf("i18n: locales/%s.toml: %v", code, err))
		}
		if code == Reference {
			for _, m := range mf.Messages {
				if m.One == "" && m.Many == "" && !strings.Contains(m.Other, "{{") {
					ids = append(ids, m.ID)
				}
			}
		}
		out = append(out, &Locale{code: code, tag: mf.Tag})
	}
	slices.SortFunc(out, func(a, b *Locale) int { return strings.Compare(a.code, b.code) })
	for _, l := range out {
		l.loc = goi18n.NewLocalizer(b, l.code)
		l.plain = make(map[string]string, len(ids))
		for _, id := range ids {
			s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateParser: parser})
			if err == nil && !strings.Contains(s, "{{") {
				l.plain[id] = s
			}
		}
		l.name, l.dir = l.T("meta.name"), l.T("meta.dir")
		for i, id := range monthKeys {
			l.months[i] = l.T(id)
		}
	}
	return out
}
