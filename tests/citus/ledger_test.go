package citus

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// effect is what effect_for_call answers.
type effect struct {
	ID       string
	Decision string
	State    string
}

func effectFor(t *testing.T, tx pgx.Tx, conv, call string) effect {
	t.Helper()
	var e effect
	err := tx.QueryRow(context.Background(),
		`SELECT effect_id::text, decision, state FROM convo.effect_for_call($1, $2)`, conv, call).Scan(&e.ID, &e.Decision, &e.State)
	if err != nil {
		t.Fatalf("effect_for_call(%s): %v", call, err)
	}
	return e
}

// ledgerStory is the ledger's seed story on a distributed database: an
// agent asks to buy, the ledger says execute, the charge is settled; a
// regenerated answer that calls the same purchase again on the new branch
// is held for confirmation, and declined; an invalid call is rejected; the
// stranded charge is compensated. purchase is a registered tool.
func ledgerStory(t *testing.T, app *pgxpool.Pool, owner, purchase string) {
	t.Helper()
	ctx := context.Background()
	conv := pgtest.NewID()
	err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		one[string](t, tx, `SELECT convo.create_conversation($1, NULL, '{}', $2)`, owner, conv)
		one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("buy it"))
		asked := one[string](t, tx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
			pgtest.EffToolUses(pgtest.EffBuy("call-1", purchase, 500)))
		e := effectFor(t, tx, conv, "call-1")
		if e.Decision != "execute" || e.State != "pending" {
			t.Errorf("first call: %+v, want execute pending", e)
		}
		if _, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2::uuid, 'applied', 'ch_1', 200)`, conv, e.ID); err != nil {
			return err
		}
		one[string](t, tx, `SELECT convo.append_message($1, 'tool', $2)`, conv, pgtest.EffToolResults("call-1"))
		// The answer regenerated: the same purchase on a new branch.
		one[string](t, tx, `SELECT convo.regenerate($1, $2, $3)`, conv, asked,
			pgtest.EffToolUses(pgtest.EffBuy("call-2", purchase, 500)))
		again := effectFor(t, tx, conv, "call-2")
		if again.Decision != "confirm" || again.State != "awaiting_confirmation" {
			t.Errorf("the re-run on a new branch: %+v, want confirm awaiting_confirmation", again)
		}
		if _, err := tx.Exec(ctx, `SELECT convo.decline_effect($1, $2::uuid, 'alice')`, conv, again.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT convo.compensate_effect($1, $2::uuid, 're_1')`, conv, e.ID); err != nil {
			return err
		}
		state := one[string](t, tx, `SELECT state FROM convo.effect_for_call($1, 'call-1')`, conv)
		if state != "compensated" {
			t.Errorf("the stranded charge after compensation: %s", state)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the ledger story: %v", err)
	}
	// A call that does not exist is CV002, looked up on the conversation's
	// node only.
	err = inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT * FROM convo.effect_for_call($1, 'no-such-call')`, conv)
		return err
	})
	pgtest.RequireSQLState(t, err, "CV002")
}

// TestLedgerOnDistributedDatabase runs the ledger's story on a distributed
// database, with a tool registered before distributing and one registered
// after, by a DBA's login: every node's copy of the allowlist holds it, and
// registering it again with the same settings returns its version.
func TestLedgerOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "20 seconds")
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	ledgerStory(t, app, "alice", "purchase")
	if v := pgtest.EffRegisterPurchase(t, admin, "purchase_later", "tool_call", "20 seconds"); v != 1 {
		t.Fatalf("a tool registered on the distributed database: version %d", v)
	}
	if v := pgtest.EffRegisterPurchase(t, admin, "purchase_later", "tool_call", "20 seconds"); v != 1 {
		t.Fatalf("the same registration again: version %d", v)
	}
	if v := pgtest.EffRegisterPurchase(t, admin, "purchase_later", "tool_call", "30 seconds"); v != 2 {
		t.Fatalf("another deadline: version %d", v)
	}
	copies := pgtest.QueryRow[string](t, n.pool, `
		SELECT string_agg(result, ',' ORDER BY nodeport) FROM run_command_on_placements('convo.tools',
		    $$SELECT count(*) FROM %s WHERE name = 'purchase_later'$$)`)
	if copies != "2,2,2" && copies != "2,2" {
		t.Fatalf("the copies of convo.tools hold %s versions of the new tool", copies)
	}
	ledgerStory(t, app, "bob", "purchase_later")
	_, err := app.Exec(context.Background(), `SELECT convo.register_tool('mine', false, '{}')`)
	pgtest.RequireSQLState(t, err, "42501")
}

// TestViewsOnDistributedDatabase reads the views on a distributed
// database, as the application and as a reader, against an undistributed
// database's answers to the same story: effects left pending past their
// deadline, applied effects stranded on abandoned branches, generations
// left streaming.
func TestViewsOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	saw := func(distributed bool) []string {
		n := c.newDatabase(t)
		migrateUp(t, n)
		pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "1 millisecond")
		if distributed {
			distribute(t, n)
		}
		app := pgtest.LoginAs(t, n.pool, "convo_app")
		reader := pgtest.LoginAs(t, n.pool, "convo_reader")
		for i := 0; i < 6; i++ {
			owner := []string{"alice", "bob"}[i%2]
			conv := pgtest.NewID()
			err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
				one[string](t, tx, `SELECT convo.create_conversation($1, NULL, '{}', $2)`, owner, conv)
				asked := one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("buy"))
				call := one[string](t, tx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
					pgtest.EffToolUses(pgtest.EffBuy("call-1", "purchase", 100+i)))
				one[string](t, tx, `SELECT convo.begin_generation($1, $2, 'model-a')`, conv, asked)
				if i%3 == 0 { // applied, then stranded by a regenerated answer
					e := effectFor(t, tx, conv, "call-1")
					if _, err := tx.Exec(context.Background(), `SELECT convo.settle_effect($1, $2::uuid, 'applied', 'ch', 200)`, conv, e.ID); err != nil {
						return err
					}
					one[string](t, tx, `SELECT convo.regenerate($1, $2, $3)`, conv, call, textParts("no purchase"))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		pgtest.MustExec(t, n.pool, `SELECT pg_sleep(0.01)`)
		var out []string
		for _, owner := range []string{"alice", "bob"} {
			err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
				out = append(out, owner+" pending "+one[string](t, tx,
					`SELECT count(*) || ' ' || count(DISTINCT conversation_id) FROM convo.stale_pending_effects`))
				out = append(out, owner+" orphaned "+one[string](t, tx,
					`SELECT count(*) || ' ' || coalesce(sum(amount_minor), 0) || ' ' || coalesce(string_agg(tool_call_ids[1], ','), '')
					   FROM convo.orphaned_applied_effects`))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, "reader generations "+pgtest.QueryRow[string](t, reader, `SELECT count(*)::text FROM convo.stale_generations`))
		out = append(out, "reader pending "+pgtest.QueryRow[string](t, reader, `SELECT count(*)::text FROM convo.stale_pending_effects`))
		out = append(out, "reader orphaned "+pgtest.QueryRow[string](t, reader, `SELECT count(*)::text FROM convo.orphaned_applied_effects`))
		return out
	}
	distributed, single := saw(true), saw(false)
	if mustJSON(distributed) != mustJSON(single) {
		t.Fatalf("the views:\ndistributed %v\none server  %v", distributed, single)
	}
	if mustJSON(single) != `["alice pending 2 2","alice orphaned 1 100 call-1","bob pending 2 2","bob orphaned 1 103 call-1",`+
		`"reader generations 0","reader pending 4","reader orphaned 2"]` {
		t.Errorf("the views: %v", single)
	}
}
