package tests

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // Registers the "pgx" database/sql driver.
	"github.com/peterldowns/pgtestdb"

	"github.com/pgconvo/pgconvo/migrator"
)

// adminURL returns the URL of the maintenance database of the server under
// test, as a superuser.
func adminURL() string {
	return serverURL
}

// newDB returns a pool on a fresh database migrated to the latest version.
// pgtestdb migrates a template database once per set of migrations and
// clones it for each test, so this is cheap. The database is dropped when
// the test passes and kept (its URL is logged) when it fails.
//
// Tests connect as the server's superuser, which is also the owner of the
// database; a test about privileges should create a role and SET ROLE.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	conf := pgtestdb.Custom(t, baseConfig(t), pgconvoMigrator{})
	return newPool(t, conf.URL(), pgx.QueryExecModeCacheStatement)
}

// newEmptyDB returns a fresh database with no migrations applied, and its
// URL, for tests of the migrations themselves.
func newEmptyDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	conf := pgtestdb.Custom(t, baseConfig(t), pgtestdb.NoopMigrator{})
	db, err := sql.Open("pgx", conf.URL())
	if err != nil {
		t.Fatalf("opening %s: %v", conf.URL(), err)
	}
	t.Cleanup(func() { db.Close() })
	return db, conf.URL()
}

// newPool opens a small pool on dbURL and closes it when the test ends.
// Migration tests pass pgx.QueryExecModeDescribeExec so that no cached
// statement outlives the schema changing under it.
func newPool(t testing.TB, dbURL string, mode pgx.QueryExecMode) *pgxpool.Pool {
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

// requireSQLState fails the test unless err is a PostgreSQL error with
// SQLSTATE code.
func requireSQLState(t testing.TB, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		t.Fatalf("want SQLSTATE %s, got no error", code)
	case !errors.As(err, &pgErr):
		t.Fatalf("want SQLSTATE %s, got a non-PostgreSQL error: %v", code, err)
	case pgErr.Code != code:
		t.Fatalf("want SQLSTATE %s, got %s: %v", code, pgErr.Code, err)
	}
}

// requireCount fails the test unless query, a count(*) query, returns want.
func requireCount(t testing.TB, db *pgxpool.Pool, want int64, query string, args ...any) {
	t.Helper()
	if got := queryRow[int64](t, db, query, args...); got != want {
		t.Fatalf("want count %d, got %d from: %s", want, got, query)
	}
}

// mustExec runs sql and fails the test on error.
func mustExec(t testing.TB, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %s: %v", sql, err)
	}
}

// queryRow runs sql, which returns one row of one column, and returns that
// value; it fails the test on error or on no row.
func queryRow[T any](t testing.TB, db *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("query %s: %v", sql, err)
	}
	return v
}
