package tests

import (
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // Registers the "pgx" database/sql driver.

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// adminURL returns the URL of the maintenance database of the server under
// test, as a superuser.
func adminURL() string {
	return pgtest.ServerURL()
}

// newMigrator returns a Migrator on dbURL, closed when the test ends.
func newMigrator(t testing.TB, dbURL string) *migrator.Migrator {
	t.Helper()
	m, err := migrator.Open(dbURL)
	if err != nil {
		t.Fatalf("opening migrator: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("closing migrator: %v", err)
		}
	})
	return m
}
