package betterauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"codeauth/middleware"

	"github.com/gofiber/fiber/v2"
)

// jsonBody is a request body read strictly: a JSON object, UTF-8, each key once. Field readers
// record every problem, and err reports them together in better-auth's validation format.
type jsonBody struct {
	fields map[string]json.RawMessage
	issues []string
}

// bodyReader reads JSON request bodies and checks the redirect targets they carry.
type bodyReader struct {
	origins *middleware.Origins
}

// read reads the request body into req: strictly (readBody), its unsafe redirect targets refused
// whatever route it is sent to (callbackURL and friends, better-auth's open-redirect check), then
// req's fields, whose problems are reported together as one VALIDATION_ERROR.
func (r bodyReader) read(c *fiber.Ctx, req request) error {
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if err := r.origins.CheckRedirectFields(b.fields); err != nil {
		return err
	}
	if err := req.decode(b); err != nil {
		return err
	}
	return b.err()
}

// readBody reads the request body. An empty body is allowed (it has no fields); a non-empty one
// must be application/json (415 otherwise) and a single well-formed JSON object (400 otherwise).
// Duplicate keys are refused rather than letting the last one silently win, so every component
// that reads the body sees the same values.
func readBody(c *fiber.Ctx) (*jsonBody, error) {
	// The raw body: Fiber's c.Body() would decompress it (see the Content-Encoding check in
	// NewApp). Only JSON's own whitespace is trimmed.
	raw := bytes.Trim(c.Request().Body(), " \t\r\n")
	if len(raw) == 0 {
		return &jsonBody{}, nil
	}
	ct := c.Get(fiber.HeaderContentType)
	if ct == "" {
		return nil, errContentTypeRequired
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != fiber.MIMEApplicationJSON {
		return nil, newError(fiber.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE",
			fmt.Sprintf("Content-Type %q is not allowed. Allowed types: application/json", truncateForMessage(ct)))
	}
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return nil, errInvalidJSON
	}
	if raw[0] != '{' {
		return nil, validationError("[body] Invalid input: expected object, received " + jsonType(raw))
	}
	if err := strictJSON(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() // the opening brace, already checked
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errInvalidJSON
		}
		key, _ := tok.(string)
		if _, dup := fields[key]; dup {
			return nil, newError(fiber.StatusBadRequest, "BAD_REQUEST",
				fmt.Sprintf("Invalid JSON in request body: duplicate key %q", truncateForMessage(key)))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errInvalidJSON
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, errInvalidJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errInvalidJSON
	}
	return &jsonBody{fields: fields}, nil
}

// has reports whether the body has the field at all.
func (b *jsonBody) has(name string) bool {
	_, ok := b.fields[name]
	return ok
}

// truthy reports whether the body has the field with a value JavaScript reads as true: not
// null, false, 0 or "" (better-auth's handlers test some fields so, "if (body.email)").
func (b *jsonBody) truthy(name string) bool {
	raw, ok := b.fields[name]
	if !ok {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return true
	}
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	}
	return true
}

// str reads a string field. A missing required field, or a value of another type, is recorded.
// strictJSON refuses, in a well-formed JSON document, what encoding/json would read silently as
// something else: a key given twice in an object nested anywhere (the last would win; readBody
// checks the top level as it reads it), and an escaped UTF-16 surrogate without its pair
// ("\ud800", which becomes U+FFFD). Flat bodies without escapes, nearly all, are not walked.
func strictJSON(raw []byte) error {
	if bytes.Contains(raw, []byte(`\u`)) {
		if err := lonesurrogate(raw); err != nil {
			return err
		}
	}
	if bytes.IndexAny(raw[1:], "{[") < 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return uniqueKeys(dec, 0)
}

// maxJSONDepth is how deep uniqueKeys follows nested objects and arrays.
const maxJSONDepth = 32

// uniqueKeys reads one value from dec and fails if an object in it has a key twice.
func uniqueKeys(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return newError(fiber.StatusBadRequest, "BAD_REQUEST", "Invalid JSON in request body: nested too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return errInvalidJSON
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return errInvalidJSON
			}
			key, _ := k.(string)
			if seen[key] {
				return newError(fiber.StatusBadRequest, "BAD_REQUEST",
					fmt.Sprintf("Invalid JSON in request body: duplicate key %q", truncateForMessage(key)))
			}
			seen[key] = true
			if err := uniqueKeys(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if err := uniqueKeys(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if err != nil {
		return errInvalidJSON
	}
	return nil
}

// lonesurrogate fails if a string of the well-formed JSON raw escapes half of a UTF-16 surrogate
// pair without the other half.
func lonesurrogate(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			i++
			if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
				continue
			}
			r, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
			if err != nil {
				return errInvalidJSON
			}
			i += 4
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return errLoneSurrogate
			case r >= 0xD800 && r <= 0xDBFF:
				// Its pair must follow at once: \uDC00-\uDFFF.
				if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return errLoneSurrogate
				}
				low, err := strconv.ParseUint(string(raw[i+3:i+7]), 16, 16)
				if err != nil || low < 0xDC00 || low > 0xDFFF {
					return errLoneSurrogate
				}
				i += 6
			}
		}
	}
	return nil
}

// errLoneSurrogate refuses a string that escapes half of a UTF-16 surrogate pair: it is no text.
var errLoneSurrogate = newError(fiber.StatusBadRequest, "BAD_REQUEST", "Invalid JSON in request body: a string escapes half of a surrogate pair")

func (b *jsonBody) str(name string, required bool) string {
	raw, ok := b.fields[name]
	if !ok {
		if required {
			b.issue(name, "Invalid input: expected string, received undefined")
		}
		return ""
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		b.issue(name, "Invalid input: expected string, received "+jsonType(raw))
		return ""
	}
	return s
}

// optStr reads an optional string field; the pointer is nil when the field is absent.
func (b *jsonBody) optStr(name string) *string {
	if !b.has(name) {
		return nil
	}
	s := b.str(name, false)
	return &s
}

// nullableStr reads an optional field that may be a string or null: set reports presence and
// value is nil for null.
func (b *jsonBody) nullableStr(name string) (value *string, set bool) {
	raw, ok := b.fields[name]
	if !ok {
		return nil, false
	}
	if string(raw) == "null" {
		return nil, true
	}
	s := b.str(name, false)
	return &s, true
}

// enum reads a required string field that must be one of options.
func (b *jsonBody) enum(name string, options ...string) string {
	raw, ok := b.fields[name]
	var s string
	if ok && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		for _, o := range options {
			if s == o {
				return s
			}
		}
	}
	b.issue(name, `Invalid option: expected one of "`+strings.Join(options, `"|"`)+`"`)
	return ""
}

// strings reads a required field that is a string or an array of strings (better-auth's role).
func (b *jsonBody) strings(name string) []string {
	raw, ok := b.fields[name]
	if !ok {
		b.issue(name, "Invalid input: expected string, received undefined")
		return nil
	}
	var one string
	if raw[0] == '"' && json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if raw[0] == '[' && json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many
	}
	b.issue(name, "Invalid input: expected string or array of strings, received "+jsonType(raw))
	return nil
}

// optNumber reads an optional number field; nil when absent or null.
func (b *jsonBody) optNumber(name string) *float64 {
	raw, ok := b.fields[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		b.issue(name, "Invalid input: expected number, received "+jsonType(raw))
		return nil
	}
	return &n
}

// object reads an optional field that is a JSON object into its raw fields; nil when absent.
func (b *jsonBody) object(name string) map[string]json.RawMessage {
	raw, ok := b.fields[name]
	if !ok {
		return nil
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		b.issue(name, "Invalid input: expected object, received "+jsonType(raw))
		return nil
	}
	return fields
}

func (b *jsonBody) issue(field, reason string) {
	b.issues = append(b.issues, "[body."+field+"] "+reason)
}

// err returns the recorded problems as one VALIDATION_ERROR, or nil.
func (b *jsonBody) err() error {
	if len(b.issues) == 0 {
		return nil
	}
	return validationError(strings.Join(b.issues, "; "))
}

// jsonType names the JSON type of a raw value the way validation messages do.
func jsonType(raw []byte) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// truncateForMessage keeps client-supplied text short and printable before echoing it back.
func truncateForMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 64 {
		s = string([]rune(s)[:64]) + "…"
	}
	return s
}
