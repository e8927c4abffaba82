package citus

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// allowlistCopies reads every node's copy of convo.tools, coordinator
// first: for each, its rows as "name vN effectful E schema S by B at T".
func allowlistCopies(t *testing.T, c *cluster, n *node) []map[string]string {
	t.Helper()
	ctx := context.Background()
	var copies []map[string]string
	for _, u := range append([]string{n.url}, c.workerURLs(n)...) {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `SELECT name || ' v' || version,
		        format('effectful %s schema %s by %s at %s', effectful, args_schema, registered_by,
		               extract(epoch FROM registered_at))
		   FROM convo.tools`)
		if err != nil {
			t.Fatal(err)
		}
		copy := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			copy[k] = v
		}
		rows.Close()
		conn.Close(ctx)
		copies = append(copies, copy)
	}
	return copies
}

// requireNoContradiction fails where two nodes hold one version of a tool
// otherwise.
func requireNoContradiction(t *testing.T, copies []map[string]string) {
	t.Helper()
	for i, copy := range copies[1:] {
		for k, v := range copy {
			if w, ok := copies[0][k]; !ok || w != v {
				t.Errorf("worker %d holds %s as %q, the coordinator as %q (held: %v)", i+1, k, v, w, ok)
			}
		}
	}
}

// TestAttackAllowlistCopiesDiverge: convo.tools is a reference table, one
// copy on every node. On a distributed database register_tool's router
// writes each copy by a call on its node, and convo_admin may EXECUTE those
// calls itself (register_tool_on_node_delegated, register_tool_here). A
// DBA's login (not a superuser) that calls them by hand can neither write
// a worker's copy with rows the coordinator's does not hold (CV005,
// nothing written) nor make two copies hold one version otherwise; a copy
// that missed a version gets it from the next register_tool of that name.
func TestAttackAllowlistCopiesDiverge(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	key := pgtest.QueryRow[string](t, admin, `SELECT k::text FROM convo_node.node_keys() k LIMIT 1`)

	// A worker's copy written with rows of the caller's own making.
	forged := `{"name": "side_tool", "seal": "x", "versions": [{"name": "side_tool", "version": 1, "effectful": false,
		"args_schema": true, "idempotency_scope": "tool_call", "deadline": "00:00:20", "amount_arg": null,
		"currency_arg": null, "registered_at": "2026-01-01T00:00:00Z", "registered_by": "convo_admin"}]}`
	_, err := admin.Exec(ctx, `SELECT convo_node.register_tool_on_node_delegated('`+key+`'::uuid, ARRAY[$1::jsonb])`, forged)
	if !errIs(err, "CV005") {
		t.Errorf("register_tool_on_node_delegated with rows the coordinator did not seal: %v, want CV005", err)
	}
	// The same rows with the seal of another tool's versions.
	var sealed string
	err = pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT convo_node.register_tool_here('other_tool', false, 'true', 'tool_call',
			'20 seconds', NULL, NULL)::text`).Scan(&sealed)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, `SELECT convo_node.register_tool_on_node_delegated('`+key+`'::uuid,
		ARRAY[jsonb_set($1::jsonb, '{seal}', $2::jsonb -> 'seal')])`, forged, sealed)
	if !errIs(err, "CV005") {
		t.Errorf("register_tool_on_node_delegated with another tool's seal: %v, want CV005", err)
	}
	// Nor can it seal rows itself.
	for _, seal := range []string{`SELECT convo_node.tool_versions_seal('side_tool', '[]')`,
		`SELECT convo_private.keyed_digest('x')`} {
		if _, err := admin.Exec(ctx, seal); !errIs(err, "42501") {
			t.Errorf("%s as convo_admin: %v, want 42501", seal, err)
		}
	}
	for i, copy := range allowlistCopies(t, c, n) {
		if _, ok := copy["side_tool v1"]; ok {
			t.Errorf("node %d holds the forged side_tool v1", i)
		}
	}

	// The coordinator's copy alone, then one worker's from the sealed
	// answer: the copies differ in what they hold, never in how.
	stale := pgtest.QueryRow[string](t, admin, `SELECT convo_node.register_tool_here('here_tool', true,
		'{"type": "object"}', 'tool_call', '20 seconds', NULL, NULL)::text`)
	err = pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT convo_node.register_tool_here('here_tool', true, '{"type": "object",
			"required": ["x"]}', 'tool_call', '20 seconds', NULL, NULL)::text`).Scan(&sealed); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT convo_node.register_tool_on_node_delegated('`+key+`'::uuid, ARRAY[$1::jsonb])`, sealed)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	copies := allowlistCopies(t, c, n)
	requireNoContradiction(t, copies)
	if _, ok := copies[0]["here_tool v2"]; !ok {
		t.Fatalf("the coordinator's copy lacks here_tool v2: %v", copies[0])
	}

	// An earlier sealed answer (here_tool v1 alone) sent to the worker
	// that holds v2 is refused, and changes nothing there.
	_, err = admin.Exec(ctx, `SELECT convo_node.register_tool_on_node_delegated('`+key+`'::uuid, ARRAY[$1::jsonb])`, stale)
	if !errIs(err, "CV005") {
		t.Errorf("register_tool_on_node_delegated with an earlier sealed answer: %v, want CV005", err)
	}

	// register_tool through the API brings every copy to the
	// coordinator's, the same version on each.
	v := pgtest.QueryRow[int](t, admin, `SELECT convo.register_tool('here_tool', true, '{"type": "object", "required": ["x"]}')`)
	if v != 2 {
		t.Errorf("register_tool of here_tool's latest settings: version %d, want 2", v)
	}
	if _, err := admin.Exec(ctx, `SELECT convo.register_tool('other_tool', false, 'true')`); err != nil {
		t.Fatal(err)
	}
	copies = allowlistCopies(t, c, n)
	requireNoContradiction(t, copies)
	for i, copy := range copies {
		for _, k := range []string{"here_tool v1", "here_tool v2", "other_tool v1"} {
			if _, ok := copy[k]; !ok {
				t.Errorf("node %d lacks %s after register_tool: %v", i, k, copy)
			}
		}
	}
}

// TestAttackAllowlistFromAWorker: a DBA's login exists on every node and
// may connect to a worker. There, neither register_tool (whose router
// would take the worker's copy for the coordinator's) nor
// register_tool_here writes any copy: CV005, and every copy is as it was.
func TestAttackAllowlistFromAWorker(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	login, err := url.Parse(admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	worker, err := url.Parse(c.workerURLs(n)[0])
	if err != nil {
		t.Fatal(err)
	}
	worker.User = login.User
	w := pgtest.NewPool(t, worker.String(), pgx.QueryExecModeCacheStatement)
	for _, call := range []string{
		`SELECT convo.register_tool('wtool', true, '{"type": "object"}')`,
		`SELECT convo_node.register_tool_here('htool', true, '{"type": "object"}', 'tool_call', '1 hour', NULL, NULL)`,
	} {
		if _, err := w.Exec(ctx, call); !errIs(err, "CV005") {
			t.Errorf("%s on a worker as convo_admin: %v, want CV005", call, err)
		}
	}
	for i, copy := range allowlistCopies(t, c, n) {
		if len(copy) > 0 {
			t.Errorf("node %d's copy after the calls on a worker: %v, want none", i, copy)
		}
	}
}
