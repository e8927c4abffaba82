package tests

import (
	"fmt"
	"testing"
)

// TestLedgerCheckComputesEachForkPoint: ledger_problems takes each call's
// fork point from one walk down the tree (fork_points), never from the fork
// points recorded. On a tree of agent turns, edits and regenerations,
// fork_points gives every message what fork_point_of's walk up gives it;
// a recorded fork point rewritten by a superuser's hand (the first call of
// a turn, whose later calls the write path derives from it, or one in the
// middle) is reported for that call, and only for it, naming the right one.
func TestLedgerCheckComputesEachForkPoint(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "You sell credits.")
	user := appendMsg(t, db, conv, "user", textParts("Buy credits."))
	round := func(id string, amount int) {
		appendMsg(t, db, conv, "assistant", effToolUses(effBuy(id, "buy", amount)))
		appendMsg(t, db, conv, "tool", effToolResults(id))
	}
	for i := 1; i <= 5; i++ {
		round(fmt.Sprintf("call_a%d", i), i)
	}
	appendMsg(t, db, conv, "user", textParts("And more."))
	for i := 1; i <= 3; i++ {
		round(fmt.Sprintf("call_b%d", i), i)
	}
	edited := editMsg(t, db, conv, user, textParts("Buy other credits."))
	for i := 1; i <= 3; i++ {
		round(fmt.Sprintf("call_c%d", i), 10+i)
	}
	requireEqual(t, "failing checks", failingChecks(t, db), "")
	requireEqual(t, "messages whose fork point differs from fork_point_of's", queryRow[int64](t, db, `
		SELECT count(*) FROM convo.messages m
		  LEFT JOIN convo_private.fork_points($1) f ON f.message_id = m.id
		 WHERE m.conversation_id = $1
		   AND (f.message_id IS NULL OR f.fork IS DISTINCT FROM convo_private.fork_point_of($1, m.id))`, conv), 0)
	requireEqual(t, "messages walked", queryRow[int64](t, db, `SELECT count(*) FROM convo_private.fork_points($1)`, conv),
		queryRow[int64](t, db, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1`, conv))

	for _, call := range []string{"call_a1", "call_a4", "call_b2"} {
		t.Run(call, func(t *testing.T) {
			right := effLink(t, db, conv, call).ForkPointID
			tx, err := db.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(t.Context())
			if _, err := tx.Exec(t.Context(), `ALTER TABLE convo.tool_effect_calls DISABLE TRIGGER tool_effect_calls_90_append_only;
				UPDATE convo.tool_effect_calls SET fork_point_id = '`+edited+`' WHERE conversation_id = '`+conv+`' AND tool_call_id = '`+call+`';
				ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only`); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(t.Context(), `SELECT row_name || ': ' || problem FROM convo_private.ledger_problems($1)`, conv)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			requireSlice(t, "the ledger's problems", got,
				[]string{fmt.Sprintf("tool call %s: fork point %s, the call's is %s", call, edited, right)})
		})
	}
}
