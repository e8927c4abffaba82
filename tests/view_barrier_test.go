package tests

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readableViewsSQL lists every view of convo that a role other than its
// owner may read (SELECT on the view or on one of its columns, to a role or
// to PUBLIC), with whether it keeps a caller's conditions above its own
// (security_barrier) or reads with the caller's rights (security_invoker).
const readableViewsSQL = `
	SELECT c.relname::text,
	       EXISTS (SELECT 1 FROM pg_options_to_table(c.reloptions) o
	                WHERE o.option_name IN ('security_barrier', 'security_invoker') AND o.option_value::boolean)
	  FROM pg_class c
	 WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'v'
	   AND (EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
	                 WHERE a.grantee <> c.relowner AND a.privilege_type = 'SELECT')
	        OR EXISTS (SELECT 1 FROM pg_attribute att, aclexplode(att.attacl) a
	                    WHERE att.attrelid = c.oid AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'))
	 ORDER BY 1`

// readableViews returns the names of readableViewsSQL's views and, for each,
// whether it is a barrier.
func readableViews(t testing.TB, db *pgxpool.Pool) ([]string, map[string]bool) {
	t.Helper()
	rows, err := db.Query(context.Background(), readableViewsSQL)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	barrier := map[string]bool{}
	for rows.Next() {
		var name string
		var ok bool
		if err := rows.Scan(&name, &ok); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		barrier[name] = ok
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names, barrier
}

// TestReadableViewsAreBarriers: every view of convo that a role other than
// its owner may read, found from the catalog (so a view added later is
// covered), is security_barrier or security_invoker: a view that runs with
// its owner's rights and filters by owner in its WHERE clause would
// otherwise let a caller's cheap function run below that filter, on every
// owner's rows.
func TestReadableViewsAreBarriers(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	names, barrier := readableViews(t, db)
	for _, v := range []string{"message_parts", "orphaned_applied_effects", "stale_generations", "stale_pending_effects"} {
		if !slices.Contains(names, v) {
			t.Fatalf("readable views %v lack %s: the catalog query finds too little", names, v)
		}
	}
	for _, v := range names {
		if !barrier[v] {
			t.Errorf("view convo.%s is readable by other roles but neither security_barrier nor security_invoker", v)
		}
	}
}

// viewsLeakFixture writes, for alice and bob, a row of every view: an
// orphaned applied charge and a stale generation (buildTenant, then a
// generation backdated past generation_stale_after()), a pending effect past
// its deadline (a tool with a deadline of a millisecond), and their parts.
// It returns bob's tenant.
func viewsLeakFixture(t testing.TB, db *pgxpool.Pool) tenant {
	t.Helper()
	trustTools(t, db)
	effRegisterPurchase(t, db, "buy_fast", "tool_call", "1 millisecond")
	var bob tenant
	for _, owner := range []string{"alice", "bob"} {
		n := buildTenant(t, db, owner)
		appendMsg(t, db, n.conv, "assistant", effToolUses(effBuy(owner+"_fast", "buy_fast", 300)))
		mustExec(t, db, `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, started_at)
			VALUES ($1, gen_random_uuid(), $2, $2, $3, clock_timestamp() - convo.generation_stale_after() - interval '1 minute')`,
			n.conv, n.edited, "model-stale-"+owner)
		if owner == "bob" {
			bob = n
		}
	}
	// Past every deadline: the fast effects are stale from here on.
	mustExec(t, db, `SELECT pg_sleep(greatest(0, extract(epoch FROM max(deadline_at) - clock_timestamp())) + 0.01)
		FROM convo.tool_effects WHERE tool_name = 'buy_fast'`)
	names, _ := readableViews(t, db)
	for _, v := range names {
		owners := queryRow[int64](t, db, `SELECT count(DISTINCT c.owner_id) FROM convo.`+v+` v
			JOIN convo.conversations c ON c.id = v.conversation_id WHERE c.owner_id IN ('alice', 'bob')`)
		if owners != 2 {
			t.Fatalf("view %s holds rows of %d of the two owners: the fixture must give it both", v, owners)
		}
	}
	return bob
}

// TestViewsShowNoOtherOwnersRows: a session creates a cheap function in
// pg_temp that reports every value it is given (as any role may) and puts
// it in its own WHERE clause over each readable view. Run as a login member
// of convo_app with owner alice set, and of convo_reader, with bob's rows in
// every view, the function sees only rows the view returns to that session:
// for the application none of bob's (his conversation id, charge, key,
// model), and where the view is not the session's to read, nothing.
func TestViewsShowNoOtherOwnersRows(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	bob := viewsLeakFixture(t, db)
	views, _ := readableViews(t, db)
	ctx := context.Background()
	for _, role := range []string{"convo_app", "convo_reader"} {
		t.Run(role, func(t *testing.T) {
			login := loginAs(t, db, role)
			var mu sync.Mutex
			var seen []string
			cfg := login.Config().ConnConfig.Copy()
			cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, strings.TrimPrefix(n.Message, "saw "))
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			for _, v := range views {
				t.Run(v, func(t *testing.T) {
					mu.Lock()
					seen = nil
					mu.Unlock()
					// In a transaction rolled back at the end, so that the
					// function (a temporary object of the role) goes with it.
					tx, err := conn.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback(ctx)
					for _, st := range []string{`SELECT set_config('convo.owner_id', 'alice', true)`,
						`CREATE FUNCTION pg_temp.leak(text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001
						   AS $$ BEGIN RAISE NOTICE 'saw %', $1; RETURN true; END $$`} {
						if _, err := tx.Exec(ctx, st); err != nil {
							t.Fatal(err)
						}
					}
					// What the view returns to this session (nothing when it
					// may not read it), then what the function is shown.
					read := func(sql string) ([]string, error) {
						sp, err := tx.Begin(ctx)
						if err != nil {
							t.Fatal(err)
						}
						rows, _ := sp.Query(ctx, sql)
						out, err := pgx.CollectRows(rows, pgx.RowTo[string])
						if err != nil {
							sp.Rollback(ctx)
							return nil, err
						}
						return out, sp.Commit(ctx)
					}
					returned, readErr := read(`SELECT v::text FROM convo.` + v + ` v`)
					if _, err := read(`SELECT v::text FROM convo.` + v + ` v WHERE pg_temp.leak(v::text)`); (err == nil) != (readErr == nil) {
						t.Fatalf("reading %s: %v, with the function: %v", v, readErr, err)
					}
					if readErr != nil {
						requireSQLState(t, readErr, "42501")
					}
					if role == "convo_app" && readErr == nil && len(returned) == 0 {
						t.Fatalf("%s returns no row to alice: the fixture gives her one", v)
					}
					mu.Lock()
					defer mu.Unlock()
					for _, s := range seen {
						if !slices.Contains(returned, s) {
							t.Errorf("the caller's function saw a row %s does not return: %s", v, s)
						}
						if role == "convo_app" && (strings.Contains(s, bob.conv) || strings.Contains(s, "bob")) {
							t.Errorf("alice's session saw bob's data through %s: %s", v, s)
						}
					}
				})
			}
		})
	}
}
