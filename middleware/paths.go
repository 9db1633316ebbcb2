package middleware

import "github.com/gofiber/fiber/v2"

// PathKind is what a request path is served as. KindOfPath alone decides it, so the error
// answers, the security headers, compression and the page guard cannot disagree about a path.
type PathKind uint8

// The kinds of path.
const (
	// PagePath is an HTML page: private unless public, answered with pages.
	PagePath PathKind = iota
	// APIPath is the JSON API under /api: JSON answers, the API's headers.
	APIPath
	// StaticPath is an embedded asset under /static.
	StaticPath
	// ProbePath is a health probe, /healthz or /readyz: JSON answers.
	ProbePath
)

// KindOfPath classifies path the way the router matches it: without regard to ASCII case and
// ignoring trailing slashes (Fiber's CaseSensitive and StrictRouting are off), so "/API/auth/ok/"
// reaches the API and is the API here too. Case is folded for ASCII only, as the router folds it:
// "/ſtatic" (a long s) is no asset path to the router, so it is none here either. It allocates
// nothing, since it runs several times for every request.
func KindOfPath(path string) PathKind {
	switch {
	case underFold(path, "/api"):
		return APIPath
	case underFold(path, "/static"):
		return StaticPath
	}
	path = trimTrailingSlashes(path)
	if equalFoldASCII(path, "/healthz") || equalFoldASCII(path, "/readyz") {
		return ProbePath
	}
	return PagePath
}

// KindOf is the kind of c's path, or APIPath for a request whose path the HTTP server lost before
// the app saw it (see HookServer).
func KindOf(c *fiber.Ctx) PathKind {
	if PathLost(c) {
		return APIPath
	}
	return KindOfPath(c.Path())
}

// isPagePath reports whether path is the page at page (lower case, no trailing slash), matched as
// the router matches it.
func isPagePath(path, page string) bool {
	return equalFoldASCII(trimTrailingSlashes(path), page)
}

// trimTrailingSlashes drops the slashes that end path, as the router ignores them.
func trimTrailingSlashes(path string) string {
	for len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	return path
}

// underFold reports whether path is prefix or below it ("/api", "/api/…"), ASCII case folded.
func underFold(path, prefix string) bool {
	return len(path) >= len(prefix) && equalFoldASCII(path[:len(prefix)], prefix) &&
		(len(path) == len(prefix) || path[len(prefix)] == '/')
}

// equalFoldASCII reports whether a equals lower with ASCII letters folded; lower must be lower
// case already.
func equalFoldASCII[T string | []byte](a T, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
