// Package tests holds pgconvo's database tests. Every test gets its own fresh
// database (see newDB and newEmptyDB in helpers_test.go) on one PostgreSQL
// server shared by the whole `go test` run.
package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

// testDatabaseEnv names the variable that points the tests at an existing
// server instead of a throwaway one: a superuser URL, for example
// postgres://postgres@localhost:5432/postgres?sslmode=disable. The tests
// create and drop databases named testdb_tpl_* on it and touch nothing else.
// It is deliberately not DATABASE_URL, which the CLI migrates, so that a
// shell pointed at a real database cannot aim the tests at it by accident.
const testDatabaseEnv = "PGCONVO_TEST_DATABASE_URL"

// serverURL is the URL of the maintenance database of the server under test,
// set by TestMain.
var serverURL string

// TestMain starts one ephemeral PostgreSQL server from the installed binaries
// for the whole run, unless PGCONVO_TEST_DATABASE_URL is set, and stops it
// at the end.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests is TestMain's body, split out so that deferred calls run before
// os.Exit.
func runTests(m *testing.M) int {
	if url := os.Getenv(testDatabaseEnv); url != "" {
		serverURL = url
		defer removeMigrateBinary()
		return m.Run()
	}
	srv, err := localpg.StartEphemeral(context.Background(), localpg.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", noServerMessage(err))
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "tests: stopping PostgreSQL:", err)
		}
	}()
	serverURL = srv.URL("postgres")
	defer removeMigrateBinary()
	if err := createRoles(serverURL); err != nil {
		fmt.Fprintln(os.Stderr, "tests: creating pgconvo's roles on the new server:", err)
		return 1
	}
	return m.Run()
}

// createRoles migrates a throwaway database of a new server once, before
// any test runs, so that pgconvo's cluster-wide roles exist: two migrations
// of two databases that start at the same moment on a server without them
// would both create them, and one fail on the other's role.
func createRoles(server string) error {
	ctx := context.Background()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE pgconvo_roles`); err != nil {
		return err
	}
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	u.Path = "/pgconvo_roles"
	m, err := migrator.Open(u.String())
	if err != nil {
		return err
	}
	err = errors.Join(m.Up(ctx), m.Close())
	_, dropErr := admin.ExecContext(ctx, `DROP DATABASE pgconvo_roles`)
	return errors.Join(err, dropErr)
}

// noServerMessage says why the tests have no server to run on and what to
// do, naming the tests' own variable (not the CLI's DATABASE_URL).
func noServerMessage(err error) string {
	if errors.Is(err, localpg.ErrNoBinaries) {
		return fmt.Sprintf("%v: %s, or set %s to a superuser URL of a server of your own",
			err, localpg.InstallHint, testDatabaseEnv)
	}
	return fmt.Sprintf("starting a PostgreSQL server (or set %s to a superuser URL of a server of your own): %v",
		testDatabaseEnv, err)
}
