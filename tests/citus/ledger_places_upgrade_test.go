package citus

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// TestLedgerPlacesFilledOnUpgradeOfDistributedDatabase: a distributed
// database that holds the ledger's story, taken back to version 47 (before
// tool calls kept their message's branch and depth); migrating it up fills each
// call's place from its message on every shard, keeps the ledger's
// append-only guard as distribute left it (off on the coordinator's
// distributed tables), and, after distribute again (as docs/scaling.md
// says to upgrade), the story runs again with the re-run found by place.
func TestLedgerPlacesFilledOnUpgradeOfDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	ctx := context.Background()
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "20 seconds")
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	ledgerStory(t, app, "alice", "purchase")
	// Back to version 47, on the distributed database: the calls lose
	// their places, as a database of that version never had them.
	m, err := migrator.Open(n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	schemaChanges.Lock()
	err = m.Goto(ctx, 47)
	schemaChanges.Unlock()
	if err != nil {
		t.Fatalf("migrate down to version 47 on the distributed database: %v", err)
	}
	requireEqual(t, "tool_effect_calls.depth at version 47", pgtest.QueryRow[int64](t, n.pool,
		`SELECT count(*) FROM pg_attribute WHERE attrelid = 'convo.tool_effect_calls'::regclass AND attname = 'depth' AND NOT attisdropped`), 0)
	guard := `SELECT tgenabled::text FROM pg_trigger
	           WHERE tgrelid = 'convo.tool_effect_calls'::regclass AND tgname = 'tool_effect_calls_90_append_only'`
	before := pgtest.QueryRow[string](t, n.pool, guard)

	migrateUp(t, n)
	requireEqual(t, "the append-only guard's state after the upgrade", pgtest.QueryRow[string](t, n.pool, guard), before)
	// Citus does not pass a trigger's DISABLE on to the shards, so the
	// upgrade leaves the calls it found without a place.
	unplaced := pgtest.QueryRow[int64](t, n.pool, `SELECT count(*) FROM convo.tool_effect_calls WHERE branch_id IS NULL`)
	calls := pgtest.QueryRow[int64](t, n.pool, `SELECT count(*) FROM convo.tool_effect_calls`)
	if calls < 2 || unplaced != calls {
		t.Fatalf("after the upgrade: %d calls, %d of them without a place; want all", calls, unplaced)
	}
	distribute(t, n)

	// A third purchase on a third answer: the calls without a place are
	// read as before, and the latest (call-2's) is the one it repeats.
	conv := pgtest.QueryRow[string](t, n.pool, `SELECT id::text FROM convo.conversations WHERE owner_id = 'alice'`)
	asked := pgtest.QueryRow[string](t, n.pool, `SELECT message_id::text FROM convo.tool_effect_calls WHERE tool_call_id = 'call-1'`)
	var third, second effect
	err = inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		one[string](t, tx, `SELECT convo.regenerate($1, $2, $3)`, conv, asked,
			pgtest.EffToolUses(pgtest.EffBuy("call-3", "purchase", 500)))
		third = effectFor(t, tx, conv, "call-3")
		second = effectFor(t, tx, conv, "call-2")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	repeats := pgtest.QueryRow[string](t, n.pool, `SELECT coalesce(repeats_effect_id::text, '') FROM convo.tool_effects
	                                                WHERE conversation_id = $1 AND id = $2`, conv, third.ID)
	if third.Decision != "confirm" || repeats != second.ID {
		t.Errorf("a re-run of calls without a place: %+v repeating %q, want confirm repeating call-2's %s", third, repeats, second.ID)
	}
	placed := pgtest.QueryRow[int64](t, n.pool, `
		SELECT count(*) FROM convo.tool_effect_calls l
		  JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
		 WHERE l.tool_call_id = 'call-3' AND (l.branch_id, l.depth) = (m.branch_id, m.depth)`)
	requireEqual(t, "call-3 placed at its message", placed, 1)
	ledgerStory(t, app, "bob", "purchase")
}

func requireEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}
