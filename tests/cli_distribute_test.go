package tests

import (
	"strings"
	"testing"
)

// TestCLIDistributeRefusesWithoutCitus: `migrate distribute` on a database
// without Citus says what to do first, exits 1 and changes nothing, and
// status says nothing of Citus there.
func TestCLIDistributeRefusesWithoutCitus(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	requireCLI(t, nil, 0, nil, "-database", dbURL, "up")
	before := catalogObjects(t, db)
	requireCLI(t, nil, 1, []string{"distribute refused, nothing was changed: the citus extension is not installed",
		"CREATE EXTENSION citus"}, "-database", dbURL, "distribute")
	requireNothingWritten(t, db, "distribute", before)
	r := requireCLI(t, nil, 0, []string{"up to date"}, "-database", dbURL, "status")
	if strings.Contains(r.stdout, "distribution:") || strings.Contains(r.stdout, "Citus") {
		t.Fatalf("status on one server speaks of Citus:\n%s", r.stdout)
	}
	requireCLI(t, nil, 2, []string{"distribute"}, "-database", dbURL, "distribute", "now")
}
