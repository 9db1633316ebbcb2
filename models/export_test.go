package models

// Numbered is a written statement as parse numbers it for PostgreSQL, or why it is refused.
func Numbered(query string) (string, error) {
	w := parse(query)
	return w.numbered, w.err
}
