package tests

import "testing"

// TestPurchaseStory is the seed's purchase story from Go, end to end: a
// purchase is applied; a typo-fix edit re-runs it with the same arguments
// (reused, no second effect, and not orphaned, since the new call is
// live); a second edit asks for another amount (held for confirmation);
// meanwhile the first charge is on no live branch and is listed as
// orphaned, until a refund compensates it. Then every illegal transition
// through the API raises CV006 and changes nothing, and exact repeats are
// no-ops.
func TestPurchaseStory(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	const tool = "purchase_credits"
	effRegisterPurchase(t, db, tool, "fork_args", "20 seconds")
	conv := createConversation(t, db, "customer-7", "You sell credits.")
	root := headOf(t, db, conv)
	session := queryRow[string](t, db, `SELECT session_user::text`)

	// 1. The charge.
	u1 := appendMsg(t, db, conv, "user", textParts("Buy me 500 credits, pleas"))
	a1 := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_p1", tool, 500)))
	p1 := effForCall(t, db, conv, "toolu_p1")
	requireEqual(t, "toolu_p1", p1, effDecision{EffectID: p1.EffectID, Decision: "execute", State: "pending", Key: p1.Key})
	charge := p1.EffectID
	effSettle(t, db, conv, charge, "ch_1")
	appendMsg(t, db, conv, "tool", effToolResults("toolu_p1"))
	appendMsg(t, db, conv, "assistant", textParts("Done: 500 credits."))
	requireSlice(t, "orphaned while the charge is live", effOrphanIDs(t, db, conv), nil)

	// 2. The typo fix: the same purchase from the same fork point is the same request.
	effectsBefore := effCount(t, db, conv)
	editMsg(t, db, conv, u1, textParts("Buy me 500 credits, please"))
	a2 := appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_p2", tool, 500)))
	requireEqual(t, "toolu_p2", effForCall(t, db, conv, "toolu_p2"),
		effDecision{EffectID: charge, Decision: "reuse", State: "applied", Key: p1.Key, ExternalRef: "ch_1", HTTPStatus: 200})
	requireEqual(t, "effects after the typo fix", effCount(t, db, conv), effectsBefore)
	requireEqual(t, "toolu_p2's fork point", effLink(t, db, conv, "toolu_p2").ForkPointID, root)
	// toolu_p1's message is off the path now, but toolu_p2 is on it and
	// names the same effect: the charge is not orphaned.
	requireEqual(t, "toolu_p1's message is off the path", queryRow[bool](t, db,
		`SELECT $2::uuid = ANY (ARRAY(SELECT message_id FROM convo.path($1)))`, conv, a1), false)
	requireSlice(t, "orphaned after the typo fix", effOrphanIDs(t, db, conv), nil)

	// 3. Another amount: a re-run under a new key waits for a person.
	editMsg(t, db, conv, u1, textParts("Buy me 700 credits instead"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_p3", tool, 700)))
	p3 := effForCall(t, db, conv, "toolu_p3")
	requireEqual(t, "toolu_p3", p3, effDecision{EffectID: p3.EffectID, Decision: "confirm", State: "awaiting_confirmation", Key: p3.Key})
	rerun := p3.EffectID
	if rerun == charge || p3.Key == p1.Key || !effScopeKeyPattern.MatchString(p3.Key) {
		t.Fatalf("the re-run needs an effect and a scope key of its own: %+v vs %+v", p3, p1)
	}
	requireEqual(t, "effects after the second edit", effCount(t, db, conv), effectsBefore+1)
	requireEqual(t, "the re-run repeats", effRead(t, db, conv, rerun).RepeatsEffectID, charge)

	// While it waits, the charge is on no live branch.
	chargeRow := effRead(t, db, conv, charge)
	orphans := effOrphans(t, db, conv)
	if len(orphans) != 1 {
		t.Fatalf("orphaned: %+v, want the charge alone", orphans)
	}
	o := orphans[0]
	requireEqual(t, "orphan", [4]string{o.EffectID, o.ToolName, o.ExternalRef, o.Currency}, [4]string{charge, tool, "ch_1", "EUR"})
	requireEqual(t, "orphan amount", o.AmountMinor, int64(500))
	requireEqual(t, "orphan settled_at", o.SettledAt.Equal(*chargeRow.SettledAt), true)
	requireSlice(t, "orphan tool_call_ids", o.ToolCallIDs, []string{"toolu_p1", "toolu_p2"})

	// Reachability is computed, not stored: switching back to the typo
	// fix's branch takes the charge off the list, and back again puts it on.
	head := headOf(t, db, conv)
	moveHead(t, db, conv, a2)
	requireSlice(t, "orphaned on the typo fix's branch", effOrphanIDs(t, db, conv), nil)
	moveHead(t, db, conv, head)
	requireSlice(t, "orphaned back on the 700 branch", effOrphanIDs(t, db, conv), []string{charge})

	// 4. The refund answers the charge; it leaves the list.
	mustExec(t, db, `SELECT convo.compensate_effect($1, $2, 're_1', '{"reason": "customer changed the amount"}')`, conv, charge)
	requireSlice(t, "orphaned after the refund", effOrphanIDs(t, db, conv), nil)
	requireEqual(t, "charge after the refund", effForCall(t, db, conv, "toolu_p1"),
		effDecision{EffectID: charge, Decision: "execute", State: "compensated", Key: p1.Key, ExternalRef: "ch_1", HTTPStatus: 200})

	// A third edit asks for 900; it is declined.
	editMsg(t, db, conv, u1, textParts("Make it 900"))
	appendMsg(t, db, conv, "assistant", effToolUses(effBuy("toolu_p4", tool, 900)))
	p4 := effForCall(t, db, conv, "toolu_p4")
	requireEqual(t, "toolu_p4 decision", p4.Decision, "confirm")
	declined := p4.EffectID
	effDecline(t, db, conv, declined, "support:ana")
	requireEqual(t, "declined", effForCall(t, db, conv, "toolu_p4"),
		effDecision{EffectID: declined, Decision: "confirm", State: "failed", Key: p4.Key, ErrorCode: "declined"})

	// Each step is a call on conversation $1 and effect $2.
	type step struct{ name, effect, sql string }
	illegal := func(t *testing.T, steps []step) {
		t.Helper()
		for _, s := range steps {
			before := effLedger(t, db)
			err := effExecErr(db, s.sql, conv, s.effect)
			if sqlState(err) != "CV006" {
				t.Errorf("%s: want CV006, got %v", s.name, err)
			}
			requireLedgerUnchanged(t, db, s.name, before)
		}
	}

	t.Run("illegal transitions of an awaiting, a compensated and a declined effect", func(t *testing.T) {
		illegal(t, []step{
			{"settle an awaiting effect applied", rerun, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_x')`},
			{"settle an awaiting effect failed", rerun, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`},
			{"compensate an awaiting effect", rerun, `SELECT convo.compensate_effect($1, $2, 're_x')`},
			{"settle a compensated effect applied", charge, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_2', p_http_status => 200)`},
			{"settle a compensated effect failed", charge, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'card_declined')`},
			{"compensate a compensated effect again, by another movement", charge, `SELECT convo.compensate_effect($1, $2, 're_2')`},
			{"confirm a compensated effect", charge, `SELECT convo.confirm_effect($1, $2, 'support:ana')`},
			{"decline a compensated effect", charge, `SELECT convo.decline_effect($1, $2, 'support:ana')`},
			{"decline a declined effect, by someone else", declined, `SELECT convo.decline_effect($1, $2, 'support:bob')`},
			{"confirm a declined effect", declined, `SELECT convo.confirm_effect($1, $2, 'support:ana')`},
			{"settle a declined effect applied", declined, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_x')`},
			{"settle a declined effect failed otherwise", declined, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'timeout')`},
			{"compensate a declined effect", declined, `SELECT convo.compensate_effect($1, $2, 're_x')`},
		})
	})

	// 5. The person confirms the 700: pending, under a key of its own.
	effConfirm(t, db, conv, rerun, "support:ana")
	requireEqual(t, "confirmed", effForCall(t, db, conv, "toolu_p3"),
		effDecision{EffectID: rerun, Decision: "confirm", State: "pending", Key: "rerun:" + rerun + ":of:" + charge})

	t.Run("illegal transitions of a pending effect", func(t *testing.T) {
		illegal(t, []step{
			{"compensate a pending effect", rerun, `SELECT convo.compensate_effect($1, $2, 're_x')`},
			{"confirm a pending effect, by someone else", rerun, `SELECT convo.confirm_effect($1, $2, 'support:bob')`},
			{"decline a pending effect", rerun, `SELECT convo.decline_effect($1, $2, 'support:ana')`},
		})
	})

	effSettle(t, db, conv, rerun, "ch_3")

	t.Run("illegal transitions of an applied effect", func(t *testing.T) {
		illegal(t, []step{
			{"decline an applied effect", rerun, `SELECT convo.decline_effect($1, $2, 'support:ana')`},
			{"confirm an applied effect, by someone else", rerun, `SELECT convo.confirm_effect($1, $2, 'support:bob')`},
			{"settle an applied effect failed", rerun, `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`},
			{"settle an applied effect with another reference", rerun, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_4', p_http_status => 200)`},
			{"settle an applied effect with another status", rerun, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_3', p_http_status => 201)`},
		})
	})

	t.Run("exact repeats are no-ops", func(t *testing.T) {
		before := effLedger(t, db)
		events := len(effEvents(t, db, conv))
		for _, s := range []step{
			{"settle applied again", rerun, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => 'ch_3', p_http_status => 200)`},
			{"confirm again", rerun, `SELECT convo.confirm_effect($1, $2, 'support:ana')`},
			{"compensate again", charge, `SELECT convo.compensate_effect($1, $2, 're_1', '{"reason": "customer changed the amount"}')`},
			{"decline again", declined, `SELECT convo.decline_effect($1, $2, 'support:ana')`},
		} {
			mustExec(t, db, s.sql, conv, s.effect)
			requireLedgerUnchanged(t, db, s.name, before)
		}
		requireEqual(t, "events", len(effEvents(t, db, conv)), events)
	})

	requireSlice(t, "every transition, in order", effEvents(t, db, conv), []effEvent{
		{charge, "requested", "pending", session, `{}`},
		{charge, "pending", "applied", session, `{}`},
		{rerun, "requested", "awaiting_confirmation", session, `{}`},
		{charge, "applied", "compensated", session, `{"reason": "customer changed the amount"}`},
		{declined, "requested", "awaiting_confirmation", session, `{}`},
		{declined, "awaiting_confirmation", "failed", "support:ana", `{}`},
		{rerun, "awaiting_confirmation", "pending", "support:ana", `{}`},
		{rerun, "pending", "applied", session, `{}`},
	})
	// The head is on the 900 branch, so the 700 charge, applied last, sits
	// on no live branch: it is orphaned. The compensated charge and the
	// declined re-run are not applied.
	requireSlice(t, "orphaned at the end", effOrphanIDs(t, db, conv), []string{rerun})
	requireCount(t, db, 3, `SELECT count(*) FROM convo.tool_effects WHERE conversation_id = $1`, conv)
}
