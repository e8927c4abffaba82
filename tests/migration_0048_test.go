package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestMigration0048OnADatabaseThatHasData: going up to 0048 on a database
// at 0047 whose ledger holds calls on two branches gives each call its
// message's place (branch and depth), keeps the append-only guard as it
// was, and the next re-run is found by place; down and up again too.
func TestMigration0048OnADatabaseThatHasData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	if err := m.Goto(ctx, 47); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	effRegisterPurchase(t, pool, "buy", "tool_call", "1 hour")
	conv := queryRow[string](t, pool, `SELECT convo.create_conversation('owner-m', NULL)::text`)
	question := appendMsg(t, pool, conv, "user", textParts("buy"))
	agentRound(t, pool, conv, "buy", "c1", 1)
	editMsg(t, pool, conv, question, textParts("buy again"))
	agentRound(t, pool, conv, "buy", "c2", 2)
	guard := `SELECT tgenabled::text FROM pg_trigger
	           WHERE tgrelid = 'convo.tool_effect_calls'::regclass AND tgname = 'tool_effect_calls_90_append_only'`
	before := queryRow[string](t, pool, guard)

	for _, step := range []uint{48, 47, 48} {
		if err := m.Goto(ctx, step); err != nil {
			t.Fatalf("to version %d: %v", step, err)
		}
	}
	requireEqual(t, "the append-only guard after the upgrade", queryRow[string](t, pool, guard), before)
	requireEqual(t, "calls placed at their messages", queryRow[int64](t, pool, `
		SELECT count(*) FROM convo.tool_effect_calls l
		  JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
		 WHERE (l.branch_id, l.depth) = (m.branch_id, m.depth)`), 2)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// A third question at the same fork point: both earlier calls are off
	// its path; it repeats the latest, c2's.
	editMsg(t, pool, conv, question, textParts("buy a third time"))
	appendMsg(t, pool, conv, "assistant", effToolUses(effBuy("c3", "buy", 3)))
	l := effLink(t, pool, conv, "c3")
	requireEqual(t, "the decision of c3", l.Decision, "confirm")
	requireEqual(t, "what c3 repeats", effRead(t, pool, conv, l.EffectID).RepeatsEffectID, effLink(t, pool, conv, "c2").EffectID)
	requireEqual(t, "self_check failures", failingChecks(t, pool), "")
}
