// Package stress holds pgconvo's long tests: clients under load, a server
// killed and recovered mid-load, a replica read while the primary writes,
// and random runs checked against a model. They are a package of their own
// so that `go test ./...` runs them beside the other tests, each package
// with a server and a time budget of its own. Their sizes are counts, set
// by flags or variables (see each test), never by what fits in a time.
package stress

import (
	"os"
	"testing"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestMain starts the package's server (pgtest.Main).
func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m))
}
