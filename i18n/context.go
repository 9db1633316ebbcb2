package i18n

import "context"

type contextKey struct{}

// NewContext returns ctx carrying l, the language a page is rendered in.
func NewContext(ctx context.Context, l *Locale) context.Context {
	return context.WithValue(ctx, contextKey{}, l)
}

// FromContext is the language ctx carries, or English.
func FromContext(ctx context.Context) *Locale {
	if l, ok := ctx.Value(contextKey{}).(*Locale); ok {
		return l
	}
	return English()
}
