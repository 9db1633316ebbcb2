package mail

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"codeauth/i18n"
)

// The e-mail templates. Each kind of e-mail has three parts in each language: a subject line
// (<kind>.<locale>.subject), an HTML body (<kind>.<locale>.html) and its plain-text alternative
// (<kind>.<locale>.txt); one layout (layout.html) frames every HTML body. They are embedded, and
// an operator may replace any of them from a folder (EMAIL_TEMPLATES_DIR) by a file of the same
// name, or of the name without the language (<kind>.html) for every language at once; a file
// naming its language wins over one that does not.
//
// Templates hold text and {{placeholders}}: the values of the e-mail ({{otp}},
// {{verificationUrl}}, …) and the site's ({{site_name}}, {{site_url}}, {{logo_url}}), each escaped
// for its part when it is filled in. Every template is checked when it loads (at start, so a
// broken one stops the service before it sends anything): a placeholder the kind has no value
// for, a {{ that does not close, a value the e-mail exists to carry that is missing (the code of
// a code e-mail, the link of a link e-mail), a file that cannot be read or is not UTF-8, a file
// name that names no template. The error names the file and the line.

//go:embed templates/*
var templateFiles embed.FS

// The parts of an e-mail, which are the extensions of its templates' files.
const (
	partSubject = "subject"
	partHTML    = "html"
	partText    = "txt"
)

var parts = []string{partSubject, partHTML, partText}

// layoutName is the layout's file name without its extension; layoutPart is its one part.
const layoutName = "layout"

// contentSlot is the layout's {{content}}, the one placeholder filled with HTML: the rendered
// body, which the escaping of the values leaves alone.
const contentSlot = "content"

// siteVars are the placeholders every template may use, filled from the Composer.
var siteVars = []string{"site_name", "site_url", "logo_url"}

// layoutVars are the layout's own placeholders: the body, and the language of the e-mail for the
// html element's lang and dir.
var layoutVars = []string{contentSlot, "lang", "dir"}

// kindSpec is what the templates of a kind may use and must contain.
type kindSpec struct {
	// vars are the kind's own values, which its Composer method fills.
	vars []string
	// required are the values its HTML body and its text must each show: what the e-mail
	// exists to carry.
	required []string
}

// kinds are the kinds of e-mail with their values.
var kinds = map[Kind]kindSpec{
	KindSignInCode:           {vars: []string{"otp", "expiresIn"}, required: []string{"otp"}},
	KindSignInCodeLink:       {vars: []string{"otp", "expiresIn", "signInUrl"}, required: []string{"otp", "signInUrl"}},
	KindChangeEmailCode:      {vars: []string{"otp", "expiresIn"}, required: []string{"otp"}},
	KindChangeEmailLink:      {vars: []string{"verificationUrl", "oldEmail", "within"}, required: []string{"verificationUrl"}},
	KindEmailChanged:         {vars: []string{"newEmail", "restoreUrl", "within"}, required: []string{"restoreUrl"}},
	KindWelcome:              {},
	KindAccountDeleted:       {vars: []string{"deleteDate", "signInUrl"}, required: []string{"deleteDate"}},
	KindFormerAddressDeleted: {vars: []string{"currentEmail", "deleteDate", "restoreUntil"}, required: []string{"restoreUntil"}},
	KindNewDevice:            {vars: []string{"device", "when", "ip", "devicesUrl", "unseenFor"}, required: []string{"device"}},
	KindSignInPaused:         {vars: []string{"failures", "until", "signInUrl"}, required: []string{"until"}},
}

// Kinds are the kinds of e-mail the service sends, in a fixed order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// text is a template's text split at its placeholders, once, when the templates load: rendering
// is then one pass that copies literals and writes values into a buffer of the right size.
type text struct {
	parts []part
	size  int // the literals' length
	// file is where it came from, for errors: an operator's file, or the embedded name.
	file string
}

// part is a literal (name "") or a placeholder, with the line it is on.
type part struct {
	lit, name string
	line      int
}

// template is one kind of e-mail in one language: its three parts.
type template struct {
	subject, html, text text
}

// Templates are the e-mail templates of every kind in every language, checked: the embedded
// ones, with an operator's replacements. LoadTemplates makes them.
type Templates struct {
	byKind map[Kind]map[string]template
	// layouts are the layout by language.
	layouts map[string]text
	// dir is the folder the replacements came from, "" for none.
	dir string
}

// Dir is the folder of the operator's templates, or "" when every template is the embedded one.
func (t *Templates) Dir() string { return t.dir }

// embedded are the templates built into the binary. They are checked like an operator's: a
// broken one panics here, and every test fails with it.
var embedded = func() *Templates {
	t, err := LoadTemplates("")
	if err != nil {
		panic(err)
	}
	return t
}()

// source is one file the templates are read from.
type source struct {
	// name is the file's name, the key that says which template it is.
	name string
	// path is where it is, for errors.
	path string
	read func() ([]byte, error)
}

// LoadTemplates reads the embedded templates and, when dir is not "", the operator's
// replacements in it, and checks them all. Every problem is reported, each with its file and,
// where it has one, its line.
func LoadTemplates(dir string) (*Templates, error) {
	files := map[string]source{}
	entries, err := fs.ReadDir(templateFiles, "templates")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		files[name] = source{name: name, path: "mail/templates/" + name, read: func() ([]byte, error) {
			return templateFiles.ReadFile("templates/" + name)
		}}
	}
	var errs []error
	overrides := map[string]source{}
	if dir != "" {
		overrides, errs = readDir(dir)
	}
	t := &Templates{byKind: map[Kind]map[string]template{}, layouts: map[string]text{}, dir: dir}
	parsed := map[string]text{}
	// pick is the source of the file name for locale: the operator's for that language, the
	// operator's for every language, or the embedded one.
	pick := func(base, locale, ext string) (text, bool) {
		candidates := []string{base + "." + locale + "." + ext, base + "." + ext}
		for _, name := range candidates {
			if src, ok := overrides[name]; ok {
				return parseOnce(parsed, src, &errs)
			}
		}
		for _, name := range candidates {
			if src, ok := files[name]; ok {
				return parseOnce(parsed, src, &errs)
			}
		}
		errs = append(errs, fmt.Errorf("mail/templates: no %s.%s.%s is built in", base, locale, ext))
		return text{}, false
	}
	for _, l := range i18n.All() {
		code := l.Code()
		if layout, ok := pick(layoutName, code, partHTML); ok {
			errs = append(errs, check(layout, layoutName, append(slices.Clone(siteVars), layoutVars...), []string{contentSlot})...)
			t.layouts[code] = layout
		}
		for _, k := range Kinds() {
			spec := kinds[k]
			known := append(slices.Clone(siteVars), spec.vars...)
			var tpl template
			for _, p := range parts {
				x, ok := pick(string(k), code, p)
				if !ok {
					continue
				}
				var required []string
				if p != partSubject {
					required = spec.required
				}
				errs = append(errs, check(x, string(k), known, required)...)
				switch p {
				case partSubject:
					tpl.subject = trimSubject(x)
				case partHTML:
					tpl.html = x
				case partText:
					tpl.text = x
				}
			}
			if t.byKind[k] == nil {
				t.byKind[k] = map[string]template{}
			}
			t.byKind[k][code] = tpl
		}
	}
	// Each problem once: a file used by several languages is checked for each.
	errs = slices.CompactFunc(sortErrors(errs), func(a, b error) bool { return a.Error() == b.Error() })
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// sortErrors orders errors by their text, so a file's problems come together and in line order.
func sortErrors(errs []error) []error {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// readDir lists the operator's templates in dir by name. A file with a template's extension
// whose name is no template is an error (a misspelt name would otherwise be ignored, and the
// built-in text sent); other files (a README, images) and folders are left alone.
func readDir(dir string) (map[string]source, []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", dir, unwrapPathError(err))}
	}
	out := map[string]source{}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		ext := strings.TrimPrefix(filepath.Ext(name), ".")
		if e.IsDir() || strings.HasPrefix(name, ".") || !slices.Contains(parts, ext) {
			continue
		}
		path := filepath.Join(dir, name)
		if !templateName(name) {
			errs = append(errs, fmt.Errorf("%s: not a template's name: use <kind>.<part> or <kind>.<language>.<part>, "+
				"with a kind among %s, layout.html, a language among %s, and a part among %s",
				path, strings.Join(kindNames(), ", "), strings.Join(i18n.Codes(), ", "), strings.Join(parts, ", ")))
			continue
		}
		out[name] = source{name: name, path: path, read: func() ([]byte, error) { return os.ReadFile(path) }}
	}
	return out, errs
}

// templateName reports whether name names a template: <kind>[.<locale>].<part>, or the layout's
// layout[.<locale>].html.
func templateName(name string) bool {
	ext := strings.TrimPrefix(filepath.Ext(name), ".")
	base := strings.TrimSuffix(name, "."+ext)
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		if _, ok := i18n.Lookup(base[i+1:]); !ok || base[i+1:] != strings.ToLower(base[i+1:]) {
			return false
		}
		base = base[:i]
	}
	if base == layoutName {
		return ext == partHTML
	}
	_, ok := kinds[Kind(base)]
	return ok
}

func kindNames() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, string(k))
	}
	return out
}

// unwrapPathError keeps an *fs.PathError's cause: the message names the path once already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseOnce parses src, once however many languages use it; a file that cannot be read or
// parsed adds its error to errs (once) and reports false.
func parseOnce(parsed map[string]text, src source, errs *[]error) (text, bool) {
	if t, ok := parsed[src.path]; ok {
		return t, t.file != ""
	}
	b, err := src.read()
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s: cannot be read: %w", src.path, unwrapPathError(err)))
		parsed[src.path] = text{}
		return text{}, false
	}
	t, perrs := parse(src.path, string(b))
	if strings.HasSuffix(src.name, "."+partSubject) {
		// A subject is one line: a line break in it would end the header.
		content := strings.TrimRight(string(b), " \t\r\n")
		lead := len(content) - len(strings.TrimLeft(content, " \t\r\n"))
		if i := strings.IndexAny(content[lead:], "\r\n"); i >= 0 {
			perrs = append(perrs, fmt.Errorf("%s:%d: a subject is one line", src.path, lineOf(content, lead+i)+1))
		}
	}
	*errs = append(*errs, perrs...)
	if len(perrs) > 0 {
		parsed[src.path] = text{}
		return text{}, false
	}
	parsed[src.path] = t
	return t, true
}

// parse splits s, the content of file, at its placeholders: {{name}}, spaces allowed inside the
// braces. Any other {{ is an error at its line.
func parse(file, s string) (text, []error) {
	t := text{file: file}
	if !utf8.ValidString(s) {
		i := 0
		for i < len(s) {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return t, []error{fmt.Errorf("%s:%d: not UTF-8", file, lineOf(s, i))}
	}
	var errs []error
	at, lit := 0, 0
	for {
		i := strings.Index(s[at:], "{{")
		if i < 0 {
			break
		}
		start := at + i
		end := strings.Index(s[start+2:], "}}")
		if end < 0 || strings.Contains(s[start+2:start+2+end], "{{") {
			errs = append(errs, fmt.Errorf("%s:%d: %q opens a placeholder that is not closed with }}", file, lineOf(s, start), excerpt(s[start:])))
			at = start + 2
			continue
		}
		name := strings.TrimSpace(s[start+2 : start+2+end])
		if !placeholderName(name) {
			errs = append(errs, fmt.Errorf("%s:%d: {{%s}} is not a placeholder: a name is letters and _ only", file, lineOf(s, start), name))
			at = start + 2 + end + 2
			continue
		}
		if start > lit {
			t.parts = append(t.parts, part{lit: s[lit:start]})
		}
		t.parts = append(t.parts, part{name: name, line: lineOf(s, start)})
		at = start + 2 + end + 2
		lit = at
	}
	if lit < len(s) {
		t.parts = append(t.parts, part{lit: s[lit:]})
	}
	for _, p := range t.parts {
		if p.name == "" {
			t.size += len(p.lit)
		}
	}
	return t, errs
}

// placeholderName reports whether s is a placeholder's name: letters and underscores.
func placeholderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// excerpt is the start of s, for an error message.
func excerpt(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 24 {
		s = s[:24] + "…"
	}
	return s
}

// lineOf is the line (from 1) of byte offset i in s.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// check reports the placeholders of t that are not among known, and the ones of required it lacks.
func check(t text, what string, known, required []string) []error {
	var errs []error
	have := map[string]bool{}
	for _, p := range t.parts {
		if p.name == "" {
			continue
		}
		have[p.name] = true
		if !slices.Contains(known, p.name) {
			errs = append(errs, fmt.Errorf("%s:%d: {{%s}} is not a value of %s e-mails, which are %s", t.file, p.line, p.name, what, braces(known)))
		}
	}
	for _, r := range required {
		if !have[r] {
			errs = append(errs, fmt.Errorf("%s: has no {{%s}}, which every %s e-mail must show", t.file, r, what))
		}
	}
	return errs
}

func braces(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{{" + n + "}}"
	}
	return strings.Join(out, ", ")
}

// trimSubject drops the spaces and line ends around a subject template.
func trimSubject(t text) text {
	out := text{file: t.file}
	for i, p := range t.parts {
		if p.name == "" {
			if i == 0 {
				p.lit = strings.TrimLeft(p.lit, " \t\r\n")
			}
			if i == len(t.parts)-1 {
				p.lit = strings.TrimRight(p.lit, " \t\r\n")
			}
			if p.lit == "" {
				continue
			}
			out.size += len(p.lit)
		}
		out.parts = append(out.parts, p)
	}
	return out
}

// fill writes t with every {{name}} replaced by vars[name], passed through escape, and the
// layout's content slot by body. A value the e-mail has none for (a draft queued by an earlier
// version, before the value existed) is left out.
func (t text) fill(vars map[string]string, escape func(string) string, body string) string {
	var b strings.Builder
	b.Grow(t.size + len(body) + 256)
	for _, p := range t.parts {
		switch {
		case p.name == "":
			b.WriteString(p.lit)
		case p.name == contentSlot:
			b.WriteString(body)
		default:
			b.WriteString(escape(vars[p.name]))
		}
	}
	return b.String()
}

// plain makes a value safe for a subject line or a text body: control characters (a CR LF
// would start a new header) are removed.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
