-- The seed's purchase story, in psql: a charge is applied; an edit re-runs
-- the same purchase (reused, not charged twice); a second edit asks for
-- another amount (held for confirmation, then confirmed and charged); the
-- first charge, now on no live branch, is listed as orphaned until a refund
-- compensates it. examples/node, examples/python and examples/go tell the
-- same story.
--
-- Run it with: psql "$DATABASE_URL" -f examples/purchase.sql
-- DATABASE_URL connects as the application (a login member of convo_app);
-- ADMIN_DATABASE_URL, if set, as the DBA (a member of convo_admin) for the
-- one call that is the DBA's, register_tool. Unset, DATABASE_URL does both
-- (the superuser URL that `migrate up` prints may).
--
-- Every run makes a conversation of its own (create_conversation picks its
-- id with gen_random_uuid()), so it can run again on the same database: tool
-- call ids need only be unique within their conversation.
-- Each "check" is a query that returns its row only when the story is as
-- told; otherwise \gset says "no rows returned" and the script stops with a
-- non-zero exit. tests/examples_test.go runs it twice, as such login roles.
\set ON_ERROR_STOP on

-- The DBA allowlists the tool with exactly the settings README.md's first
-- block registers (its argument schema is frozen in that version; fork_args:
-- the same arguments from the same fork point are one request). The same
-- settings return the version already registered. Other settings would make
-- a new version: the example rolls that back and stops with one line instead.
\getenv admin_url ADMIN_DATABASE_URL
\if :{?admin_url}
  \getenv app_url DATABASE_URL
  \connect :admin_url
\endif
BEGIN;
SELECT coalesce(max(version), 0) AS registered FROM convo.tools WHERE name = 'purchase_credits' \gset
SELECT convo.register_tool('purchase_credits', true,
       '{"type": "object", "required": ["amount_minor", "currency"], "additionalProperties": false,
         "properties": {"amount_minor": {"type": "integer", "minimum": 1},
                        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}}}',
       p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency') AS version \gset
SELECT :registered IN (0, :version) AS same_settings \gset
\if :same_settings
COMMIT;
\else
ROLLBACK;
\set VERBOSITY terse
\set SHOW_CONTEXT never
DO $$
BEGIN
    RAISE EXCEPTION 'purchase_credits is registered with other settings (version %); the example expects the settings '
                    'README.md registers (its first sql block): run it on a database where purchase_credits is '
                    'registered so, or not at all', (SELECT max(version) FROM convo.tools WHERE name = 'purchase_credits');
END;
$$;
\endif
\echo purchase_credits: version :version
\if :{?admin_url}
  \connect :app_url
\endif

-- 1. The model calls the tool. Appending the call writes the ledger row in
-- the same transaction. Every transaction names its owner with SET LOCAL.
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.create_conversation('customer-7', 'You sell credits.') AS conv \gset
SELECT convo.append_message(:'conv', 'user', '[{"type": "text", "text": "Buy me 500 credits, pleas"}]') AS ask \gset
SELECT convo.append_message(:'conv', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]');
SELECT effect_id AS charge, decision, state, idempotency_key AS charge_key
  FROM convo.effect_for_call(:'conv', 'toolu_p1') \gset
\echo toolu_p1: :decision :state :charge_key
-- check:
SELECT WHERE :'decision' = 'execute' AND :'state' = 'pending' AND :'charge_key' LIKE 'fork_args:%' \gset
COMMIT;

-- 2. Committed: now the loop sends the charge with that idempotency key, and
-- settles with the processor's answer (here, ch_1).
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.settle_effect(:'conv', :'charge', 'applied', p_external_ref => 'ch_1', p_http_status => 200,
                           p_evidence => '{"processor": "ok"}');
SELECT convo.append_message(:'conv', 'tool',
       '[{"type": "tool_result", "tool_use_id": "toolu_p1", "content": {"charge": "ch_1"}}]');
COMMIT;

-- 3. The user fixes a typo: the model re-runs the purchase with the same
-- arguments. reuse: the same effect, already applied as ch_1; nothing is sent.
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.edit_and_resend(:'conv', :'ask', '[{"type": "text", "text": "Buy me 500 credits, please"}]');
SELECT convo.append_message(:'conv', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p2", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]');
SELECT effect_id, decision, state, external_ref FROM convo.effect_for_call(:'conv', 'toolu_p2') \gset
\echo toolu_p2: :decision :state :external_ref
-- check:
SELECT WHERE :'effect_id' = :'charge' AND :'decision' = 'reuse' AND :'state' = 'applied' AND :'external_ref' = 'ch_1' \gset
COMMIT;

-- 4. A second edit asks for another amount: a re-run under a new key waits
-- for a person.
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.edit_and_resend(:'conv', :'ask', '[{"type": "text", "text": "Buy me 700 credits instead"}]');
SELECT convo.append_message(:'conv', 'assistant',
       '[{"type": "tool_use", "id": "toolu_p3", "name": "purchase_credits", "input": {"amount_minor": 700, "currency": "EUR"}}]');
SELECT effect_id AS rerun, decision, state FROM convo.effect_for_call(:'conv', 'toolu_p3') \gset
\echo toolu_p3: :decision :state
-- check:
SELECT WHERE :'decision' = 'confirm' AND :'state' = 'awaiting_confirmation' \gset
COMMIT;

-- 5. The person confirms the 700: pending, under a key of its own that names
-- the effect it repeats. The decision stays confirm: the state says what to
-- do now (send it), so a loop that reads this back after a crash sends
-- instead of asking again.
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.confirm_effect(:'conv', :'rerun', 'support:ana');
SELECT decision, state, idempotency_key AS rerun_key FROM convo.effect_for_call(:'conv', 'toolu_p3') \gset
\echo toolu_p3: :decision :state :rerun_key
-- check:
SELECT WHERE :'decision' = 'confirm' AND :'state' = 'pending' AND :'rerun_key' = 'rerun:' || :'rerun' || ':of:' || :'charge' \gset
COMMIT;
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.settle_effect(:'conv', :'rerun', 'applied', p_external_ref => 'ch_2', p_http_status => 200);
COMMIT;

-- 6. ch_1 sits on no live branch: a reconciliation job finds it as orphaned,
-- and the business refunds it: a second movement answering the first.
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT effect_id AS orphan, external_ref, amount_minor, currency, array_to_string(tool_call_ids, ' ') AS calls
  FROM convo.orphaned_applied_effects WHERE conversation_id = :'conv' \gset
\echo orphaned: :external_ref :amount_minor :currency, called by :calls
-- check:
SELECT WHERE :'orphan' = :'charge' AND :'calls' = 'toolu_p1 toolu_p2' \gset
SELECT convo.compensate_effect(:'conv', :'charge', 're_1', '{"reason": "customer changed the amount"}');
SELECT count(*) AS orphans FROM convo.orphaned_applied_effects WHERE conversation_id = :'conv' \gset
\echo orphaned after the refund: :orphans
-- check:
SELECT WHERE :orphans = 0 \gset
COMMIT;

-- 7. How a CV error arrives in psql: the message and its DETAIL are printed,
-- and :LAST_ERROR_SQLSTATE holds the code. A compare-and-set append on a
-- head that has moved is CV001; the DETAIL names the current head.
\echo 'expected: a CV001 error, its DETAIL naming the current head'
\set ON_ERROR_STOP off
BEGIN;
SET LOCAL convo.owner_id = 'customer-7';
SELECT convo.append_message(:'conv', 'user', '[{"type": "text", "text": "thanks"}]', p_expected_head => :'ask');
ROLLBACK;
\set ON_ERROR_STOP on
\echo got :LAST_ERROR_SQLSTATE
-- check:
SELECT WHERE :'LAST_ERROR_SQLSTATE' = 'CV001' \gset

\echo 'ok: examples/purchase.sql'
