package citus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// routine is a function of the catalog with its arguments' types; key is
// the position (from 0) of its distribution argument, or -1.
type routine struct {
	Name  string
	Types []string
	Key   int
}

// routines lists the functions of the catalog that where selects (over
// pg_proc p), in name order.
func routines(t *testing.T, db *pgxpool.Pool, where string) []routine {
	t.Helper()
	r, err := db.Query(context.Background(), `
		SELECT p.oid::regprocedure::text,
		       ARRAY(SELECT format_type(a, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u (a, n) ORDER BY n),
		       coalesce((SELECT d.distribution_argument_index FROM pg_dist_object d
		                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid), -1)
		  FROM pg_proc p WHERE `+where+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(r, pgx.RowToStructByPos[routine])
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatalf("no function where %s", where)
	}
	return all
}

// callOf is a call of f with arg(i, type) as its i-th argument.
func callOf(f routine, arg func(i int, typ string) string) string {
	args := make([]string, len(f.Types))
	for i, typ := range f.Types {
		args[i] = arg(i, typ)
	}
	return fmt.Sprintf("SELECT * FROM %s(%s)", f.Name[:strings.IndexByte(f.Name, '(')], strings.Join(args, ", "))
}

// rowCounts is the count of rows of every table of pgconvo's, as the
// superuser.
func rowCounts(t *testing.T, db *pgxpool.Pool) map[string]int64 {
	t.Helper()
	tables := pgtest.QueryRows[string](t, db, `
		SELECT c.oid::regclass::text FROM pg_class c
		 WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND c.relkind IN ('r', 'p')
		   AND NOT c.relispartition`)
	counts := map[string]int64{}
	for _, table := range tables {
		counts[table] = pgtest.QueryRow[int64](t, db, `SELECT count(*) FROM `+table)
	}
	return counts
}

// startTime is the pg_postmaster_start_time of the node at url, read over
// a new connection.
func startTime(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var at string
	if err := conn.QueryRow(context.Background(), `SELECT pg_postmaster_start_time()::text`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// awaitCoordinator waits until n's coordinator, after a crash, has
// restarted and takes connections again, so that what follows runs on it.
func awaitCoordinator(t *testing.T, n *node) {
	t.Helper()
	ctx := context.Background()
	time.Sleep(time.Second) // until the server has seen the crash
	for i := 0; i < 300; i++ {
		if conn, err := pgx.Connect(ctx, n.url); err == nil {
			_, err = conn.Exec(ctx, `SELECT`)
			conn.Close(ctx)
			if err == nil {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the coordinator did not come back in 30 seconds")
}

// TestNoCallReachesACitusCrash calls, on a distributed database, as an
// application login and as a member of convo_admin, everything of the
// routed API that a login may name: each router with a NULL key (CV011, or
// not granted; nothing written), each delegated function with a NULL key
// written in the query, bound as a parameter and in a generic plan
// (nothing, or not granted: a NULL distribution argument must not reach
// Citus, which crashes on one), and the bodies they call (not granted). No
// node restarts, and a connection opened before is still there after.
func TestNoCallReachesACitusCrash(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	// A connection to each node, coordinator first, opened before the
	// calls: a crash ends it (the server restarts in place, keeping its
	// start time).
	var firsts []*pgx.Conn
	var started []string
	for _, u := range append([]string{n.url}, c.workerURLs(n)...) {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		firsts = append(firsts, conn)
		started = append(started, startTime(t, u))
	}

	app := pgtest.LoginAs(t, n.pool, "convo_app")
	treeStory(t, app, "alice")
	before := rowCounts(t, n.pool)

	routers := routines(t, n.pool, `p.pronamespace = 'convo'::regnamespace AND NOT p.prosecdef
		AND p.prosrc LIKE '%convo\_node.%\_delegated(%'`)
	delegated := routines(t, n.pool, `p.pronamespace = 'convo_node'::regnamespace AND p.proname LIKE '%\_delegated'`)
	bodies := routines(t, n.pool, `p.pronamespace IN ('convo_node'::regnamespace, 'convo_private'::regnamespace)
		AND EXISTS (SELECT FROM pg_proc d WHERE d.pronamespace = 'convo_node'::regnamespace AND d.proname = p.proname || '_delegated')`)
	for _, f := range delegated {
		if f.Key < 0 {
			t.Errorf("%s is not distributed by an argument", f.Name)
		}
	}
	if len(routers) < 24 || len(delegated) < len(routers) {
		t.Fatalf("%d routers and %d delegated functions: the routed API is not all there", len(routers), len(delegated))
	}

	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	// The nodes commit asynchronously: a crash would take the last commits
	// (the logins) with it, but for this.
	for _, conn := range firsts {
		if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
	}
	prepared := 0
	for _, login := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"convo_app", app}, {"convo_admin", admin}} {
		t.Run(login.name, func(t *testing.T) {
			// try runs fn as the login with the owner set; a connection
			// lost is a crash, waited out so that the calls go on.
			try := func(fn func(tx pgx.Tx) error) error {
				err := inOwnerTx(t, login.pool, "alice", fn)
				var server *pgconn.PgError
				if err != nil && !errors.As(err, &server) {
					awaitCoordinator(t, n)
					login.pool.Reset()
					return fmt.Errorf("the connection was lost, the server crashed: %w", err)
				}
				return err
			}
			for _, f := range routers {
				// Every argument NULL: the router refuses the key first.
				what := f.Name + " with a NULL key"
				err := try(func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, callOf(f, func(i int, typ string) string { return fmt.Sprintf("$%d::%s", i+1, typ) }),
						make([]any, len(f.Types))...)
					return err
				})
				want := "CV011"
				if !pgtest.QueryRow[bool](t, login.pool, `SELECT has_function_privilege($1::regprocedure, 'EXECUTE')`, f.Name) {
					want = "42501" // not this login's
				}
				if !errIs(err, want) {
					t.Errorf("%s: %v, want %s", what, err, want)
				}
			}
			for _, f := range delegated {
				// The key NULL, every other argument an empty array.
				keyAs := func(key string) string {
					return callOf(f, func(i int, typ string) string {
						if i == f.Key {
							return key + "::" + typ
						}
						return "'{}'::" + typ
					})
				}
				for _, way := range []struct {
					name string
					run  func(tx pgx.Tx) (pgx.Rows, error)
				}{
					{"in the query", func(tx pgx.Tx) (pgx.Rows, error) { return tx.Query(ctx, keyAs("NULL")) }},
					{"as a parameter", func(tx pgx.Tx) (pgx.Rows, error) { return tx.Query(ctx, keyAs("$1"), nil) }},
					{"in a generic plan", func(tx pgx.Tx) (pgx.Rows, error) {
						prepared++
						name := fmt.Sprintf("null_key_%d", prepared)
						for _, s := range []string{`SET LOCAL plan_cache_mode = force_generic_plan`,
							`PREPARE ` + name + ` (` + f.Types[f.Key] + `) AS ` + keyAs("$1")} {
							if _, err := tx.Exec(ctx, s); err != nil {
								return nil, err
							}
						}
						return tx.Query(ctx, `EXECUTE `+name+`(NULL)`)
					}},
				} {
					what := f.Name + " with a NULL key " + way.name
					var got int
					err := try(func(tx pgx.Tx) error {
						rows, err := way.run(tx)
						if err != nil {
							return err
						}
						defer rows.Close()
						for rows.Next() {
							if v, _ := rows.Values(); len(v) != 1 || v[0] != nil {
								got++
							}
						}
						return rows.Err()
					})
					// Not granted to this login is nothing too.
					if err == nil && got != 0 {
						t.Errorf("%s: %d rows, want none", what, got)
					} else if err != nil && !errIs(err, "42501") {
						t.Errorf("%s: %v, want nothing", what, err)
					}
				}
			}
			for _, f := range bodies {
				what := f.Name + " called directly"
				err := try(func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, callOf(f, func(i int, typ string) string { return "NULL::" + typ }))
					return err
				})
				if !errIs(err, "42501") {
					t.Errorf("%s: %v, want 42501 (not granted)", what, err)
				}
			}
		})
	}

	for i, u := range append([]string{n.url}, c.workerURLs(n)...) {
		if err := firsts[i].Ping(ctx); err != nil {
			t.Errorf("the connection to %s opened before the calls is gone: %v", u, err)
		}
		if at := startTime(t, u); at != started[i] {
			t.Errorf("%s restarted: started at %s, now %s", u, started[i], at)
		}
	}
	if after := rowCounts(t, n.pool); mustJSON(after) != mustJSON(before) {
		t.Errorf("rows written by calls that should write nothing:\nbefore %v\n after %v", before, after)
	}
}
