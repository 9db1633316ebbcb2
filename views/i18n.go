package views

import (
	"context"
	"strings"
	"time"

	"codeauth/i18n"
)

// The pages' words come from the i18n message files, in the language the request's context
// carries (pages.render puts it there). Components call these with a message's key.

// t is the message id in the page's language.
func t(ctx context.Context, id string) string { return i18n.FromContext(ctx).T(id) }

// tf is the message id with values.
func tf(ctx context.Context, id string, data map[string]any) string {
	return i18n.FromContext(ctx).Tf(id, data)
}

// tn is the plural message id for n.
func tn(ctx context.Context, id string, n int, data map[string]any) string {
	return i18n.FromContext(ctx).Tn(id, n, data)
}

// lang and dir are the page's language code and script direction, for the html element.
func lang(ctx context.Context) string { return i18n.FromContext(ctx).Code() }
func dir(ctx context.Context) string  { return i18n.FromContext(ctx).Dir() }

// date writes a day in the page's language.
func date(ctx context.Context, t time.Time) string { return i18n.FromContext(ctx).Date(t) }

// piece is part of a sentence: words, or a value the component puts in an element of its own
// (an address in <strong>).
type piece struct {
	text  string
	value bool
}

// Markers around a value's name while a message is rendered for pieces; no message or value
// holds these control characters.
const (
	valueStart = "\x01"
	valueEnd   = "\x02"
)

// pieces is the message id (plural for n, unless n < 0) cut at the values of bold, so that a
// component can set each in an element of its own wherever the language puts it in the
// sentence; data holds the other values, which stay plain words.
func pieces(ctx context.Context, id string, n int, bold map[string]string, data map[string]any) []piece {
	values := make(map[string]any, len(bold)+len(data))
	for k, v := range data {
		values[k] = v
	}
	for name := range bold {
		values[name] = valueStart + name + valueEnd
	}
	var s string
	if n >= 0 {
		s = tn(ctx, id, n, values)
	} else {
		s = tf(ctx, id, values)
	}
	var out []piece
	for s != "" {
		before, rest, found := strings.Cut(s, valueStart)
		if before != "" {
			out = append(out, piece{text: before})
		}
		if !found {
			break
		}
		name, after, _ := strings.Cut(rest, valueEnd)
		out = append(out, piece{text: bold[name], value: true})
		s = after
	}
	return out
}
