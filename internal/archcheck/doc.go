// Package archcheck holds the test that keeps the packages in the rooms docs/architecture.md
// gives them: which of the project's packages each may import, that only models reaches the
// database, and that no package outside models writes SQL or branches on the dialect.
package archcheck
