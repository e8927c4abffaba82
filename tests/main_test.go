// Package tests holds pgconvo's database tests. Every test gets its own fresh
// database (pgtest.NewDB and pgtest.NewEmptyDB) on one PostgreSQL server
// shared by the whole `go test` run of the package; the long load, crash and
// model runs are in tests/stress, a package with a server and a time budget
// of its own.
package tests

import (
	"os"
	"testing"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestMain starts the package's server (pgtest.Main) and removes the CLI
// binary the tests built.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	removeMigrateBinary()
	os.Exit(code)
}
