// Package vectors holds the attack inputs that the tests of several packages share. It imports
// nothing, so the tests of any package can use it, the internal ones of the packages below
// server (middleware's) included, which could not import testkit without a cycle.
package vectors

// OpenRedirect are the redirect targets of security.md section F (catalogue F55) that must never
// be followed, for the tests of every place that redirects.
var OpenRedirect = []string{
	"https://evil.test",
	"//evil.test",
	"/\\evil.test",
	"/%5C/evil.test",
	"\\\\evil.test",
	"/..%2F..%2Fevil.test",
	"javascript:alert(1)",
	"data:text/html,<script>alert(1)</script>",
	"https://app.example.com@evil.test",
	"https://app.example.com.evil.test",
	"http://app.example.com/x",
	"%2F%2Fevil.test",
	"/%2f%2fevil.test",
	" https://evil.test",
	"/\t/evil.test",
	"https:evil.test",
	"///evil.test",
	"/%09/evil.test",
	// Dot segments, which browsers resolve before following: "/.//evil.test" becomes
	// "//evil.test" (catalogue F55, ASVS 3.7.2).
	"/.//evil.test",
	"/./evil",
	"/a/../../evil",
	"/a/..//evil.test",
	"/.",
	"/..",
	"/a/.",
	"/a/..",
	"/./?x=1",
	"/../evil?next=/ok",
}
