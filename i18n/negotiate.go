package i18n

import (
	"strings"

	"golang.org/x/text/language"
)

// Negotiator chooses the language of a request: the one the person chose with the language
// switch (a cookie), else the best the browser's Accept-Language asks for, else the service's
// default (AUTH_DEFAULT_LOCALE). It is built once; choosing allocates only to read the header.
type Negotiator struct {
	def     *Locale
	matcher language.Matcher
}

// NewNegotiator returns the negotiator whose last resort is def.
func NewNegotiator(def *Locale) *Negotiator {
	tags := make([]language.Tag, len(locales))
	for i, l := range locales {
		tags[i] = l.tag
	}
	return &Negotiator{def: def, matcher: language.NewMatcher(tags)}
}

// Default is the service's default language.
func (n *Negotiator) Default() *Locale { return n.def }

// Choose is the language for a request whose switch cookie says chosen (a code, or "") and whose
// Accept-Language header is accept.
func (n *Negotiator) Choose(chosen, accept string) *Locale {
	if chosen != "" {
		if l, ok := Lookup(chosen); ok {
			return l
		}
	}
	return n.Accept(accept)
}

// Accept is the best language for an Accept-Language header ("de-CH, fr;q=0.8, en;q=0.5" gives
// German), or the default when it asks for none the service speaks.
func (n *Negotiator) Accept(header string) *Locale {
	header = strings.TrimSpace(header)
	if header == "" || len(header) > maxAcceptLanguage {
		return n.def
	}
	tags, _, err := language.ParseAcceptLanguage(header)
	if err != nil || len(tags) == 0 {
		return n.def
	}
	_, i, confidence := n.matcher.Match(tags...)
	if confidence == language.No {
		return n.def
	}
	return locales[i]
}

// maxAcceptLanguage is the longest Accept-Language header read; a longer one is no browser's and
// gets the default without being parsed.
const maxAcceptLanguage = 512
