// Package pgtest is what pgconvo's test packages (tests, tests/stress)
// share: one PostgreSQL server for a whole `go test` run of a package, a
// freshly migrated database for each test, and the helpers that call the
// API and fail the test on error. It is for tests only.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // Registers the "pgx" database/sql driver.
	"github.com/peterldowns/pgtestdb"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

// DatabaseEnv names the variable that points the tests at an existing
// server instead of a throwaway one: a superuser URL, for example
// postgres://postgres@localhost:5432/postgres?sslmode=disable. The tests
// create and drop databases named testdb_tpl_* on it and touch nothing else.
// It is deliberately not DATABASE_URL, which the CLI migrates, so that a
// shell pointed at a real database cannot aim the tests at it by accident.
const DatabaseEnv = "PGCONVO_TEST_DATABASE_URL"

// serverURL is the URL of the maintenance database of the server under
// test, set by Main.
var serverURL string

// ServerURL returns the URL of the maintenance database of the server under
// test, as a superuser.
func ServerURL() string {
	return serverURL
}

// Main is a test package's TestMain body: it starts one ephemeral
// PostgreSQL server from the installed binaries for the whole run, unless
// PGCONVO_TEST_DATABASE_URL is set, runs the tests, stops the server and
// returns the exit code.
func Main(m *testing.M) int {
	parallelByDefault()
	if url := os.Getenv(DatabaseEnv); url != "" {
		serverURL = url
		return m.Run()
	}
	srv, err := localpg.StartEphemeral(context.Background(), localpg.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", NoServerMessage(err))
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "tests: stopping PostgreSQL:", err)
		}
	}()
	serverURL = srv.URL("postgres")
	if err := createRoles(serverURL); err != nil {
		fmt.Fprintln(os.Stderr, "tests: creating pgconvo's roles on the new server:", err)
		return 1
	}
	return m.Run()
}

// parallelByDefault sets -test.parallel, unless it was given, to twice the
// number of CPUs and at least 4. Go's default is the number of CPUs, but a
// test here spends most of its time waiting on the server, a psql or a
// build, so as many tests as CPUs leave the CPUs idle. Each test has a
// database of its own, so running more at once changes what runs beside
// what, not what a test sees.
func parallelByDefault() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(4, 2*runtime.GOMAXPROCS(0))))
	}
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

// NoServerMessage says why the tests have no server to run on and what to
// do, naming the tests' own variable (not the CLI's DATABASE_URL).
func NoServerMessage(err error) string {
	if errors.Is(err, localpg.ErrNoBinaries) {
		return fmt.Sprintf("%v: %s, or set %s to a superuser URL of a server of your own",
			err, localpg.InstallHint, DatabaseEnv)
	}
	return fmt.Sprintf("starting a PostgreSQL server (or set %s to a superuser URL of a server of your own): %v",
		DatabaseEnv, err)
}

// NewDB returns a pool on a fresh database migrated to the latest version.
// pgtestdb migrates a template database once per set of migrations and
// clones it for each test, so this is cheap. The database is dropped when
// the test passes and kept (its URL is logged) when it fails.
//
// Tests connect as the server's superuser, which is also the owner of the
// database; a test about privileges should create a role and SET ROLE.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	conf := pgtestdb.Custom(t, baseConfig(t), pgconvoMigrator{})
	return NewPool(t, conf.URL(), pgx.QueryExecModeCacheStatement)
}

// NewEmptyDB returns a fresh database with no migrations applied, and its
// URL, for tests of the migrations themselves.
func NewEmptyDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	conf := pgtestdb.Custom(t, baseConfig(t), pgtestdb.NoopMigrator{})
	db, err := sql.Open("pgx", conf.URL())
	if err != nil {
		t.Fatalf("opening %s: %v", conf.URL(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db, conf.URL()
}

// NewPool opens a small pool on dbURL and closes it when the test ends.
// Migration tests pass pgx.QueryExecModeDescribeExec so that no cached
// statement outlives the schema changing under it.
func NewPool(t testing.TB, dbURL string, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", dbURL, err)
	}
	cfg.MaxConns = 4 // Many tests run at once; keep under max_connections.
	cfg.ConnConfig.DefaultQueryExecMode = mode
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dbURL, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// baseConfig turns serverURL into pgtestdb's configuration. pgtestdb's test
// role is the same superuser, so migrations may do whatever a deployment
// with a superuser could.
func baseConfig(t testing.TB) pgtestdb.Config {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("parsing server URL: %v", err)
	}
	password, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       port,
		User:       u.User.Username(),
		Password:   password,
		Database:   u.Path[1:],
		Options:    u.RawQuery,
		TestRole: &pgtestdb.Role{
			Username:     u.User.Username(),
			Password:     password,
			Capabilities: "SUPERUSER",
		},
	}
}

// pgconvoMigrator is the pgtestdb migrator: it runs migrator.Up and names
// its template by migrator.Hash, so any change to any embedded SQL file
// builds a new template.
type pgconvoMigrator struct{}

// Hash identifies the template database by the embedded migrations.
func (pgconvoMigrator) Hash() (string, error) {
	return migrator.Hash(), nil
}

// Migrate applies every migration to the template database.
func (pgconvoMigrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	m, err := migrator.New(db)
	if err != nil {
		return err
	}
	return errors.Join(m.Up(ctx), m.Close())
}
