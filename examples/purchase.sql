-- The seed's purchase story, in psql: a charge is applied; an edit re-runs
-- the same purchase (reused, not charged twice); a second edit asks for
-- another amount (held for confirmation); the first charge, now on no live
-- branch, is listed as orphaned until a refund compensates it.
-- Run it with: psql "$DATABASE_URL" -f examples/purchase.sql
-- (tests/purchase_test.go runs it too, so it cannot rot.)

-- The DBA allowlists the tool: its argument schema is frozen in version 1.
-- fork_args: the same arguments from the same fork point are one request.
SELECT convo.register_tool('purchase_credits', true,
       '{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
         "properties": {"amount_minor": {"type": "integer", "minimum": 1, "maximum": 100000},
                        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}',
       p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency');

SELECT convo.create_conversation('customer-7', 'You sell credits.', '{}', 'c0000000-0000-4000-8000-0000000000b1');
SELECT convo.append_message('c0000000-0000-4000-8000-0000000000b1', 'user',
       '[{"type": "text", "text": "Buy me 500 credits, pleas"}]', p_message_id => 'b0000000-0000-4000-8000-000000000001');

-- 1. The model calls the tool. Appending the call writes the ledger row in the same transaction.
SELECT convo.append_message('c0000000-0000-4000-8000-0000000000b1', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]',
       p_message_id => 'b0000000-0000-4000-8000-000000000002');
SELECT decision, state, idempotency_key FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p1');
-- ... commit; the loop sends the charge with that idempotency key; the processor answers ch_1:
SELECT convo.settle_effect('c0000000-0000-4000-8000-0000000000b1',
       (SELECT effect_id FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p1')),
       'applied', p_external_ref => 'ch_1', p_http_status => 200, p_evidence => '{"processor": "ok"}');
SELECT convo.append_message('c0000000-0000-4000-8000-0000000000b1', 'tool',
       '[{"type": "tool_result", "tool_use_id": "toolu_p1", "content": {"charge": "ch_1"}}]');

-- 2. The user fixes a typo: the model re-runs the purchase with the same arguments.
SELECT convo.edit_and_resend('c0000000-0000-4000-8000-0000000000b1', 'b0000000-0000-4000-8000-000000000001',
       '[{"type": "text", "text": "Buy me 500 credits, please"}]', p_new_message_id => 'b0000000-0000-4000-8000-000000000003');
SELECT convo.append_message('c0000000-0000-4000-8000-0000000000b1', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p2", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]');
-- reuse: the same effect, already applied as ch_1; no second charge.
SELECT decision, state, external_ref FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p2');

-- 3. A second edit asks for another amount: a re-run under a new key waits for a person.
SELECT convo.edit_and_resend('c0000000-0000-4000-8000-0000000000b1', 'b0000000-0000-4000-8000-000000000001',
       '[{"type": "text", "text": "Buy me 700 credits instead"}]');
SELECT convo.append_message('c0000000-0000-4000-8000-0000000000b1', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p3", "name": "purchase_credits", "input": {"amount_minor": 700, "currency": "EUR"}}]');
SELECT decision, state FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p3');

-- While it waits, ch_1 sits on no live branch: it is listed as orphaned.
SELECT effect_id, external_ref, amount_minor, currency, tool_call_ids FROM convo.orphaned_applied_effects;

-- 4. The business refunds it: a second movement answering the first.
SELECT convo.compensate_effect('c0000000-0000-4000-8000-0000000000b1',
       (SELECT effect_id FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p1')),
       're_1', '{"reason": "customer changed the amount"}');
SELECT count(*) AS orphaned FROM convo.orphaned_applied_effects;

-- 5. The person confirms the 700: pending, under a key of its own that names the effect it repeats.
SELECT convo.confirm_effect('c0000000-0000-4000-8000-0000000000b1',
       (SELECT effect_id FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p3')), 'support:ana');
SELECT decision, state, idempotency_key FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000b1', 'toolu_p3');

-- Every transition, with its actor and evidence.
SELECT ev.effect_id, ev.from_state, ev.to_state, ev.actor, ev.evidence
  FROM convo.tool_effect_events ev
 WHERE ev.conversation_id = 'c0000000-0000-4000-8000-0000000000b1'
 ORDER BY ev.seq;
