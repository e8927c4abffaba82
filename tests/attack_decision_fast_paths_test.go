package tests

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Attacks on 0053's fast paths: record_tool_call decides a turn's first
// call of a tool at its fork point "execute" without the re-run lookup;
// effect_for_call reads the decision before telling why there is none;
// settle_effect looks for an earlier settlement only when the columns
// already match; args_errors evaluates its enum query only under enum.
// Each test asserts the contract's answer. The twin tests also run the
// same random history on a database migrated to 0052 (before the change)
// and compare every decision, effect, error and answer with 0053's.

// decLinkRepeats is what the effect of call id repeats, named by the
// least call id linked to the repeated effect ("" for none).
func decLinkRepeats(t testing.TB, db *pgxpool.Pool, conv, id string) string {
	t.Helper()
	return queryRow[string](t, db, `
		SELECT coalesce(min(x.tool_call_id), '')
		  FROM convo.tool_effect_calls l
		  JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
		  LEFT JOIN convo.tool_effect_calls x ON x.conversation_id = e.conversation_id AND x.effect_id = e.repeats_effect_id
		 WHERE l.conversation_id = $1 AND l.tool_call_id = $2`, conv, id)
}

// decRequire checks a call's decision, what its effect repeats (by call
// id, "" for none) and that effect_for_call answers the same decision.
func decRequire(t testing.TB, db *pgxpool.Pool, conv, id, decision, repeats string) {
	t.Helper()
	requireEqual(t, "the decision of "+id, queryRow[string](t, db,
		`SELECT decision FROM convo.tool_effect_calls WHERE conversation_id = $1 AND tool_call_id = $2`, conv, id), decision)
	requireEqual(t, "effect_for_call's decision of "+id, effForCall(t, db, conv, id).Decision, decision)
	if decision != "replay" {
		requireEqual(t, "what the effect of "+id+" repeats", decLinkRepeats(t, db, conv, id), repeats)
	}
}

// TestAttackDecisionEditAndResend: a re-run after edit_and_resend, at the
// conversation as fork point (no system prompt: fork point NULL) and at a
// message (a system prompt, or a second question), is held (confirm),
// repeating the latest call off the path; the first call of another tool
// at that fork point, or of a tool called only at another fork point, is
// executed.
func TestAttackDecisionEditAndResend(t *testing.T) {
	t.Parallel()
	for _, system := range []string{"", "You sell credits."} {
		t.Run(fmt.Sprintf("system %q", system), func(t *testing.T) {
			db := newDB(t)
			effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
			effRegisterPurchase(t, db, "ship", "tool_call", "1 hour")
			conv := createConversation(t, db, "owner-1", system)
			root := headOf(t, db, conv)
			q1 := appendMsg(t, db, conv, "user", textParts("buy 100"))
			appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c1", "buy", 100)))
			decRequire(t, db, conv, "c1", "execute", "")
			requireEqual(t, "c1's fork point", effLink(t, db, conv, "c1").ForkPointID, root)
			effSettle(t, db, conv, effLink(t, db, conv, "c1").EffectID, "ch_c1")
			appendMsg(t, db, conv, "user", effToolResults("c1"))
			bought := appendMsg(t, db, conv, "assistant", textParts("bought"))
			q2 := appendMsg(t, db, conv, "user", textParts("buy 200"))
			appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c2", "buy", 200)))
			decRequire(t, db, conv, "c2", "execute", "")
			requireEqual(t, "c2's fork point", effLink(t, db, conv, "c2").ForkPointID, bought)
			effSettle(t, db, conv, effLink(t, db, conv, "c2").EffectID, "ch_c2")

			// The second question edited: c2 is off the new path, at the same
			// fork point (a message).
			editMsg(t, db, conv, q2, textParts("buy 200, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c3", "buy", 200), effBuy("sA", "ship", 1)))
			decRequire(t, db, conv, "c3", "confirm", "c2")
			decRequire(t, db, conv, "sA", "execute", "")
			requireEqual(t, "c3's state", effForCall(t, db, conv, "c3").State, "awaiting_confirmation")

			// The first question edited: c1 is off the path at the first fork
			// point; c2, c3 and sA are at another.
			editMsg(t, db, conv, q1, textParts("buy 100, please"))
			appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c4", "buy", 100), effBuy("s1", "ship", 1)))
			decRequire(t, db, conv, "c4", "confirm", "c1")
			decRequire(t, db, conv, "s1", "execute", "")
			requireEqual(t, "c4's fork point", effLink(t, db, conv, "c4").ForkPointID, root)
			// Once more: the latest off the path is now c4.
			editMsg(t, db, conv, q1, textParts("buy 100, once"))
			appendMsg(t, db, conv, "assistant", effToolUses(effBuy("c5", "buy", 100), effBuy("s2", "ship", 1)))
			decRequire(t, db, conv, "c5", "confirm", "c4")
			decRequire(t, db, conv, "s2", "confirm", "s1")
			requireEqual(t, "self_check failures", failingChecks(t, db), "")
		})
	}
}

// TestAttackDecisionRegenerate: a regenerated answer re-runs the calls of
// the answer it replaces (confirm, the latest of them), also when the
// earlier effect is still pending and when the earlier message called the
// tool twice; a regenerated answer calling only another tool executes it.
func TestAttackDecisionRegenerate(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, db, "ship", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("buy"))
	a := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("m1", "buy", 1), effBuy("m2", "buy", 2)))
	decRequire(t, db, conv, "m1", "execute", "")
	decRequire(t, db, conv, "m2", "execute", "")
	regenerateMsg(t, db, conv, a, effToolUses(effBuy("r1", "buy", 1)))
	decRequire(t, db, conv, "r1", "confirm", "m2")
	regenerateMsg(t, db, conv, a, effToolUses(effBuy("s1", "ship", 1)))
	decRequire(t, db, conv, "s1", "execute", "")
	regenerateMsg(t, db, conv, a, effToolUses(effBuy("s2", "ship", 1), effBuy("r2", "buy", 3)))
	decRequire(t, db, conv, "s2", "confirm", "s1")
	decRequire(t, db, conv, "r2", "confirm", "r1")

	// Deeper, at the same fork point: the turn's next call of ship re-runs
	// s1 (off the path), not s2 (on it); regenerated, it re-runs itself.
	appendMsg(t, db, conv, "user", effToolResults("s2", "r2"))
	b := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("d1", "ship", 5)))
	decRequire(t, db, conv, "d1", "confirm", "s1")
	regenerateMsg(t, db, conv, b, effToolUses(effBuy("d2", "ship", 5)))
	decRequire(t, db, conv, "d2", "confirm", "d1")
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackDecisionRejectedReplayAndVersions: earlier calls that made no
// effect to run again (rejected, replay) leave a new branch's call
// executed; a tool registered again (a new version, or effectful now)
// still re-runs the effects of its earlier version (confirm).
func TestAttackDecisionRejectedReplayAndVersions(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	registerTestTool(t, db, "look", false, `{"type": "object"}`)
	conv := createConversation(t, db, "owner-1", "")
	q := appendMsg(t, db, conv, "user", textParts("buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x0", "buy", 0), effCall{ID: "l1", Name: "look", Input: map[string]any{"q": 1}}))
	decRequire(t, db, conv, "x0", "rejected", "")
	decRequire(t, db, conv, "l1", "replay", "")

	editMsg(t, db, conv, q, textParts("buy again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("x1", "buy", 1), effCall{ID: "l2", Name: "look", Input: map[string]any{"q": 1}}))
	decRequire(t, db, conv, "x1", "execute", "")
	decRequire(t, db, conv, "l2", "replay", "")

	registerTestTool(t, db, "look", true, `{"type": "object"}`)
	requireEqual(t, "buy's new version", effRegisterPurchase(t, db, "buy", "tool_call", "2 hours"), 2)
	editMsg(t, db, conv, q, textParts("buy a third time"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "l3", Name: "look", Input: map[string]any{"q": 1}}, effBuy("x2", "buy", 1)))
	decRequire(t, db, conv, "l3", "execute", "")
	decRequire(t, db, conv, "x2", "confirm", "x1")
	requireEqual(t, "x2's tool version", queryRow[int32](t, db,
		`SELECT tool_version FROM convo.tool_effect_calls WHERE conversation_id = $1 AND tool_call_id = 'x2'`, conv), 2)

	editMsg(t, db, conv, q, textParts("buy a fourth time"))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "l4", Name: "look", Input: map[string]any{"q": 1}}))
	decRequire(t, db, conv, "l4", "confirm", "l3")
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackDecisionAfterErasure: erasures change the key epoch, not the
// ledger's calls: after one, an edited question's call re-runs the erased
// branch's applied charge (confirm); a conversation_args call with the
// erased call's arguments on the path executes (a new key, and nothing off
// the path); after a second erasure the same holds; effect_for_call
// answers an erased conversation's calls as before the erasure.
func TestAttackDecisionAfterErasure(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, db, "buyc", "conversation_args", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	q := appendMsg(t, db, conv, "user", textParts("buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("e1", "buy", 5), effBuy("k1", "buyc", 7)))
	decRequire(t, db, conv, "e1", "execute", "")
	decRequire(t, db, conv, "k1", "execute", "")
	effSettle(t, db, conv, effLink(t, db, conv, "e1").EffectID, "ch_e1")
	effSettle(t, db, conv, effLink(t, db, conv, "k1").EffectID, "ch_k1")
	appendMsg(t, db, conv, "user", effToolResults("e1", "k1"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("k1r", "buyc", 7)))
	decRequire(t, db, conv, "k1r", "reuse", "")
	appendMsg(t, db, conv, "user", effToolResults("k1r"))
	beforeE1 := effForCall(t, db, conv, "e1")

	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked')`, conv)
	requireEqual(t, "effect_for_call of e1 after the erasure", effForCall(t, db, conv, "e1"), beforeE1)
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("k2", "buyc", 7)))
	decRequire(t, db, conv, "k2", "execute", "")

	editMsg(t, db, conv, q, textParts("buy again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("e2", "buy", 5), effBuy("k3", "buyc", 8)))
	decRequire(t, db, conv, "e2", "confirm", "e1")
	decRequire(t, db, conv, "k3", "confirm", "k2")

	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked again')`, conv)
	editMsg(t, db, conv, q, textParts("buy a third time"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("e3", "buy", 5), effBuy("k4", "buyc", 8)))
	decRequire(t, db, conv, "e3", "confirm", "e2")
	decRequire(t, db, conv, "k4", "confirm", "k3")
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackDecisionAfterRestore: a restored conversation's calls count:
// an edited question's call re-runs the restored applied charge (confirm);
// the first call of another tool executes.
func TestAttackDecisionAfterRestore(t *testing.T) {
	t.Parallel()
	src := newDB(t)
	effRegisterPurchase(t, src, "buy", "tool_call", "1 hour")
	conv := createConversation(t, src, "owner-1", "")
	q := appendMsg(t, src, conv, "user", textParts("buy"))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("p1", "buy", 1)))
	effSettle(t, src, conv, effLink(t, src, conv, "p1").EffectID, "ch_p1")
	appendMsg(t, src, conv, "user", effToolResults("p1"))
	doc := exportAs(t, src, "", conv)

	dst := newDB(t)
	effRegisterPurchase(t, dst, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, dst, "ship", "tool_call", "1 hour")
	id, err := importAs(loginAs(t, dst, "convo_admin"), "owner-1", "conversation", doc)
	if err != nil {
		t.Fatalf("restoring: %v", err)
	}
	requireEqual(t, "restored calls", queryRow[int64](t, dst,
		`SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, id), 1)
	editMsg(t, dst, id, q, textParts("buy again"))
	appendMsg(t, dst, id, "assistant", effToolUses(effBuy("n1", "buy", 1), effBuy("n2", "ship", 1)))
	decRequire(t, dst, id, "n1", "confirm", "p1")
	decRequire(t, dst, id, "n2", "execute", "")
	requireEqual(t, "self_check failures", failingChecks(t, dst), "")
}

// decAs runs fn in a transaction of pool with owner set.
func decAs(t testing.TB, pool *pgxpool.Pool, owner string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	t.Helper()
	return inOwnerTx(pool, owner, fn)
}

// decAsString reads one text value as owner on pool, failing on error.
func decAsString(t testing.TB, pool *pgxpool.Pool, owner, sql string, args ...any) string {
	t.Helper()
	var v string
	if err := decAs(t, pool, owner, func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, sql, args...).Scan(&v)
	}); err != nil {
		t.Fatalf("as %s: %s: %v", owner, sql, err)
	}
	return v
}

// decForCallAs is effect_for_call as owner on pool: its one row as text,
// or the error.
func decForCallAs(pool *pgxpool.Pool, owner string, conv, call any) (string, error) {
	var out []string
	err := inOwnerTx(pool, owner, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT concat_ws('|', effect_id, decision, state, idempotency_key, external_ref, http_status, error_code)
		                              FROM convo.effect_for_call($1, $2)`, conv, call)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return "", err
	}
	if len(out) != 1 {
		return "", fmt.Errorf("effect_for_call returned %d rows", len(out))
	}
	return out[0], nil
}

// TestAttackDecisionEffectForCallAcrossOwners: as the application role
// (convo_app, owner set), effect_for_call answers only the named
// conversation's own call, and only to its owner: the same call id in
// another owner's conversation is not read (its own, CV002 for the other
// conversation, CV002, not CV003, for another owner's call named in one's
// own), CV003 for one's own other conversation's call, CV011 for NULLs,
// CV007 for an unregistered tool, CV002 for a deleted conversation whose
// calls have decisions; none of it writes. A re-run through the role is
// held as through the superuser.
func TestAttackDecisionEffectForCallAcrossOwners(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	app := loginAs(t, db, "convo_app")
	create := func(owner string) string {
		return decAsString(t, app, owner, `SELECT convo.create_conversation($1, NULL)::text`, owner)
	}
	appendAs := func(owner, conv, role, parts string) string {
		return decAsString(t, app, owner, `SELECT convo.append_message($1, $2, $3)::text`, conv, role, parts)
	}
	alice := create("alice")
	alice2 := create("alice")
	aliceGone := create("alice")
	bob := create("bob")
	qa := appendAs("alice", alice, "user", textParts("buy"))
	appendAs("alice", alice, "assistant", effToolUses(effBuy("dup", "buy", 1), effBuy("aone", "buy", 3),
		effCall{ID: "gh", Name: "ghost", Input: map[string]any{}}))
	appendAs("alice", alice2, "user", textParts("buy"))
	appendAs("alice", alice2, "assistant", effToolUses(effBuy("a2only", "buy", 1)))
	appendAs("alice", aliceGone, "user", textParts("buy"))
	appendAs("alice", aliceGone, "assistant", effToolUses(effBuy("goneCall", "buy", 1)))
	appendAs("bob", bob, "user", textParts("buy"))
	appendAs("bob", bob, "assistant", effToolUses(effBuy("dup", "buy", 9), effBuy("bobonly", "buy", 2)))
	decAsString(t, app, "alice", `SELECT convo.delete_conversation($1)::text`, aliceGone)
	registerTestTool(t, db, "ghost", true, `{"type": "object"}`)

	aliceDup, err := decForCallAs(app, "alice", alice, "dup")
	if err != nil {
		t.Fatalf("alice's own call: %v", err)
	}
	if !strings.HasPrefix(aliceDup, effLink(t, db, alice, "dup").EffectID+"|execute|pending|") {
		t.Errorf("alice's dup answers %q, not alice's effect %s", aliceDup, effLink(t, db, alice, "dup").EffectID)
	}
	bobDup, err := decForCallAs(app, "bob", bob, "dup")
	if err != nil {
		t.Fatalf("bob's own call: %v", err)
	}
	if !strings.HasPrefix(bobDup, effLink(t, db, bob, "dup").EffectID+"|execute|pending|") || bobDup == aliceDup {
		t.Errorf("bob's dup answers %q", bobDup)
	}

	before := fingerprint(t, db)
	cases := []struct {
		name, owner string
		conv, call  any
		code        string
	}{
		{"bob's conversation named by alice", "alice", bob, "dup", "CV002"},
		{"bob's only call named in alice's conversation", "alice", alice, "bobonly", "CV002"},
		{"alice's other conversation's call", "alice", alice, "a2only", "CV003"},
		{"alice's call named in her other conversation", "alice", alice2, "aone", "CV003"},
		{"alice's call named in bob's conversation by bob", "bob", bob, "a2only", "CV002"},
		{"a NULL call", "alice", alice, nil, "CV011"},
		{"a NULL call in bob's conversation", "alice", bob, nil, "CV002"},
		{"a NULL conversation", "alice", nil, "dup", "CV011"},
		{"an unknown conversation", "alice", newID(), "dup", "CV002"},
		{"an unknown call", "alice", alice, "nope", "CV002"},
		{"an unregistered tool's call", "alice", alice, "gh", "CV007"},
		{"an unregistered tool's call, asked by bob", "bob", alice, "gh", "CV002"},
		{"a deleted conversation's call", "alice", aliceGone, "goneCall", "CV002"},
		{"a deleted conversation's call, by bob", "bob", aliceGone, "goneCall", "CV002"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decForCallAs(app, c.owner, c.conv, c.call)
			if err == nil {
				t.Fatalf("answered %q, want SQLSTATE %s", got, c.code)
			}
			requireSQLState(t, err, c.code)
			if d := pgError(t, err).Detail + pgError(t, err).Message; c.code == "CV002" &&
				(strings.Contains(d, bob) && c.owner == "alice" && c.conv != bob) {
				t.Errorf("the error names bob's conversation to alice: %s", d)
			}
		})
	}
	requireFingerprint(t, db, "the refused effect_for_call calls", before)

	// A re-run through the application role.
	decAsString(t, app, "alice", `SELECT convo.edit_and_resend($1, $2, $3)::text`, alice, qa, textParts("buy again"))
	appendAs("alice", alice, "assistant", effToolUses(effBuy("dup2", "buy", 1)))
	again, err := decForCallAs(app, "alice", alice, "dup2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(again, "|confirm|awaiting_confirmation|") {
		t.Errorf("dup2 answers %q, want a held re-run", again)
	}
	decRequire(t, db, alice, "dup2", "confirm", "aone") // the latest call off the path

	// After an erasure the owner is answered as before it.
	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked')`, alice)
	after, err := decForCallAs(app, "alice", alice, "dup")
	if err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "alice's dup after the erasure", after, aliceDup)
	_, err = decForCallAs(app, "bob", alice, "dup")
	requireSQLState(t, err, "CV002")
}

// TestAttackDecisionSettleRepeat: an exact repeat of a settlement is a
// no-op (also once compensated); a differing one, and any settlement of
// a rejected, declined, awaiting or never settled effect whose columns
// happen to match what is asked, is CV006 and writes nothing.
func TestAttackDecisionSettleRepeat(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	q := appendMsg(t, db, conv, "user", textParts("buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("s1", "buy", 1), effBuy("s2", "buy", 2), effBuy("s3", "buy", 3), effBuy("s0", "buy", 0)))
	eff := func(id string) string { return effLink(t, db, conv, id).EffectID }
	settle := `SELECT convo.settle_effect($1, $2, $3, p_external_ref => $4, p_http_status => $5, p_error_code => $6)`
	mustExec(t, db, settle, conv, eff("s1"), "applied", "ref1", 200, nil)
	mustExec(t, db, settle, conv, eff("s2"), "failed", nil, 402, "card_declined")
	appendMsg(t, db, conv, "user", effToolResults("s1", "s2", "s3", "s0"))
	editMsg(t, db, conv, q, textParts("buy again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("w1", "buy", 1), effBuy("w2", "buy", 2)))
	effDecline(t, db, conv, eff("w2"), "support:ana")
	s0 := effRead(t, db, conv, eff("s0"))
	requireEqual(t, "s0's state (rejected)", s0.State+"/"+s0.ErrorCode, "failed/invalid_arguments")

	type try struct {
		name, call, state string
		ref, code         any
		http              any
		want              string // "" : a no-op
	}
	tries := []try{
		{"s1 repeated", "s1", "applied", "ref1", nil, 200, ""},
		{"s1 with another reference", "s1", "applied", "ref2", nil, 200, "CV006"},
		{"s1 without its status", "s1", "applied", "ref1", nil, nil, "CV006"},
		{"s1 as failed", "s1", "failed", nil, "x", nil, "CV006"},
		{"s2 repeated", "s2", "failed", nil, "card_declined", 402, ""},
		{"s2 with another code", "s2", "failed", nil, "other", 402, "CV006"},
		{"s2 as applied", "s2", "applied", "ref", nil, 402, "CV006"},
		{"s0, rejected, as it stands", "s0", "failed", nil, "invalid_arguments", 422, "CV006"},
		{"w2, declined, as it stands", "w2", "failed", nil, "declined", nil, "CV006"},
		{"w1, awaiting confirmation", "w1", "applied", "ref1", nil, 200, "CV006"},
		{"w1, awaiting confirmation, as failed", "w1", "failed", nil, "x", nil, "CV006"},
	}
	for _, tr := range tries {
		t.Run(tr.name, func(t *testing.T) {
			before := fingerprint(t, db)
			err := effExecErr(db, settle, conv, eff(tr.call), tr.state, tr.ref, tr.http, tr.code)
			if tr.want == "" {
				if err != nil {
					t.Fatalf("an exact repeat: %v", err)
				}
			} else {
				requireSQLState(t, err, tr.want)
			}
			requireFingerprint(t, db, tr.name, before)
		})
	}

	// Compensated: the settlement repeated is still a no-op; a pending
	// effect settles once, then repeats as a no-op.
	effCompensate(t, db, conv, eff("s1"), "re_1")
	before := fingerprint(t, db)
	mustExec(t, db, settle, conv, eff("s1"), "applied", "ref1", 200, nil)
	requireFingerprint(t, db, "s1's settlement repeated once compensated", before)
	requireSQLState(t, effExecErr(db, settle, conv, eff("s1"), "applied", "ref9", 200, nil), "CV006")
	mustExec(t, db, settle, conv, eff("s3"), "applied", "ref3", nil, nil)
	before = fingerprint(t, db)
	mustExec(t, db, settle, conv, eff("s3"), "applied", "ref3", nil, nil)
	requireFingerprint(t, db, "s3's settlement repeated", before)
	// Confirmed, then settled: a repeat is a no-op.
	effConfirm(t, db, conv, eff("w1"), "support:ana")
	mustExec(t, db, settle, conv, eff("w1"), "failed", nil, nil, "boom")
	before = fingerprint(t, db)
	mustExec(t, db, settle, conv, eff("w1"), "failed", nil, nil, "boom")
	requireFingerprint(t, db, "w1's settlement repeated", before)
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}

// TestAttackDecisionForgery: the rows the fast path probes cannot be
// hidden or moved: updating a call's tool name or fork point, deleting it
// or truncating the ledger is refused for the owner role, a granted role
// and the superuser, and writes nothing; the re-run is then held.
func TestAttackDecisionForgery(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	effRegisterPurchase(t, db, "ship", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	q := appendMsg(t, db, conv, "user", textParts("buy"))
	a := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("f1", "buy", 1)))
	effSettle(t, db, conv, effLink(t, db, conv, "f1").EffectID, "ch_f1")
	appendMsg(t, db, conv, "user", effToolResults("f1"))
	bought := appendMsg(t, db, conv, "assistant", textParts("bought"))
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	ctx := context.Background()
	attempts := []struct{ name, sql string }{
		{"rename the call's tool", `UPDATE convo.tool_effect_calls SET tool_name = 'ship', tool_version = 1 WHERE tool_call_id = 'f1'`},
		{"move the call's fork point", fmt.Sprintf(`UPDATE convo.tool_effect_calls SET fork_point_id = '%s' WHERE tool_call_id = 'f1'`, bought)},
		{"delete the call", `DELETE FROM convo.tool_effect_calls WHERE tool_call_id = 'f1'`},
		{"truncate the ledger's calls", `TRUNCATE convo.tool_effect_calls`},
		{"record the call again as another tool", fmt.Sprintf(`SELECT convo_private.record_tool_call('%s', '%s', 0, 'f1x', 'ship', '{"amount_minor": 1, "currency": "EUR"}', NULL, NULL)`, conv, a)},
		{"insert a replay row over an existing part", fmt.Sprintf(`INSERT INTO convo.tool_effect_calls
			(conversation_id, tool_call_id, message_id, ordinal, decision, fork_point_id, tool_name, tool_version)
			VALUES ('%s', 'zz', '%s', 0, 'replay', NULL, 'ship', 1)`, conv, a)},
	}
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		super := queryRowConn[bool](t, conn, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`)
		for _, at := range attempts {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, at.sql)
			_ = tx.Rollback(ctx)
			if strings.HasPrefix(at.name, "insert") || strings.HasPrefix(at.name, "record") {
				if super {
					continue // a superuser may write a row; it was rolled back
				}
			}
			if err == nil {
				t.Errorf("%s: allowed", at.name)
				continue
			}
			t.Logf("%s: %v", at.name, err)
		}
	})
	requireFingerprint(t, db, "the refused forgeries", before)
	editMsg(t, db, conv, q, textParts("buy again"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("f2", "buy", 1)))
	decRequire(t, db, conv, "f2", "confirm", "f1")
}

// TestAttackDecisionArgsErrorsEnum: the enum rule, alone and beside type,
// const and nested schemas, with null, objects, arrays and numbers of
// equal value written differently, as the contract says: a value is valid
// when it equals one of the enum's members as JSON.
func TestAttackDecisionArgsErrorsEnum(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cases := []struct {
		schema, value string
		errors        int
	}{
		{`{"enum": [null]}`, `null`, 0},
		{`{"enum": [null]}`, `0`, 1},
		{`{"enum": [1, "a"]}`, `1.0`, 0},
		{`{"enum": [1.0]}`, `1`, 0},
		{`{"enum": [1]}`, `"1"`, 1},
		{`{"enum": [{"a": 1}]}`, `{"a": 1.00}`, 0},
		{`{"enum": [{"a": 1}]}`, `{"a": 1, "b": 2}`, 1},
		{`{"enum": [[1, 2]]}`, `[1, 2]`, 0},
		{`{"enum": [[1, 2]]}`, `[2, 1]`, 1},
		{`{"enum": [true]}`, `1`, 1},
		{`{"type": "string", "enum": ["a"]}`, `"b"`, 1},
		{`{"type": "string", "enum": [1]}`, `1`, 1},
		{`{"type": "string", "enum": [1]}`, `"1"`, 1},
		{`{"const": 1, "enum": [2]}`, `1`, 1},
		{`{"const": 1, "enum": [2]}`, `2`, 1},
		{`{"const": 1, "enum": [1]}`, `1`, 0},
		{`{"const": 3}`, `3`, 0},
		{`{"type": "object", "properties": {"c": {"enum": ["EUR", "USD"]}}}`, `{"c": "EUR"}`, 0},
		{`{"type": "object", "properties": {"c": {"enum": ["EUR", "USD"]}}}`, `{"c": "GBP"}`, 1},
		{`{"type": "array", "items": {"enum": [1, 2]}}`, `[1, 2, 3, 4]`, 2},
		{`{"type": "array", "items": {"type": "integer"}}`, `[1, 2]`, 0},
		{`{"type": "integer"}`, `5`, 0},
		{`{}`, `{"enum": 1}`, 0},
		{`true`, `"x"`, 0},
	}
	for _, c := range cases {
		got := queryRow[[]string](t, db, `SELECT convo.args_errors($1::jsonb, $2::jsonb)`, c.schema, c.value)
		if len(got) != c.errors {
			t.Errorf("args_errors(%s, %s) = %q, want %d errors", c.schema, c.value, got, c.errors)
		}
		for _, e := range got {
			if strings.Contains(c.schema, "enum") && strings.Contains(e, "enum") && !strings.Contains(e, "must be one of") {
				t.Errorf("args_errors(%s, %s): enum error %q", c.schema, c.value, e)
			}
		}
	}
}

// ---- The twin: 0052 and 0053 side by side ----

// decDB is a database migrated to version: 52, before the change, or 53,
// with it (not the latest, so that the twins compare these two whatever
// comes after).
func decDB(t *testing.T, version uint) *pgxpool.Pool {
	t.Helper()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	if err := m.Goto(context.Background(), version); err != nil {
		t.Fatalf("to version %d: %v", version, err)
	}
	return newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
}

// TestAttackDecisionArgsErrorsTwin: args_errors answers every schema and
// value (the admitted subset and beyond: enum not an array, a schema that
// is an array, enum beside everything) as 0052 did, errors included.
func TestAttackDecisionArgsErrorsTwin(t *testing.T) {
	t.Parallel()
	dbs := [2]*pgxpool.Pool{decDB(t, 52), decDB(t, 53)}
	schemas := []string{
		`{"enum": [null]}`, `{"enum": []}`, `{"enum": [1, "1", 1.5, true, null, {"a": [1]}, [1]]}`,
		`{"enum": 5}`, `{"enum": "x"}`, `{"enum": null}`, `{"enum": {"a": 1}}`, `["enum"]`, `"enum"`,
		`{"type": "integer", "enum": [1, 2], "minimum": 2}`, `{"type": ["string", "null"], "enum": ["a", null]}`,
		`{"const": {"a": 1}, "enum": [{"a": 1.0}]}`, `{"type": "object", "required": ["x"], "properties": {"x": {"enum": [1]}}, "enum": [{"x": 1}]}`,
		`{"type": "array", "items": {"enum": [[1], {"b": null}]}}`, `{"anyOf": [{"enum": [1]}, {"enum": [2]}]}`,
		`{"type": "string", "pattern": "^a", "enum": ["ab", "b"]}`, `{"properties": {"enum": {"enum": ["enum"]}}}`,
		`true`, `false`, `{}`, `{"not": {"enum": [1]}}`,
	}
	values := []string{`null`, `1`, `1.0`, `1.50`, `"1"`, `"a"`, `"ab"`, `"b"`, `true`, `{"a": 1}`, `{"a": [1]}`,
		`{"x": 1}`, `{"x": 2}`, `{"enum": "enum"}`, `{"enum": "x"}`, `[1]`, `[[1], {"b": null}]`, `[{"b": 1}]`, `2`, `[]`, `{}`}
	answer := func(db *pgxpool.Pool, schema, value string) string {
		var got []string
		err := db.QueryRow(context.Background(), `SELECT convo.args_errors($1::jsonb, $2::jsonb)`, schema, value).Scan(&got)
		if err != nil {
			return "error " + sqlState(err)
		}
		return strings.Join(got, "\n")
	}
	n := 0
	for _, s := range schemas {
		for _, v := range values {
			old, now := answer(dbs[0], s, v), answer(dbs[1], s, v)
			if old != now {
				t.Errorf("args_errors(%s, %s): 0052 answered %q, 0053 %q", s, v, old, now)
			}
			n++
		}
	}
	t.Logf("%d schema and value pairs compared", n)
}

// decTwin runs one random history through the API on both databases.
type decTwin struct {
	t       *testing.T
	dbs     [2]*pgxpool.Pool
	conv    [2]string
	msgs    [2][]string
	index   [2]map[string]int
	role    []string
	calls   [][]string
	callIDs []string
	others  []string // call ids of earlier conversations
	rng     *rand.Rand
	seed    int
	n       int
	log     []string
	settled map[string][]any
}

func (d *decTwin) fail(format string, args ...any) {
	d.t.Helper()
	tail := d.log
	if len(tail) > 15 {
		tail = tail[len(tail)-15:]
	}
	d.t.Fatalf("seed %d: %s\n  last operations:\n    %s", d.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n    "))
}

// added records the message each database returned for one operation.
func (d *decTwin) added(ids [2]string, role string, calls []string) {
	for i := range d.dbs {
		d.index[i][ids[i]] = len(d.msgs[i])
		d.msgs[i] = append(d.msgs[i], ids[i])
	}
	d.role = append(d.role, role)
	d.calls = append(d.calls, calls)
	d.callIDs = append(d.callIDs, calls...)
}

// both runs sql returning a message id on both databases; args are built
// per database (message indexes translated).
func (d *decTwin) both(sql string, args func(i int) []any) ([2]string, [2]string) {
	var ids, codes [2]string
	for i, db := range d.dbs {
		var id *string
		err := db.QueryRow(context.Background(), sql, args(i)...).Scan(&id)
		if err != nil {
			codes[i] = sqlState(err)
			if codes[i] == "" {
				d.fail("%s: %v", sql, err)
			}
		} else if id != nil {
			ids[i] = *id
		}
	}
	if codes[0] != codes[1] {
		d.fail("%s: 0052 answered SQLSTATE %q, 0053 %q", sql, codes[0], codes[1])
	}
	return ids, codes
}

func (d *decTwin) newCalls(k int) ([]string, string) {
	var calls []effCall
	var ids []string
	for j := 0; j < k; j++ {
		d.n++
		id := fmt.Sprintf("t%02dc%04d", d.seed, d.n)
		amount := 1 + d.rng.Intn(3)
		if d.rng.Intn(12) == 0 {
			amount = 0
		}
		var c effCall
		switch r := d.rng.Intn(20); {
		case r < 6:
			c = effBuy(id, "buy", amount)
		case r < 10:
			c = effBuy(id, "buyc", amount)
		case r < 14:
			c = effBuy(id, "buyf", amount)
		case r < 17:
			c = effCall{ID: id, Name: "look", Input: map[string]any{"q": amount}}
		default:
			c = effCall{ID: id, Name: "ghost", Input: map[string]any{"q": amount}}
		}
		calls = append(calls, c)
		ids = append(ids, id)
	}
	return ids, effToolUses(calls...)
}

func (d *decTwin) pick(role string, withCalls bool) int {
	var c []int
	for i, r := range d.role {
		if (role == "" || r == role) && (!withCalls || len(d.calls[i]) > 0) {
			c = append(c, i)
		}
	}
	if len(c) == 0 {
		return -1
	}
	return c[d.rng.Intn(len(c))]
}

func (d *decTwin) head(i int) string { return headOf(d.t, d.dbs[i], d.conv[i]) }

// step makes one random write on both databases.
func (d *decTwin) step() {
	d.t.Helper()
	ctx := context.Background()
	r := d.rng.Intn(100)
	if d.head(0) == "" {
		r = 0
	}
	switch {
	case r < 12:
		ids, _ := d.both(`SELECT convo.append_message($1, 'user', $2)::text`, func(i int) []any { return []any{d.conv[i], textParts("more")} })
		d.log = append(d.log, "append user")
		d.added(ids, "user", nil)
	case r < 40:
		k := 1 + d.rng.Intn(3)
		if d.rng.Intn(15) == 0 {
			k = 9
		}
		calls, parts := d.newCalls(k)
		ids, _ := d.both(`SELECT convo.append_message($1, 'assistant', $2)::text`, func(i int) []any { return []any{d.conv[i], parts} })
		d.log = append(d.log, fmt.Sprintf("append assistant %v", calls))
		d.added(ids, "assistant", calls)
	case r < 55:
		h := d.index[0][d.head(0)]
		if len(d.calls[h]) == 0 {
			return
		}
		role := "user"
		if d.rng.Intn(3) == 0 {
			role = "tool"
		}
		parts := effToolResults(d.calls[h]...)
		ids, _ := d.both(`SELECT convo.append_message($1, $2, $3)::text`, func(i int) []any { return []any{d.conv[i], role, parts} })
		d.log = append(d.log, "append results of "+strings.Join(d.calls[h], ","))
		d.added(ids, role, nil)
	case r < 63:
		m := d.pick("assistant", false)
		if m < 0 {
			return
		}
		var calls []string
		parts := textParts("regenerated")
		if d.rng.Intn(5) > 0 {
			calls, parts = d.newCalls(1 + d.rng.Intn(3))
		}
		ids, _ := d.both(`SELECT convo.regenerate($1, $2, $3)::text`, func(i int) []any { return []any{d.conv[i], d.msgs[i][m], parts} })
		d.log = append(d.log, fmt.Sprintf("regenerate #%d: %v", m, calls))
		d.added(ids, "assistant", calls)
	case r < 71:
		m := d.pick("user", false)
		if m < 0 {
			return
		}
		ids, codes := d.both(`SELECT convo.edit_and_resend($1, $2, $3)::text`, func(i int) []any { return []any{d.conv[i], d.msgs[i][m], textParts("edited")} })
		d.log = append(d.log, fmt.Sprintf("edit #%d (%s)", m, codes[0]))
		if codes[0] == "" {
			d.added(ids, "user", nil)
		}
	case r < 77:
		m := d.rng.Intn(len(d.role))
		d.both(`SELECT convo.move_head($1, $2)::text`, func(i int) []any { return []any{d.conv[i], d.msgs[i][m]} })
		d.log = append(d.log, fmt.Sprintf("move head to #%d", m))
	case r < 93:
		d.settleStep()
	case r < 95:
		d.both(`SELECT count(*)::text FROM convo.erase_conversation($1, 'asked')`, func(i int) []any { return []any{d.conv[i]} })
		d.log = append(d.log, "erase")
	case r < 97:
		tool := []string{"buy", "buyc", "look", "ghost"}[d.rng.Intn(4)]
		effectful := d.rng.Intn(2) == 0
		for _, db := range d.dbs {
			if tool == "buy" || tool == "buyc" {
				if _, err := db.Exec(ctx, `SELECT convo.register_tool($1, true, $2::jsonb, p_idempotency_scope => $3,
				       p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`,
					tool, effPurchaseSchema, map[string]string{"buy": "tool_call", "buyc": "conversation_args"}[tool]); err != nil {
					d.fail("registering %s: %v", tool, err)
				}
			} else if _, err := db.Exec(ctx, `SELECT convo.register_tool($1, $2, '{"type": "object", "properties": {"q": {"enum": [1, 2]}}}')`,
				tool, effectful); err != nil {
				d.fail("registering %s: %v", tool, err)
			}
		}
		d.log = append(d.log, "register "+tool)
	default:
		m := d.rng.Intn(len(d.role))
		calls, parts := d.newCalls(1 + d.rng.Intn(2))
		d.both(`SELECT convo.move_head($1, $2)::text`, func(i int) []any { return []any{d.conv[i], d.msgs[i][m]} })
		ids, _ := d.both(`SELECT convo.append_message($1, 'assistant', $2)::text`, func(i int) []any { return []any{d.conv[i], parts} })
		d.log = append(d.log, fmt.Sprintf("append assistant under #%d: %v", m, calls))
		d.added(ids, "assistant", calls)
	}
}

// settleStep settles, repeats, compensates, confirms or declines the
// effect of a random call, on both databases, comparing the outcome.
func (d *decTwin) settleStep() {
	if len(d.callIDs) == 0 {
		return
	}
	call := d.callIDs[d.rng.Intn(len(d.callIDs))]
	effect := [2]string{}
	for i, db := range d.dbs {
		effect[i] = queryRow[string](d.t, db, `SELECT coalesce((SELECT effect_id::text FROM convo.tool_effect_calls
		                                         WHERE conversation_id = $1 AND tool_call_id = $2), '')`, d.conv[i], call)
	}
	if (effect[0] == "") != (effect[1] == "") {
		d.fail("call %s has an effect on one database only", call)
	}
	if effect[0] == "" {
		return
	}
	const settle = `SELECT convo.settle_effect($1, $2::uuid, $3, p_external_ref => $4, p_http_status => $5, p_error_code => $6)::text`
	var sql, what string
	var extra []any
	switch r := d.rng.Intn(10); {
	case r < 3:
		extra = []any{"applied", fmt.Sprintf("ref%d", d.rng.Intn(2)), []any{nil, 200, 201}[d.rng.Intn(3)], nil}
	case r < 5:
		extra = []any{"failed", nil, []any{nil, 402, 422}[d.rng.Intn(3)], []string{"declined", "invalid_arguments", "boom"}[d.rng.Intn(3)]}
	case r < 7:
		if prev, ok := d.settled[call]; ok {
			extra = prev
		} else {
			extra = []any{"applied", "ref0", 200, nil}
		}
	case r < 8:
		sql, what = `SELECT convo.compensate_effect($1, $2::uuid, 're_1')::text`, "compensate"
	case r < 9:
		sql, what = `SELECT convo.confirm_effect($1, $2::uuid, 'ana')::text`, "confirm"
	default:
		sql, what = `SELECT convo.decline_effect($1, $2::uuid, 'ana')::text`, "decline"
	}
	if sql == "" {
		sql, what = settle, fmt.Sprintf("settle %v", extra)
	}
	var events [2]int64
	for i, db := range d.dbs {
		events[i] = queryRow[int64](d.t, db, `SELECT count(*) FROM convo.tool_effect_events WHERE conversation_id = $1`, d.conv[i])
	}
	_, codes := d.both(sql, func(i int) []any { return append([]any{d.conv[i], effect[i]}, extra...) })
	d.log = append(d.log, fmt.Sprintf("%s %s: %q", what, call, codes[0]))
	if codes[0] == "" && sql == settle {
		d.settled[call] = extra
	}
	for i, db := range d.dbs {
		events[i] = queryRow[int64](d.t, db, `SELECT count(*) FROM convo.tool_effect_events WHERE conversation_id = $1`, d.conv[i]) - events[i]
	}
	if events[0] != events[1] {
		d.fail("%s of %s wrote %d events on 0052, %d on 0053", what, call, events[0], events[1])
	}
}

// ledger is the conversation's ledger on database i, ids named by call
// ids and message indexes, one line a call.
func (d *decTwin) ledger(i int) []string {
	rows, err := d.dbs[i].Query(context.Background(), `
		SELECT l.tool_call_id, l.decision, l.tool_name, l.tool_version, coalesce(l.fork_point_id::text, ''),
		       l.message_id::text, l.ordinal, coalesce(l.depth, -1),
		       coalesce((SELECT min(x.tool_call_id) FROM convo.tool_effect_calls x
		                  WHERE x.conversation_id = l.conversation_id AND x.effect_id = l.effect_id), ''),
		       coalesce(e.state, ''),
		       coalesce((SELECT min(x.tool_call_id) FROM convo.tool_effect_calls x
		                  WHERE x.conversation_id = l.conversation_id AND x.effect_id = e.repeats_effect_id), ''),
		       concat_ws('|', e.external_ref, e.http_status, e.error_code, e.confirmed_by, e.compensated_by,
		                 e.amount_minor, e.currency, e.idempotency_key = e.scope_key, e.settled_at IS NOT NULL)
		  FROM convo.tool_effect_calls l
		  LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
		 WHERE l.conversation_id = $1
		 ORDER BY l.tool_call_id`, d.conv[i])
	if err != nil {
		d.fail("reading the ledger: %v", err)
	}
	var out []string
	for rows.Next() {
		var id, decision, tool, fork, msg, effect, state, repeats, cols string
		var version, ordinal, depth int32
		if err := rows.Scan(&id, &decision, &tool, &version, &fork, &msg, &ordinal, &depth, &effect, &state, &repeats, &cols); err != nil {
			d.fail("reading the ledger: %v", err)
		}
		forkAt := -1
		if fork != "" {
			f, ok := d.index[i][fork]
			if !ok {
				d.fail("call %s: fork point %s is no message of the history", id, fork)
			}
			forkAt = f
		}
		out = append(out, fmt.Sprintf("%s %s %s v%d fork #%d msg #%d/%d depth %d effect of %s %s repeats %s [%s]",
			id, decision, tool, version, forkAt, d.index[i][msg], ordinal, depth, effect, state, repeats, cols))
	}
	if err := rows.Err(); err != nil {
		d.fail("reading the ledger: %v", err)
	}
	return out
}

// answer is effect_for_call(conv, call) on database i, ids named by call
// ids, or its SQLSTATE.
func (d *decTwin) answer(i int, call any) string {
	rows, err := d.dbs[i].Query(context.Background(), `
		SELECT concat_ws('|', f.decision, f.state, f.external_ref, f.http_status, f.error_code, f.idempotency_key IS NOT NULL,
		       (SELECT min(x.tool_call_id) FROM convo.tool_effect_calls x
		         WHERE x.conversation_id = $1 AND x.effect_id = f.effect_id))
		  FROM convo.effect_for_call($1, $2) f`, d.conv[i], call)
	if err != nil {
		return "error " + sqlState(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "error " + sqlState(err)
	}
	return strings.Join(out, "; ")
}

// compare fails unless both databases hold the same ledger and answer
// effect_for_call alike for every call so far, an unknown one, NULL, and
// some calls of earlier conversations.
func (d *decTwin) compare(all bool) {
	d.t.Helper()
	old, now := d.ledger(0), d.ledger(1)
	if strings.Join(old, "\n") != strings.Join(now, "\n") {
		d.fail("the ledgers differ:\n 0052:\n  %s\n 0053:\n  %s", strings.Join(old, "\n  "), strings.Join(now, "\n  "))
	}
	asked := []any{"nope", nil}
	if all {
		for _, c := range d.callIDs {
			asked = append(asked, c)
		}
		for _, c := range d.others {
			asked = append(asked, c)
		}
	} else {
		for j := 0; j < 4 && len(d.callIDs) > 0; j++ {
			asked = append(asked, d.callIDs[d.rng.Intn(len(d.callIDs))])
		}
		if len(d.others) > 0 {
			asked = append(asked, d.others[d.rng.Intn(len(d.others))])
		}
	}
	for _, c := range asked {
		if a, b := d.answer(0, c), d.answer(1, c); a != b {
			d.fail("effect_for_call(%v): 0052 answered %q, 0053 %q", c, a, b)
		}
	}
}

// TestAttackDecisionTwin: random histories through the API (appends, agent
// loops with results, regenerations, edits, head moves, answers under any
// message, settlements, repeats, compensations, confirmations, declines,
// erasures, tools registered again or for the first time, rejected
// calls, calls past the eighth part), run on 0052 and 0053 alike: every
// call's decision, fork point, place, effect, repeated effect and the
// effect's columns, every error, and effect_for_call's every answer, must
// be the same.
func TestAttackDecisionTwin(t *testing.T) {
	t.Parallel()
	dbs := [2]*pgxpool.Pool{decDB(t, 52), decDB(t, 53)}
	for _, db := range dbs {
		for tool, scope := range map[string]string{"buy": "tool_call", "buyc": "conversation_args", "buyf": "fork_args"} {
			effRegisterPurchase(t, db, tool, scope, "1 hour")
		}
		registerTestTool(t, db, "look", false, `{"type": "object"}`)
	}
	var others []string
	decisions := map[string]int{}
	for seed := 1; seed <= 24; seed++ {
		d := &decTwin{t: t, dbs: dbs, seed: seed, rng: rand.New(rand.NewSource(int64(seed))), others: others,
			index: [2]map[string]int{{}, {}}, settled: map[string][]any{}}
		system := ""
		if seed%2 == 0 {
			system = "You buy things."
		}
		for i, db := range dbs {
			d.conv[i] = createConversation(t, db, "owner-twin", system)
		}
		if h := d.head(0); h != "" {
			d.added([2]string{d.head(0), d.head(1)}, "system", nil)
		}
		for s := 0; s < 60; s++ {
			d.step()
			d.compare(false)
		}
		d.compare(true)
		for _, line := range d.ledger(1) {
			decisions[strings.Fields(line)[1]]++
		}
		others = append(others, d.callIDs...)
	}
	var kinds []string
	for k, n := range decisions {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("decisions compared: %s", strings.Join(kinds, ", "))
	if decisions["confirm"] == 0 || decisions["execute"] == 0 || decisions["reuse"] == 0 {
		t.Errorf("the histories made too few kinds of decision: %v", kinds)
	}
	requireEqual(t, "self_check failures on 0053", failingChecks(t, dbs[1]), "")
}

// TestAttackDecisionMessageWithTheConversationsID: a fork point that is a
// message whose id is the conversation's (the index's coalesce makes it
// look like the conversation itself, fork point NULL): its first call of a
// tool called at the conversation's fork point is executed, not taken for
// a re-run; a re-run at the conversation's fork point repeats the call
// made there, not the one at the look-alike message.
func TestAttackDecisionMessageWithTheConversationsID(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	conv := createConversation(t, db, "owner-1", "")
	q1 := appendMsg(t, db, conv, "user", textParts("buy"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("b1", "buy", 1)))
	decRequire(t, db, conv, "b1", "execute", "")
	appendMsg(t, db, conv, "user", effToolResults("b1"))
	same := queryRow[string](t, db, `SELECT convo.append_message($1, 'assistant', $2, p_message_id => $1)::text`,
		conv, textParts("bought"))
	requireEqual(t, "the message's id", same, conv)
	q2 := appendMsg(t, db, conv, "user", textParts("buy more"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("b2", "buy", 1)))
	decRequire(t, db, conv, "b2", "execute", "")
	requireEqual(t, "b2's fork point", effLink(t, db, conv, "b2").ForkPointID, conv)
	editMsg(t, db, conv, q2, textParts("buy more, please"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("b3", "buy", 1)))
	decRequire(t, db, conv, "b3", "confirm", "b2")
	editMsg(t, db, conv, q1, textParts("buy, please"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("b4", "buy", 1)))
	decRequire(t, db, conv, "b4", "confirm", "b1")
	requireEqual(t, "b4's fork point", effLink(t, db, conv, "b4").ForkPointID, "")
	requireEqual(t, "self_check failures", failingChecks(t, db), "")
}
