package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

// database is the name of the database the benchmark migrates and loads.
const database = "pgconvo_bench"

// appRole is the login role every workload runs as: a member of convo_app,
// as the README's Security section tells an application to connect.
const appRole = "bench_app"

// serverSettings are the settings of the benchmark's server beyond
// localpg's: memory enough to hold the loaded data, and WAL room enough that
// no checkpoint lands in the middle of one side of a pair.
var serverSettings = []string{
	"shared_buffers=1GB",
	"max_wal_size=16GB",
	"checkpoint_timeout=30min",
}

// env is a running server with the benchmark's database migrated: admin is
// a superuser pool (setup and loading only), app a pool of the login member
// of convo_app that every workload runs on.
type env struct {
	srv   *localpg.Server
	admin *pgxpool.Pool
	url   string // the database's URL as the superuser
}

// startEnv starts an ephemeral server (fsync as asked), creates and
// migrates the database, creates the bench schema, the effectful tool and
// the application's login role.
func startEnv(ctx context.Context, fsync bool) (*env, error) {
	srv, err := localpg.StartEphemeral(ctx, localpg.Options{Durable: fsync, Settings: serverSettings})
	if err != nil {
		if errors.Is(err, localpg.ErrNoBinaries) {
			return nil, fmt.Errorf("%w: %s", err, localpg.InstallHint)
		}
		return nil, fmt.Errorf("starting a PostgreSQL server: %w", err)
	}
	e := &env{srv: srv, url: srv.URL(database)}
	if err := e.setUp(ctx); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) setUp(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, e.srv.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the server: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+database)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("creating database %s: %w", database, err)
	}
	m, err := migrator.Open(e.url)
	if err != nil {
		return fmt.Errorf("opening the migrator: %w", err)
	}
	if err := errors.Join(m.Up(ctx), m.Close()); err != nil {
		return fmt.Errorf("migrating %s: %w", database, err)
	}
	if e.admin, err = newPool(ctx, e.url, 4); err != nil {
		return err
	}
	for _, stmt := range []string{
		benchSchema,
		benchTool,
		// Trust authentication on loopback: the role needs no password.
		`CREATE ROLE ` + appRole + ` LOGIN IN ROLE convo_app`,
		`GRANT USAGE ON SCHEMA bench TO ` + appRole,
		`GRANT SELECT ON bench.flat, bench.flat_wide TO ` + appRole,
		`GRANT SELECT, INSERT, UPDATE ON bench.conversations, bench.messages, bench.head_log TO ` + appRole,
	} {
		if _, err := e.admin.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("setting up the bench schema and role: %w", err)
		}
	}
	return nil
}

// appPool returns a pool of conns connections as the application's role.
func (e *env) appPool(ctx context.Context, conns int, settings ...string) (*pgxpool.Pool, error) {
	u, err := url.Parse(e.url)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", e.url, err)
	}
	u.User = url.User(appRole)
	if len(settings) > 0 {
		// A space as %20, which pgx reads back (not "+"), and "=" escaped.
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += "options=" + strings.ReplaceAll(url.QueryEscape("-c "+strings.Join(settings, " -c ")), "+", "%20")
	}
	return newPool(ctx, u.String(), conns)
}

// newPool opens a pool of up to conns connections on dbURL, every
// connection opened at once so that no timed call waits for one.
func newPool(ctx context.Context, dbURL string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", dbURL, err)
	}
	cfg.MaxConns = int32(conns)
	cfg.MinConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", dbURL, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s: %w", dbURL, err)
	}
	return pool, nil
}

// close stops everything startEnv started; the server's directory goes too.
func (e *env) close() error {
	if e.admin != nil {
		e.admin.Close()
	}
	return e.srv.Stop()
}
