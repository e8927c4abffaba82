package citus

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
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

// startTimes is each node's pg_postmaster_start_time, coordinator first.
func startTimes(t *testing.T, c *cluster, n *node) []string {
	t.Helper()
	var out []string
	for _, u := range append([]string{n.url}, c.workerURLs(n)...) {
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatalf("connecting to %s: %v", u, err)
		}
		var at string
		err = conn.QueryRow(context.Background(), `SELECT pg_postmaster_start_time()::text`).Scan(&at)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, at)
	}
	return out
}

// TestNoCallReachesACitusCrash calls, on a distributed database, as an
// application login and as a member of convo_admin, everything of the
// routed API that a login may name: each router with a NULL key (CV011,
// nothing written), each delegated function with a NULL key written in the
// query, bound as a parameter and in a generic plan (nothing: a NULL
// distribution argument must not reach Citus, which crashes on one), and
// the bodies and the machinery of convo_node (not granted). No node
// restarts, and a connection opened before is still there after.
func TestNoCallReachesACitusCrash(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	first, err := pgx.Connect(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	started := startTimes(t, c, n)

	app := pgtest.LoginAs(t, n.pool, "convo_app")
	treeStory(t, app, "alice")
	before := rowCounts(t, n.pool)

	routers := routines(t, n.pool, `p.pronamespace = 'convo'::regnamespace AND NOT p.prosecdef
		AND p.prosrc LIKE '%convo\_node.%\_delegated(%'`)
	delegated := routines(t, n.pool, `p.pronamespace = 'convo_node'::regnamespace AND p.proname LIKE '%\_delegated'`)
	bodies := routines(t, n.pool, `p.pronamespace = 'convo_node'::regnamespace AND p.proname NOT LIKE '%\_delegated'
		AND p.oid <> 'convo_node.pass_owner()'::regprocedure`)
	for _, f := range delegated {
		if f.Key < 0 {
			t.Errorf("%s is not distributed by an argument", f.Name)
		}
	}
	if len(routers) < 24 || len(delegated) != len(routers)+1 {
		t.Fatalf("%d routers and %d delegated functions: the routed API is not all there", len(routers), len(delegated))
	}

	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	for _, login := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"convo_app", app}, {"convo_admin", admin}} {
		t.Run(login.name, func(t *testing.T) {
			tx := func(fn func(tx pgx.Tx) error) error { return inOwnerTx(t, login.pool, "alice", fn) }
			for _, f := range routers {
				// Every argument NULL: the router refuses the key first.
				err := tx(func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, callOf(f, func(i int, typ string) string { return fmt.Sprintf("$%d::%s", i+1, typ) }),
						make([]any, len(f.Types))...)
					return err
				})
				if !errIs(err, "CV011") {
					t.Errorf("%s with a NULL key: %v, want CV011", f.Name, err)
				}
			}
			for _, f := range delegated {
				// The key NULL, every other argument an empty array.
				others := func(i int, typ string) string { return "'{}'::" + typ }
				literal := callOf(f, func(i int, typ string) string {
					if i == f.Key {
						return "NULL::" + typ
					}
					return others(i, typ)
				})
				param := callOf(f, func(i int, typ string) string {
					if i == f.Key {
						return "$1::" + typ
					}
					return others(i, typ)
				})
				for _, way := range []struct {
					name string
					run  func(tx pgx.Tx) (pgx.Rows, error)
				}{
					{"in the query", func(tx pgx.Tx) (pgx.Rows, error) { return tx.Query(ctx, literal) }},
					{"as a parameter", func(tx pgx.Tx) (pgx.Rows, error) { return tx.Query(ctx, param, nil) }},
					{"in a generic plan", func(tx pgx.Tx) (pgx.Rows, error) {
						for _, s := range []string{`SET LOCAL plan_cache_mode = force_generic_plan`,
							`PREPARE null_key (` + f.Types[f.Key] + `) AS ` + param} {
							if _, err := tx.Exec(ctx, s); err != nil {
								return nil, err
							}
						}
						return tx.Query(ctx, `EXECUTE null_key(NULL)`)
					}},
				} {
					var got int
					err := tx(func(tx pgx.Tx) error {
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
					if err != nil || got != 0 {
						t.Errorf("%s with a NULL key %s: %d rows, %v; want nothing", f.Name, way.name, got, err)
					}
				}
			}
			for _, f := range bodies {
				err := tx(func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, callOf(f, func(i int, typ string) string { return "NULL::" + typ }))
					return err
				})
				if !errIs(err, "42501") {
					t.Errorf("%s called directly: %v, want 42501 (not granted)", f.Name, err)
				}
			}
		})
	}

	if err := first.Ping(ctx); err != nil {
		t.Errorf("the connection opened before the calls is gone: %v", err)
	}
	if after := startTimes(t, c, n); strings.Join(after, ",") != strings.Join(started, ",") {
		t.Fatalf("a node restarted: started at %v, now %v (coordinator first)", started, after)
	}
	if after := rowCounts(t, n.pool); mustJSON(after) != mustJSON(before) {
		t.Errorf("rows written by calls that should write nothing:\nbefore %v\n after %v", before, after)
	}
}
