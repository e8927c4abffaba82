package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The re-run lookup (rerun_candidate) finds the calls off a path by each
// call's place in the tree (its message's branch and depth, kept on the
// call's row): these tests check what it finds, that the place kept is the
// message's, and that the next call of an agent turn reads the same number
// of ledger rows whatever the turn's length.

// agentRound appends one round of an agent turn below the head: an
// assistant message calling tool with call id, then the user message
// carrying its result. It returns the assistant message's id.
func agentRound(t testing.TB, db *pgxpool.Pool, conv, tool, id string, amount int) string {
	t.Helper()
	msg := appendMsg(t, db, conv, "assistant", effToolUses(effBuy(id, tool, amount)))
	appendMsg(t, db, conv, "user", effToolResults(id))
	return msg
}

// misplacedCalls counts conv's calls placed other than their messages.
func misplacedCalls(t testing.TB, db *pgxpool.Pool, conv string) int64 {
	t.Helper()
	return queryRow[int64](t, db, `
		SELECT count(*) FROM convo.tool_effect_calls l
		  JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
		 WHERE l.conversation_id = $1 AND (l.branch_id, l.depth) IS DISTINCT FROM (m.branch_id, m.depth)`, conv)
}

// TestRerunLookupFindsCallsOffThePath: the calls of the turn above a call
// are on its path (execute); a regenerated answer re-runs the call it
// replaces, which sits deeper on a branch the path leaves (confirm); an
// edited question re-runs the latest call of any other branch at its fork
// point (confirm, naming the latest). Each call's row keeps its message's
// branch and depth.
func TestRerunLookupFindsCallsOffThePath(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	question := appendMsg(t, db, conv, "user", textParts("buy three things"))
	agentRound(t, db, conv, "buy", "a1", 1)
	a2 := agentRound(t, db, conv, "buy", "a2", 2)
	for _, id := range []string{"a1", "a2"} {
		requireEqual(t, "the decision of "+id+", a call of the turn above it on its path", effLink(t, db, conv, id).Decision, "execute")
	}

	// Regenerate the second call's message: the first stays on the path,
	// the second is deeper on the branch the new path leaves.
	regenerateMsg(t, db, conv, a2, effToolUses(effBuy("a2b", "buy", 2)))
	l := effLink(t, db, conv, "a2b")
	requireEqual(t, "the decision of a2b, the regenerated call", l.Decision, "confirm")
	requireEqual(t, "what a2b repeats", effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "a2").EffectID)
	appendMsg(t, db, conv, "user", effToolResults("a2b"))
	agentRound(t, db, conv, "buy", "a3b", 3)
	l = effLink(t, db, conv, "a3b")
	requireEqual(t, "the decision of a3b, whose only call off the path is a2", l.Decision, "confirm")
	requireEqual(t, "what a3b repeats", effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "a2").EffectID)

	// Edit the question: every call so far is on another branch at the
	// same fork point (the conversation); the latest is a3b's.
	editMsg(t, db, conv, question, textParts("buy one thing"))
	msg := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x1", "buy", 1)))
	l = effLink(t, db, conv, "x1")
	requireEqual(t, "the decision of x1, after the edit", l.Decision, "confirm")
	requireEqual(t, "what x1 repeats (the latest call on another branch)",
		effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "a3b").EffectID)

	// Each call's place is its message's.
	requireEqual(t, "calls whose branch and depth are not their message's", misplacedCalls(t, db, conv), 0)
	requireEqual(t, "the depth kept for x1", queryRow[int32](t, db,
		`SELECT depth FROM convo.tool_effect_calls WHERE conversation_id = $1 AND tool_call_id = 'x1'`, conv),
		queryRow[int32](t, db, `SELECT depth FROM convo.messages WHERE conversation_id = $1 AND id = $2`, conv, msg))
	requireEqual(t, "self_check failures", len(failingChecks(t, db)), 0)
}

// rowsRead is how many rows of table run reads, with index access only (as
// on tables too large to read whole, so the planner's choices for the small
// tables of a test do not count), counted by the statistics of its own
// transaction, which is rolled back.
func rowsRead(t *testing.T, db *pgxpool.Pool, table string, run func(ctx context.Context, tx pgx.Tx)) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{`SET LOCAL enable_seqscan = off`, `SET LOCAL enable_bitmapscan = off`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	const read = `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
	                FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`
	var before, after int64
	if err := tx.QueryRow(ctx, read, table).Scan(&before); err != nil {
		t.Fatal(err)
	}
	run(ctx, tx)
	if err := tx.QueryRow(ctx, read, table).Scan(&after); err != nil {
		t.Fatal(err)
	}
	return after - before
}

// lookupRowsRead is how many rows of convo.tool_effect_calls the re-run
// lookup reads for a next call of tool at the head of conv, whose calls are
// at the conversation's own fork point (rowsRead).
func lookupRowsRead(t *testing.T, db *pgxpool.Pool, conv, tool string) int64 {
	t.Helper()
	return rowsRead(t, db, "convo.tool_effect_calls", func(ctx context.Context, tx pgx.Tx) {
		var found *string
		if err := tx.QueryRow(ctx, `
			SELECT convo_private.rerun_candidate($1, NULL, $2, array_agg(s.branch_id), array_agg(s.max_depth))::text
			  FROM convo_private.path_segments($1, (SELECT head_message_id FROM convo.conversations WHERE id = $1)) s`,
			conv, tool).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if found == nil {
			t.Fatalf("the re-run lookup found no candidate, where the first call, regenerated, is one")
		}
	})
}

// TestRerunLookupReadsTheSameWhateverTheTurnsLength: the re-run lookup for
// the next call of an agent turn of n calls of one tool at one fork point
// reads as many ledger rows at n = 40 as at n = 160 (before it went by
// place, it read every earlier call of the turn, all on the path). Counted,
// not timed. The turn's first answer was regenerated, so the fork point
// has a second branch, with the candidate on it.
func TestRerunLookupReadsTheSameWhateverTheTurnsLength(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("go"))
	first := agentRound(t, db, conv, "buy", "r0", 1)
	regenerateMsg(t, db, conv, first, effToolUses(effBuy("r0b", "buy", 1)))
	appendMsg(t, db, conv, "user", effToolResults("r0b"))
	read := map[int]int64{}
	for n := 1; n <= 160; n++ {
		agentRound(t, db, conv, "buy", fmt.Sprintf("r%d", n), 1+n%1000)
		if n == 40 || n == 160 {
			read[n] = lookupRowsRead(t, db, conv, "buy")
		}
	}
	t.Logf("ledger rows the lookup read: %d at 40 calls, %d at 160", read[40], read[160])
	if read[40] == 0 {
		t.Fatalf("the lookup read no ledger row at 40 calls: the count measures nothing")
	}
	if read[160] > read[40] {
		t.Errorf("the lookup for a turn of 160 calls read %d ledger rows, of 40 calls %d: it grows with the turn",
			read[160], read[40])
	}
	requireEqual(t, "the decision of r160 (r0, off the path, is a re-run's candidate)", effLink(t, db, conv, "r160").Decision, "confirm")
	requireEqual(t, "the regenerated answer's decision", effLink(t, db, conv, "r0b").Decision, "confirm")
}

// TestRestoreTakesEachCallsPlace: a document from before calls kept their
// place (no branch_id or depth in its tool_calls) restores, each call
// placed at its message; a document placing a call elsewhere than its
// message is refused (CV011) and writes nothing.
func TestRestoreTakesEachCallsPlace(t *testing.T) {
	src := newDB(t)
	effRegisterPurchase(t, src, "buy", "tool_call", "1 hour")
	conv := createConversation(t, src, "owner-1", "")
	question := appendMsg(t, src, conv, "user", textParts("buy"))
	agentRound(t, src, conv, "buy", "c1", 1)
	editMsg(t, src, conv, question, textParts("buy again"))
	agentRound(t, src, conv, "buy", "c2", 2)
	doc := exportAs(t, src, "", conv)
	for _, r := range rows(decodeExport(t, doc), "tool_calls") {
		if r["branch_id"] == nil || r["depth"] == nil {
			t.Fatalf("an exported tool call without its place: %v", r)
		}
	}

	t.Run("a document without places", func(t *testing.T) {
		dst := newDB(t)
		effRegisterPurchase(t, dst, "buy", "tool_call", "1 hour")
		old := editExport(t, doc, func(x map[string]any) {
			for _, r := range rows(x, "tool_calls") {
				delete(r, "branch_id")
				delete(r, "depth")
			}
		})
		id, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", old)
		if err != nil {
			t.Fatalf("restoring a document without the calls' places: %v", err)
		}
		requireEqual(t, "restored calls placed elsewhere than their messages", misplacedCalls(t, dst, id), 0)
		requireEqual(t, "restored calls", queryRow[int64](t, dst,
			`SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, id), 2)
		requireEqual(t, "self_check failures", len(failingChecks(t, dst)), 0)
	})

	for _, c := range []struct {
		name string
		edit func(r map[string]any)
	}{
		{"a deeper place", func(r map[string]any) { r["depth"] = json.Number("7") }},
		{"another branch", func(r map[string]any) { r["branch_id"] = r["message_id"].(string)[:35] + "f" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := newDB(t)
			effRegisterPurchase(t, dst, "buy", "tool_call", "1 hour")
			forged := editExport(t, doc, func(x map[string]any) { c.edit(rows(x, "tool_calls")[0]) })
			before := fingerprint(t, dst)
			_, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", forged)
			requireSQLState(t, err, "CV011")
			t.Logf("refused: %v", err)
			requireFingerprint(t, dst, "the refused restore", before)
		})
	}
}

// TestRerunLookupReadsCallsWithoutAPlace: calls without a place (as an
// upgrade of a distributed database leaves the calls it found: it cannot
// fill them there) are checked against the path as before: a re-run of
// them is found, the one it repeats is the latest, and self_check accepts
// them; a call written after is placed; their export restores as it is.
func TestRerunLookupReadsCallsWithoutAPlace(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	question := appendMsg(t, db, conv, "user", textParts("buy"))
	first := agentRound(t, db, conv, "buy", "c1", 1)
	regenerateMsg(t, db, conv, first, effToolUses(effBuy("c2", "buy", 2)))
	mustExec(t, db, `
		DO $$
		BEGIN
		    ALTER TABLE convo.tool_effect_calls DISABLE TRIGGER tool_effect_calls_90_append_only;
		    UPDATE convo.tool_effect_calls SET branch_id = NULL, depth = NULL;
		    ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only;
		END;
		$$`)
	requireEqual(t, "self_check failures with calls without a place", failingChecks(t, db), "")
	// On the path: c2 (the head's answer); off it: c1. A call below c2 is
	// a re-run of c1 only.
	appendMsg(t, db, conv, "user", effToolResults("c2"))
	agentRound(t, db, conv, "buy", "c3", 3)
	l := effLink(t, db, conv, "c3")
	requireEqual(t, "the decision of c3", l.Decision, "confirm")
	requireEqual(t, "what c3 repeats (c1, off the path; c2 is on it)",
		effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "c1").EffectID)
	// Another question: c1, c2 (no place) and c3 (placed) are all off its
	// path; the latest is c3's.
	editMsg(t, db, conv, question, textParts("buy again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c4", "buy", 4)))
	l = effLink(t, db, conv, "c4")
	requireEqual(t, "the decision of c4", l.Decision, "confirm")
	requireEqual(t, "what c4 repeats", effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "c3").EffectID)
	requireEqual(t, "calls without a place", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.tool_effect_calls WHERE branch_id IS NULL`), 2)
	requireEqual(t, "self_check failures", failingChecks(t, db), "")

	// Its export (null places, as a distributed database exports such
	// calls) restores as it is.
	dst := newDB(t)
	effRegisterPurchase(t, dst, "buy", "tool_call", "1 hour")
	id, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", exportAs(t, db, "", conv))
	if err != nil {
		t.Fatalf("restoring an export that holds calls without a place: %v", err)
	}
	requireEqual(t, "restored calls without a place", queryRow[int64](t, dst,
		`SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1 AND branch_id IS NULL`, id), 2)
	requireEqual(t, "self_check failures after the restore", failingChecks(t, dst), "")
}

// messageRowsRead counts the rows of convo.messages that an append of an
// assistant message calling tool twice reads (rowsRead): the second call
// has the first at its fork point, so its path is read.
func messageRowsRead(t *testing.T, db *pgxpool.Pool, conv, tool, id string) int64 {
	t.Helper()
	return rowsRead(t, db, "convo.messages", func(ctx context.Context, tx pgx.Tx) {
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
			effToolUses(effBuy(id, tool, 1), effBuy(id+"-again", tool, 2))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNextCallReadsTheSameWhateverTheBranchPointsAbove: a call below the
// head reads its path's segments from the live-path index, and its message's
// parent by its key, so its append reads as many message rows below 5 edited
// questions (20 messages) as below 20 (80). Before, it walked up the tree
// (two rows a branch point), and, on a generic plan made while the
// conversation was new, joined every message of it to find the parent: 194
// and 2,487 rows. A call that starts a branch of its own (a regenerated
// answer) walks up, and is still decided as a re-run. Counted, not timed.
func TestNextCallReadsTheSameWhateverTheBranchPointsAbove(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	read := map[int]int64{}
	for k := 1; k <= 20; k++ {
		q := appendMsg(t, db, conv, "user", textParts(fmt.Sprintf("question %d", k)))
		appendMsg(t, db, conv, "assistant", textParts("an answer"))
		editMsg(t, db, conv, q, textParts(fmt.Sprintf("question %d, edited", k)))
		appendMsg(t, db, conv, "assistant", textParts("another answer"))
		if k == 5 || k == 20 {
			read[k] = messageRowsRead(t, db, conv, "buy", fmt.Sprintf("probe%d", k))
		}
	}
	t.Logf("message rows an append with a call read: %d below 5 branch points, %d below 20", read[5], read[20])
	if read[5] == 0 {
		t.Fatalf("the append read no message row: the count measures nothing")
	}
	if read[20] > read[5] {
		t.Errorf("an append with a call below 20 branch points read %d message rows, below 5 %d: it grows with the branch points above",
			read[20], read[5])
	}
	first := agentRound(t, db, conv, "buy", "c1", 7)
	requireEqual(t, "a call below the head", effLink(t, db, conv, "c1").Decision, "execute")
	regenerateMsg(t, db, conv, first, effToolUses(effBuy("c1b", "buy", 7)))
	requireEqual(t, "the regenerated answer's call, on a branch of its own", effLink(t, db, conv, "c1b").Decision, "confirm")
	appendMsg(t, db, conv, "user", effToolResults("c1b"))
	// The turn's next call, below the head on the regenerated branch, reads
	// its path from the index: c1, at the same fork point and off that
	// path, is still a re-run's candidate.
	agentRound(t, db, conv, "buy", "c2", 8)
	requireEqual(t, "the next call on the regenerated branch", effLink(t, db, conv, "c2").Decision, "confirm")
}

// livePathRowsRead counts the rows of convo.live_path that an append of an
// assistant message with parts reads (rowsRead), rolled back.
func livePathRowsRead(t *testing.T, db *pgxpool.Pool, conv, parts string) int64 {
	t.Helper()
	return rowsRead(t, db, "convo.live_path", func(ctx context.Context, tx pgx.Tx) {
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv, parts); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFirstCallOfAToolAtItsForkPointReadsNoPath: a turn's first call of a
// tool has no earlier call of it at its fork point to run again, so its
// append reads the live-path index no more than an append of text there (it
// read the path's segments before); a later call of the same tool in the
// turn reads them, and a call of the same tool on another branch at the
// same fork point is still held as a re-run. Counted, not timed.
func TestFirstCallOfAToolAtItsForkPointReadsNoPath(t *testing.T) {
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, db, "ship", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	// A path of a few segments: questions edited, each answered.
	var q string
	for k := 1; k <= 4; k++ {
		q = appendMsg(t, db, conv, "user", textParts(fmt.Sprintf("question %d", k)))
		appendMsg(t, db, conv, "assistant", textParts("an answer"))
		q = editMsg(t, db, conv, q, textParts(fmt.Sprintf("question %d, edited", k)))
	}
	text := livePathRowsRead(t, db, conv, textParts("a text answer"))
	first := livePathRowsRead(t, db, conv, effToolUses(effBuy("probe1", "buy", 1)))
	t.Logf("live-path rows read: an append of text %d, of a turn's first call %d", text, first)
	if first > text {
		t.Errorf("a turn's first call of a tool read %d live-path rows, text %d: it read the path", first, text)
	}

	agentRound(t, db, conv, "buy", "b1", 1)
	requireEqual(t, "the decision of the turn's first call", effLink(t, db, conv, "b1").Decision, "execute")
	agentRound(t, db, conv, "ship", "s1", 1)
	requireEqual(t, "the decision of the turn's first call of another tool", effLink(t, db, conv, "s1").Decision, "execute")
	next := livePathRowsRead(t, db, conv, effToolUses(effBuy("probe2", "buy", 2)))
	t.Logf("live-path rows read by the turn's second call of the tool: %d", next)
	if next <= text {
		t.Errorf("the turn's second call of a tool read %d live-path rows, text %d: it did not read the path", next, text)
	}
	agentRound(t, db, conv, "buy", "b2", 2)
	requireEqual(t, "the decision of the turn's second call, on its path", effLink(t, db, conv, "b2").Decision, "execute")

	// The question edited again: b1 and b2 are on another branch at the same
	// fork point, so the new branch's first call of buy is a re-run of b2.
	editMsg(t, db, conv, q, textParts("question 4, edited again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("b1x", "buy", 1)))
	l := effLink(t, db, conv, "b1x")
	requireEqual(t, "the decision of the new branch's first call of buy", l.Decision, "confirm")
	requireEqual(t, "what b1x repeats", effRead(t, db, conv, l.EffectID).RepeatsEffectID, effLink(t, db, conv, "b2").EffectID)
	requireEqual(t, "self_check failures", len(failingChecks(t, db)), 0)
}
