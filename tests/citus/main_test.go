// Package citus runs pgconvo on a Citus cluster: a coordinator and two
// workers started by the tests from the installed PostgreSQL, with Citus
// preloaded. Citus is not in the package registries; where its library
// (citus.so) is not in the server's library directory, every test here
// skips with one line saying so, CI included. Each test has a database of
// its own and runs in parallel with the others, but for the one that calls
// everything with NULLs (crash_test.go): it runs first, alone, so that a
// crash it provoked could not be blamed on another test.
package citus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// cluster is the coordinator and the workers, started once for the package.
type cluster struct {
	coordinator *localpg.Server
	workers     []*localpg.Server
}

var (
	theCluster *cluster
	noCitus    string // why the tests skip, when they do
	databases  atomic.Int64
)

// TestMain starts the cluster when Citus is installed.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	lib, err := citusLibrary()
	if err != nil {
		noCitus = err.Error()
		return m.Run()
	}
	settings := []string{"shared_preload_libraries=citus", "max_prepared_transactions=100",
		"citus.shard_count=8",
		// The server runs as another OS user than the tests, whose HOME it
		// inherits: libpq would look for client certificates there.
		"citus.node_conninfo=sslmode=disable"}
	ctx := context.Background()
	c := &cluster{}
	defer c.stop()
	for i := 0; i < 3; i++ {
		s, err := localpg.StartEphemeral(ctx, localpg.Options{Settings: settings})
		if err != nil {
			fmt.Fprintf(os.Stderr, "citus tests: starting a node with %s: %v\n", lib, err)
			return 1
		}
		if i == 0 {
			c.coordinator = s
		} else {
			c.workers = append(c.workers, s)
		}
	}
	theCluster = c
	return m.Run()
}

func (c *cluster) stop() {
	for _, s := range append([]*localpg.Server{c.coordinator}, c.workers...) {
		if s != nil {
			s.Stop() //nolint:errcheck // The directory goes with it.
		}
	}
}

// citusLibrary finds citus.so beside the server the tests would start.
func citusLibrary() (string, error) {
	bin, err := localpg.FindBinaries()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(bin, "pg_config"), "--pkglibdir").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		dir = filepath.Join(bin, "..", "lib")
	}
	lib := filepath.Join(dir, "citus.so")
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Errorf("Citus is not installed (no %s): the Citus tests skip", lib)
	}
	return lib, nil
}

// needCitus skips t, in one line, where Citus is not installed.
func needCitus(t *testing.T) *cluster {
	t.Helper()
	if theCluster == nil {
		t.Skip(noCitus)
	}
	return theCluster
}

// node is one database of the cluster: the coordinator's, as a superuser.
type node struct {
	url  string
	pool *pgxpool.Pool
	db   *sql.DB
}

// newDatabase makes a database of the same name on every node with the
// citus extension, adds the workers to the coordinator's, and returns the
// coordinator's, as the superuser. It is dropped everywhere when the test
// passes.
func (c *cluster) newDatabase(t *testing.T) *node {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("citus_%d_%d", os.Getpid(), databases.Add(1))
	all := append([]*localpg.Server{c.coordinator}, c.workers...)
	for _, s := range all {
		admin, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
			t.Fatal(err)
		}
		admin.Close(ctx)
		conn, err := pgx.Connect(ctx, s.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `CREATE EXTENSION citus`); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
	n := &node{url: c.coordinator.URL(name)}
	n.pool = pgtest.NewPool(t, n.url, pgx.QueryExecModeCacheStatement)
	var err error
	if n.db, err = sql.Open("pgx", n.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.db.Close() })
	pgtest.MustExec(t, n.pool, `SELECT citus_set_coordinator_host('127.0.0.1', $1)`, c.coordinator.Port())
	for _, w := range c.workers {
		// On a busy machine the coordinator's first connection to the
		// worker's new database may fail (XX000, "failure on connection
		// marked as essential"); the call rolls back whole: try again.
		if err := retrying(5, func(e *pgconn.PgError) bool {
			return e.Code == "XX000" && strings.Contains(e.Message, "failure on connection")
		}, func() error {
			_, err := n.pool.Exec(ctx, `SELECT citus_add_node('127.0.0.1', $1)`, w.Port())
			return err
		}); err != nil {
			t.Fatalf("adding worker %d: %v", w.Port(), err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept database %s on every node; coordinator: %s", name, n.url)
			return
		}
		n.pool.Close()
		n.db.Close()
		for _, s := range all {
			admin, err := pgx.Connect(ctx, s.URL("postgres"))
			if err != nil {
				t.Error(err)
				continue
			}
			// FORCE waits 5 seconds for the sessions it ends to exit; on a
			// busy machine a node's may take longer (55006): try again.
			if err := retrying(12, func(e *pgconn.PgError) bool { return e.Code == "55006" }, func() error {
				_, err := admin.Exec(ctx, `DROP DATABASE `+name+` WITH (FORCE)`)
				return err
			}); err != nil {
				t.Errorf("dropping %s: %v", name, err)
			}
			admin.Close(ctx)
		}
	})
	return n
}

// workerURLs are the URLs of the same database on each worker.
func (c *cluster) workerURLs(n *node) []string {
	u, _ := url.Parse(n.url)
	name := strings.TrimPrefix(u.Path, "/")
	var out []string
	for _, w := range c.workers {
		out = append(out, w.URL(name))
	}
	return out
}

// errIs reports whether err carries SQLSTATE code.
func errIs(err error, code string) bool {
	return pgtest.SQLState(err) == code && !errors.Is(err, context.Canceled)
}

// retrying runs fn up to tries times, a second apart, while it fails with
// a PostgreSQL error that again says is worth another try; it returns the
// last error, naming the try.
func retrying(tries int, again func(*pgconn.PgError) bool, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		var pgErr *pgconn.PgError
		if err == nil || try == tries || !errors.As(err, &pgErr) || !again(pgErr) {
			if err != nil {
				return fmt.Errorf("try %d: %w", try, err)
			}
			return nil
		}
		time.Sleep(time.Second)
	}
}
