package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on 0051: record_tool_call reads a call's path from the live-path
// index when its message continues a segment of it; write_messages reads
// each parent by a lateral key lookup; json_path and effect_money are
// PL/pgSQL. Compared with the contract's oracle (attack_rerun_place_test.go)
// and with the walk up the tree (path_segments) and the SQL helpers 0051
// replaced.

// livePathSegmentsDiffer counts the messages that continue their parent's
// branch with the parent on the live path (the messages the live-path read
// serves) whose segments, as record_tool_call reads them from the index
// (the segments above the message's plus its own cut at its depth), are not
// path_segments' walk up from the message.
const livePathSegmentsDiffer = `
	SELECT count(*) FROM convo.messages m
	 WHERE m.conversation_id = $1 AND m.sibling_index = 1 AND m.parent_id IS NOT NULL
	   AND EXISTS (SELECT 1 FROM convo.live_path b
	                WHERE b.conversation_id = m.conversation_id AND b.branch_id = m.branch_id
	                  AND m.depth - 1 BETWEEN b.min_depth AND b.max_depth)
	   AND (SELECT array_agg(l.branch_id::text || ':' || CASE WHEN l.branch_id = m.branch_id THEN m.depth ELSE l.max_depth END
	                         ORDER BY l.min_depth)
	          FROM convo.live_path l
	         WHERE l.conversation_id = m.conversation_id
	           AND l.min_depth <= (SELECT b.min_depth FROM convo.live_path b
	                                WHERE b.conversation_id = m.conversation_id AND b.branch_id = m.branch_id
	                                  AND m.depth - 1 BETWEEN b.min_depth AND b.max_depth))
	       IS DISTINCT FROM
	       (SELECT array_agg(s.branch_id::text || ':' || s.max_depth ORDER BY s.max_depth)
	          FROM convo_private.path_segments(m.conversation_id, m.id) s)`

// livePathServed counts the messages the live-path read serves now.
const livePathServed = `
	SELECT count(*) FROM convo.messages m
	 WHERE m.conversation_id = $1 AND m.sibling_index = 1 AND m.parent_id IS NOT NULL
	   AND EXISTS (SELECT 1 FROM convo.live_path b
	                WHERE b.conversation_id = m.conversation_id AND b.branch_id = m.branch_id
	                  AND m.depth - 1 BETWEEN b.min_depth AND b.max_depth)`

// callPathStep makes one write the oracle's step does not: calls below a
// head moved up its branch (the head not the deepest of it), a head move
// and calls in one transaction, a generation begun under the head and
// completed after the head moved on down (or up, or away), a call on a
// root of an empty conversation's first message.
func (o *oracleConv) callPathStep() {
	o.t.Helper()
	head := o.head()
	if head == "" {
		o.step()
		return
	}
	ctx := context.Background()
	switch r := o.rng.Intn(5); r {
	case 0: // head up its branch, then calls under it (a branch of their own)
		m := o.msgs[head]
		for k := o.rng.Intn(4); k > 0 && m.parent != ""; k-- {
			m = o.msgs[m.parent]
		}
		moveHead(o.t, o.db, o.conv, m.id)
		parts := o.newParts(o.callCount())
		id := appendMsg(o.t, o.db, o.conv, "assistant", partsJSON(parts))
		o.log = append(o.log, fmt.Sprintf("head up to %s, calls %s %v", m.id[:8], id[:8], parts))
		o.added(id, m.id, "assistant", false, parts)
	case 1: // move and calls in one transaction, and the next round in it too
		m := o.pick("", nil)
		parts := o.newParts(o.callCount())
		more := o.newParts(1 + o.rng.Intn(2))
		var id, res, id2 string
		err := pgx.BeginFunc(ctx, o.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2)`, o.conv, m.id); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'assistant', $2)::text`, o.conv, partsJSON(parts)).Scan(&id); err != nil {
				return err
			}
			var ids []string
			for _, p := range parts {
				ids = append(ids, p.id)
			}
			if err := tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', $2)::text`, o.conv, effToolResults(ids...)).Scan(&res); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT convo.append_message($1, 'assistant', $2)::text`, o.conv, partsJSON(more)).Scan(&id2)
		})
		if err != nil {
			o.fail("move and calls in one transaction: %v", err)
		}
		o.log = append(o.log, fmt.Sprintf("tx: head to %s, calls %s %v, results %s, calls %s %v", m.id[:8], id[:8], parts, res[:8], id2[:8], more))
		o.added(id, m.id, "assistant", false, parts)
		o.added(res, id, "user", false, nil)
		o.added(id2, res, "assistant", false, more)
	case 2, 3: // a generation begun under the head, completed after the head moved
		gen := beginGeneration(o.t, o.db, o.conv, head, "model-1")
		switch o.rng.Intn(3) {
		case 0: // on down: an agent round below the prompt
			parts := o.newParts(1)
			id := appendMsg(o.t, o.db, o.conv, "assistant", partsJSON(parts))
			o.log = append(o.log, fmt.Sprintf("during a generation under %s: calls %s %v", head[:8], id[:8], parts))
			o.added(id, head, "assistant", false, parts)
		case 1: // up
			if p := o.msgs[head].parent; p != "" {
				moveHead(o.t, o.db, o.conv, p)
				o.log = append(o.log, "during a generation: head up to "+p[:8])
			}
		default: // away
			m := o.pick("", nil)
			moveHead(o.t, o.db, o.conv, m.id)
			o.log = append(o.log, "during a generation: head to "+m.id[:8])
		}
		parts := o.newParts(o.callCount())
		id := completeGeneration(o.t, o.db, o.conv, gen, partsJSON(parts))
		o.log = append(o.log, fmt.Sprintf("late generation under %s: %s %v", head[:8], id[:8], parts))
		o.added(id, head, "assistant", false, parts)
	default:
		o.step()
	}
}

// TestAttackCallPathOracle: over random histories made of the oracle's
// writes and the shapes the live-path read meets (a head moved up its
// branch, a move and calls in one transaction, late generations, calls on
// a first message at depth 0), every call's decision, fork point and
// repeats_effect_id is the contract's, and after every write the segments
// that record_tool_call would read from the index for any message it
// serves are path_segments' walk.
func TestAttackCallPathOracle(t *testing.T) {
	db := newDB(t)
	for tool, scope := range oracleScopes {
		effRegisterPurchase(t, db, tool, scope, "1 hour")
	}
	registerTestTool(t, db, "look", false, `{"type": "object"}`)
	served := int64(0)
	for seed := 101; seed <= 124; seed++ {
		t.Run(fmt.Sprintf("seed%03d", seed), func(t *testing.T) {
			o := newOracleConv(t, db, seed)
			if seed%4 == 1 {
				// Calls on the first message (depth 0).
				parts := o.newParts(2)
				id := appendMsg(t, db, o.conv, "assistant", partsJSON(parts))
				o.added(id, "", "assistant", false, parts)
			}
			for i := 0; i < 60; i++ {
				if o.rng.Intn(2) == 0 {
					o.step()
				} else {
					o.callPathStep()
				}
				if n := queryRow[int64](t, db, livePathSegmentsDiffer, o.conv); n != 0 {
					o.fail("%d messages whose live-path segments are not their walk's", n)
				}
				served += queryRow[int64](t, db, livePathServed, o.conv)
			}
		})
	}
	if served == 0 {
		t.Fatalf("no message was ever served by the live-path read: the comparison compared nothing")
	}
	t.Logf("messages served by the live-path read, summed over the writes: %d", served)
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// forgedShape writes S -> u1 -> a1 [buy x1]; a1 regenerated as a1b (text),
// the head. A call appended below a1b continues a1b's live segment; x1,
// at the same fork point (S) and off its path, is its re-run's candidate.
func forgedShape(t *testing.T, db *pgxpool.Pool) (conv, root, a1b string) {
	t.Helper()
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv = createConversation(t, db, "owner-1", "You buy things.")
	root = headOf(t, db, conv)
	appendMsg(t, db, conv, "user", textParts("buy"))
	a1 := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x1", "buy", 1)))
	a1b = regenerateMsg(t, db, conv, a1, textParts("let me think"))
	return conv, root, a1b
}

// TestAttackCallPathUntouchedIndexDecides: the baseline of the forgeries
// below, with the index as pgconvo keeps it: x2, below a1b, re-runs x1.
func TestAttackCallPathUntouchedIndexDecides(t *testing.T) {
	db := newDB(t)
	conv, _, _ := forgedShape(t, db)
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x2", "buy", 1)))
	requireEqual(t, "x2's decision", effLink(t, db, conv, "x2").Decision, "confirm")
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackCallPathForgedIndexDecides: a superuser (past the guards)
// stretches the root's live_path segment over x1's depth. Before 0051 the
// index never fed a decision (the path was walked up the tree); now x2 is
// decided from it. The decision must stay the tree's (confirm, repeating
// x1); and a wrong decision made while the index was damaged must not
// outlive the repair unseen (rebuild_live_path, then self_check).
func TestAttackCallPathForgedIndexDecides(t *testing.T) {
	db := newDB(t)
	conv, root, _ := forgedShape(t, db)
	mustExec(t, db, `UPDATE convo.live_path SET max_depth = 2 WHERE conversation_id = $1 AND branch_id = $2`, conv, root)
	damaged := failingChecks(t, db)
	if !strings.Contains(damaged, "live_path_index") {
		t.Fatalf("self_check does not see the forged index: %q", damaged)
	}
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x2", "buy", 1)))
	got := effLink(t, db, conv, "x2").Decision
	mustExec(t, db, `SELECT convo_private.rebuild_live_path($1)`, conv)
	after := failingChecks(t, db)
	if got != "confirm" {
		t.Errorf("x2, a re-run of x1 at the same fork point off its path, decided %s from a forged live_path "+
			"(the walk up the tree decides confirm); after rebuild_live_path self_check reports %q", got, after)
	}
}

// TestAttackCallPathDuplicateIndexRowAppends: a stray second row of a
// branch in live_path is refused, written by the superuser past the guards
// (live_path_branch_key, 0052) or as the tables' owner, and writes nothing;
// and an append of a call below the head still succeeds (before 0052 the
// stray row was written, and must not make every such append fail; before
// 0051 record_tool_call never read the index).
func TestAttackCallPathDuplicateIndexRowAppends(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	conv, _, a1b := forgedShape(t, db)
	rows := `SELECT count(*) FROM convo.live_path WHERE conversation_id = $1`
	before := queryRow[int64](t, db, rows, conv)
	stray := `INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth) VALUES ($1, 1, $2, 2)`
	_, err := db.Exec(ctx, stray, conv, a1b)
	requireSQLStateIn(t, err, "23505")
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE convo_owner`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, stray, conv, a1b)
	_ = tx.Rollback(ctx)
	// As the tables' owner the forgery guard refuses it first.
	requireSQLStateIn(t, err, "CV005", "23505")
	requireEqual(t, "live_path rows after the refused strays", queryRow[int64](t, db, rows, conv), before)
	if _, err := db.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`,
		conv, effToolUses(effBuy("x2", "buy", 1))); err != nil {
		t.Errorf("an append with a call below the head: %v", err)
	}
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackCallPathHelpersMatchSQL: json_path and effect_money, now
// PL/pgSQL, answer as the SQL functions they replaced (0051's down
// migration, created in a scratch schema) on odd inputs: non-numbers,
// huge, negative, fractional and exponent amounts, odd currencies, keys
// with quotes, backslashes, unicode, control characters, empty and NULL
// keys and arguments; an error counts as an answer (its SQLSTATE).
func TestAttackCallPathHelpersMatchSQL(t *testing.T) {
	db := newDB(t)
	mustExec(t, db, `CREATE SCHEMA atk_old`)
	mustExec(t, db, `
		CREATE FUNCTION atk_old.effect_money(p_input jsonb, p_amount_arg text, p_currency_arg text,
		                                     OUT amount_minor bigint, OUT currency text)
		LANGUAGE sql IMMUTABLE
		BEGIN ATOMIC
		    SELECT CASE WHEN jsonb_typeof(p_input -> p_amount_arg) = 'number'
		                 AND (p_input ->> p_amount_arg)::numeric = trunc((p_input ->> p_amount_arg)::numeric)
		                 AND abs((p_input ->> p_amount_arg)::numeric) < 9e18
		                THEN (p_input ->> p_amount_arg)::numeric::bigint END,
		           CASE WHEN p_input ->> p_currency_arg ~ '^[A-Z]{3}$' THEN p_input ->> p_currency_arg END;
		END`)
	mustExec(t, db, `
		CREATE FUNCTION atk_old.json_path(p_parent text, p_key text) RETURNS text
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		RETURN p_parent || CASE WHEN p_key ~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN '.' || p_key
		                        ELSE '[' || to_jsonb(p_key)::text || ']' END`)
	// Each answer as text, or the error's SQLSTATE.
	mustExec(t, db, `
		CREATE FUNCTION atk_old.money_answer(p_new boolean, p_input jsonb, p_a text, p_c text) RETURNS text
		LANGUAGE plpgsql AS $$
		DECLARE r record;
		BEGIN
		    IF p_new THEN SELECT * INTO r FROM convo_private.effect_money(p_input, p_a, p_c);
		    ELSE SELECT * INTO r FROM atk_old.effect_money(p_input, p_a, p_c); END IF;
		    RETURN coalesce(r.amount_minor::text, 'NULL') || ' ' || coalesce(r.currency, 'NULL');
		EXCEPTION WHEN OTHERS THEN RETURN 'error ' || SQLSTATE;
		END $$`)
	mustExec(t, db, `
		CREATE FUNCTION atk_old.path_answer(p_new boolean, p_parent text, p_key text) RETURNS text
		LANGUAGE plpgsql AS $$
		BEGIN
		    RETURN coalesce(CASE WHEN p_new THEN convo_private.json_path(p_parent, p_key)
		                         ELSE atk_old.json_path(p_parent, p_key) END, 'NULL');
		EXCEPTION WHEN OTHERS THEN RETURN 'error ' || SQLSTATE;
		END $$`)

	amounts := []string{`1`, `0`, `-0`, `-7`, `1.0`, `1.5`, `-1.5`, `1e2`, `1E+2`, `1e-2`, `0.000`, `9e18`, `8999999999999999999`,
		`-8999999999999999999`, `8999999999999999999.0`, `9223372036854775807`, `-9223372036854775808`, `1e400`, `-1e400`,
		`1e-400`, `123456789012345678901234567890`, `"12"`, `"abc"`, `"1e2"`, `true`, `null`, `[]`, `[1]`, `{}`, `{"a": 1}`}
	currencies := []string{`"USD"`, `"usd"`, `"US"`, `"USDX"`, `"ÜSD"`, `"USD\n"`, `"\nUSD"`, `" USD"`, `123`, `null`, `["USD"]`,
		`"EUR"`, `""`, `"ＵＳＤ"`}
	keys := []string{"amount", "a\"b", "ü", "", "a b", "x\\y", "\u0001", "😀"}
	var inputs []string
	for _, a := range amounts {
		for _, c := range currencies {
			inputs = append(inputs, fmt.Sprintf(`{"amount": %s, "currency": %s, "a\"b": %s, "ü": %s, "": %s, "a b": %s, "x\\y": %s, "\u0001": %s, "😀": %s}`,
				a, c, a, c, a, c, a, c, a))
		}
	}
	inputs = append(inputs, `[]`, `"x"`, `1`, `null`)
	diff := queryRowsAs[string](t, db, `
		SELECT i.j::text || ' / ' || coalesce(a.k, 'NULL') || ' / ' || coalesce(c.k, 'NULL') || ': new ' || n || ', old ' || o
		  FROM (SELECT s::jsonb FROM unnest($1::text[]) AS s) AS i (j)
		 CROSS JOIN (SELECT unnest($2::text[]) UNION ALL SELECT NULL) AS a (k)
		 CROSS JOIN (SELECT unnest($2::text[]) UNION ALL SELECT NULL) AS c (k)
		 CROSS JOIN LATERAL (SELECT atk_old.money_answer(true, i.j, a.k, c.k) AS n,
		                            atk_old.money_answer(false, i.j, a.k, c.k) AS o) x
		 WHERE n IS DISTINCT FROM o
		 LIMIT 20`, inputs, keys)
	if len(diff) > 0 {
		t.Errorf("effect_money differs from the SQL version:\n%s", strings.Join(diff, "\n"))
	}
	requireEqual(t, "effect_money comparisons that passed through a number",
		queryRow[bool](t, db, `SELECT atk_old.money_answer(true, '{"amount": 5, "currency": "USD"}', 'amount', 'currency') = '5 USD'`), true)

	pathKeys := append([]string{}, keys...)
	pathKeys = append(pathKeys, "abc", "_x", "A_1", "1a", "a\n", "a-b", "a.b", "ab\t", "ß", "Z9", "a$", "$", "[0]", "\\", "\"", "'", "é", "\u2028",
		strings.Repeat("k", 300))
	pdiff := queryRowsAs[string](t, db, `
		SELECT coalesce(p.p, 'NULL') || ' / ' || coalesce(k.k, 'NULL') || ': new ' || n || ', old ' || o
		  FROM (SELECT unnest(ARRAY['$', '$.a[2]', '', NULL, '$["x"]'])) AS p (p)
		 CROSS JOIN (SELECT unnest($1::text[]) UNION ALL SELECT NULL) AS k (k)
		 CROSS JOIN LATERAL (SELECT atk_old.path_answer(true, p.p, k.k) AS n, atk_old.path_answer(false, p.p, k.k) AS o) x
		 WHERE n IS DISTINCT FROM o
		 LIMIT 20`, pathKeys)
	if len(pdiff) > 0 {
		t.Errorf("json_path differs from the SQL version:\n%s", strings.Join(pdiff, "\n"))
	}
	requireEqual(t, "json_path of an odd key", queryRow[string](t, db, `SELECT convo_private.json_path('$', 'a"b')`), `$["a\"b"]`)
}

// TestAttackCallPathEmptiedIndexDecides: a live_path emptied by a
// superuser sends every call to the walk: x2 still re-runs x1.
func TestAttackCallPathEmptiedIndexDecides(t *testing.T) {
	db := newDB(t)
	conv, _, _ := forgedShape(t, db)
	mustExec(t, db, `DELETE FROM convo.live_path WHERE conversation_id = $1`, conv)
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x2", "buy", 1)))
	requireEqual(t, "x2's decision over an emptied index", effLink(t, db, conv, "x2").Decision, "confirm")
}

// TestAttackCallPathForgedIndexDropsASegment: S -> u1 -> a1 [buy x1] ->
// r1 -> a2 [buy2 x2]; a2 regenerated as a2b (text); a3 [buy x3] below a2b.
// x1 is on x3's path (the root's segment): x3 executes. A superuser drops
// the root's segment from live_path: x3 must still execute, not confirm
// a re-run of x1, a call of its own path.
func TestAttackCallPathForgedIndexDropsASegment(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, db, "buy2", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "You buy things.")
	root := headOf(t, db, conv)
	appendMsg(t, db, conv, "user", textParts("buy"))
	agentRound(t, db, conv, "buy", "x1", 1)
	a2 := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x2", "buy2", 1)))
	regenerateMsg(t, db, conv, a2, textParts("let me think"))
	mustExec(t, db, `DELETE FROM convo.live_path WHERE conversation_id = $1 AND branch_id = $2`, conv, root)
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x3", "buy", 1)))
	got := effLink(t, db, conv, "x3").Decision
	mustExec(t, db, `SELECT convo_private.rebuild_live_path($1)`, conv)
	if got != "execute" {
		t.Errorf("x3, whose only earlier call of buy at its fork point (x1) is on its path, decided %s from a live_path "+
			"missing the root's segment; after rebuild_live_path self_check reports %q", got, failingChecks(t, db))
	}
}
