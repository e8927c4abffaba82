package bench

import (
	"context"
	"testing"
)

// checkLedgerRows checks, on a server the tiny run holds, that
// bench.ledger_rows() puts bodies in place that write a call's rows without
// deciding (a call below the schema's minimum is executed, its effect
// pending with its first event, and it settles), and that the definitions
// it answers put pgconvo's functions back as they were (the same
// definitions; the same call rejected).
func checkLedgerRows(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn := heldConn(t, url)
	const defs = `SELECT string_agg(pg_get_functiondef(f) || coalesce(array_to_string(p.proconfig, ','), '') || p.prosecdef
	                                || p.proowner::regrole || coalesce(p.proacl::text, ''), '' ORDER BY f::text)
	                FROM unnest(ARRAY['convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb, uuid, int)',
	                                  'convo.settle_effect(uuid, uuid, text, text, int, text, jsonb)',
	                                  'convo.effect_for_call(uuid, text)']::regprocedure[]) f
	                JOIN pg_proc p ON p.oid = f`
	var before, during, after string
	if err := conn.QueryRow(ctx, defs).Scan(&before); err != nil {
		t.Fatal(err)
	}
	conv, owner := firstPick(t, conn, "writes")
	// call appends a call below the schema's minimum as the application's
	// role, settles it when it is executed, and answers its decision and
	// the effect's events, all rolled back.
	call := func(id string) (decision string, events int) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('convo.owner_id', $2, true)`, appRole, owner); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', jsonb_build_array(jsonb_build_object('type', 'tool_use',
			'id', $2::text, 'name', 'bench_purchase', 'input', '{"amount_minor": 0, "currency": "EUR"}'::jsonb)))`, conv, id); err != nil {
			t.Fatalf("appending call %s: %v", id, err)
		}
		var effect string
		if err := tx.QueryRow(ctx, `SELECT effect_id::text, decision FROM convo.effect_for_call($1, $2)`, conv, id).Scan(&effect, &decision); err != nil {
			t.Fatalf("effect_for_call %s: %v", id, err)
		}
		if decision == "execute" {
			if _, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2::uuid, 'applied', p_external_ref => 'ch_1')`, conv, effect); err != nil {
				t.Fatalf("settling %s: %v", id, err)
			}
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('role', 'none', true)`); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM convo.tool_effect_events WHERE effect_id = $1::uuid`, effect).Scan(&events); err != nil {
			t.Fatal(err)
		}
		return decision, events
	}
	if d, n := call("toolu_pgconvo_before"); d != "rejected" || n != 1 {
		t.Errorf("before: decision %s with %d events, want rejected with 1", d, n)
	}
	if _, err := conn.Exec(ctx, ledgerRowsSQL); err != nil {
		t.Fatal(err)
	}
	var pgconvo []string
	if err := conn.QueryRow(ctx, `SELECT bench.ledger_rows()`).Scan(&pgconvo); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, defs).Scan(&during); err != nil {
		t.Fatal(err)
	}
	if d, n := call("toolu_rows_alone"); d != "execute" || n != 2 {
		t.Errorf("the ledger's rows alone: decision %s with %d events, want execute with 2 (requested, then applied)", d, n)
	}
	if _, err := conn.Exec(ctx, `SELECT bench.ledger_rows()`); err == nil {
		t.Errorf("bench.ledger_rows() twice succeeded, want an error (what it answered would be the bench's bodies)")
	}
	for _, def := range pgconvo {
		if _, err := conn.Exec(ctx, def); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(ctx, defs).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if during == before {
		t.Errorf("bench.ledger_rows() changed nothing")
	}
	if after != before {
		t.Errorf("the definitions bench.ledger_rows() answered left the functions other than they were:\nbefore %s\nafter %s", before, after)
	}
	if d, n := call("toolu_pgconvo_after"); d != "rejected" || n != 1 {
		t.Errorf("after: decision %s with %d events, want rejected with 1", d, n)
	}
}
