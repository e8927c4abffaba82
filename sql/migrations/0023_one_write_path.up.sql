-- 0023_one_write_path: every write goes through one entry (write_messages,
-- log_head_move, effect_event) with its values as arguments; the triggers
-- only guard writes from outside pgconvo's code; a part is stored once
-- (keyed_parts for what is addressed by key, message_parts a view); the
-- live path is its segments; seq is numbered per conversation.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- Table changes, written by hand, go here, above the objects that use them.

-- The triggers that computed (the tree's place, the parts' rows, the
-- ledger's decisions, the logs, the live path, the notifications) go, and
-- every trigger is renamed in the order it fires; the functions behind the
-- computing ones go with them, and those whose values came from settings
-- or a marker take arguments now.
DROP TRIGGER conversation_head_log_append_only ON convo.conversation_head_log;
DROP TRIGGER conversation_head_log_no_forgery ON convo.conversation_head_log;
DROP TRIGGER conversation_head_log_notify ON convo.conversation_head_log;
DROP TRIGGER conversations_erasure_only ON convo.conversations;
DROP TRIGGER conversations_guard ON convo.conversations;
DROP TRIGGER conversations_head_log ON convo.conversations;
DROP TRIGGER conversations_no_delete ON convo.conversations;
DROP TRIGGER effect_transitions_fixed ON convo.effect_transitions;
DROP TRIGGER erasure_places_append_only ON convo.erasure_places;
DROP TRIGGER erasure_places_no_forgery ON convo.erasure_places;
DROP TRIGGER erasures_append_only ON convo.erasures;
DROP TRIGGER erasures_no_forgery ON convo.erasures;
DROP TRIGGER generations_no_delete ON convo.generations;
DROP TRIGGER generations_transition ON convo.generations;
DROP TRIGGER import_origins_append_only ON convo.import_origins;
DROP TRIGGER import_origins_erasure_only ON convo.import_origins;
DROP TRIGGER import_origins_no_forgery ON convo.import_origins;
DROP TRIGGER imports_append_only ON convo.imports;
DROP TRIGGER imports_erasure_only ON convo.imports;
DROP TRIGGER imports_no_forgery ON convo.imports;
DROP TRIGGER live_path_no_forgery ON convo.live_path;
DROP TRIGGER message_parts_append_only ON convo.message_parts;
DROP TRIGGER message_parts_check ON convo.message_parts;
DROP TRIGGER message_parts_erasure_only ON convo.message_parts;
DROP TRIGGER message_parts_no_forgery ON convo.message_parts;
DROP TRIGGER message_parts_record_tool_call ON convo.message_parts;
DROP TRIGGER messages_append_only ON convo.messages;
DROP TRIGGER messages_erasure_only ON convo.messages;
DROP TRIGGER messages_fill_tree ON convo.messages;
DROP TRIGGER messages_split_parts ON convo.messages;
DROP TRIGGER tool_effect_calls_append_only ON convo.tool_effect_calls;
DROP TRIGGER tool_effect_calls_no_forgery ON convo.tool_effect_calls;
DROP TRIGGER tool_effect_events_append_only ON convo.tool_effect_events;
DROP TRIGGER tool_effect_events_erasure_only ON convo.tool_effect_events;
DROP TRIGGER tool_effect_events_no_forgery ON convo.tool_effect_events;
DROP TRIGGER tool_effect_events_notify ON convo.tool_effect_events;
DROP TRIGGER tool_effects_log ON convo.tool_effects;
DROP TRIGGER tool_effects_no_delete ON convo.tool_effects;
DROP TRIGGER tool_effects_no_forgery ON convo.tool_effects;
DROP TRIGGER tool_effects_transition ON convo.tool_effects;
DROP TRIGGER tool_receipts_no_delete ON convo.tool_receipts;
DROP TRIGGER tool_receipts_no_forgery ON convo.tool_receipts;
DROP TRIGGER tool_receipts_notify ON convo.tool_receipts;
DROP TRIGGER tool_receipts_transition ON convo.tool_receipts;
DROP TRIGGER tools_append_only ON convo.tools;
DROP TRIGGER tools_no_forgery ON convo.tools;
DROP FUNCTION convo_private.messages_fill_tree();
DROP FUNCTION convo_private.messages_split_parts();
DROP FUNCTION convo_private.message_parts_check();
DROP FUNCTION convo_private.move_head_to(uuid, uuid, text, text);
DROP FUNCTION convo_private.is_import(uuid);
DROP FUNCTION convo_private.set_effect_context(text, jsonb);
DROP FUNCTION convo_private.tool_effects_log();
DROP FUNCTION convo_private.live_path_rows(uuid);
DROP FUNCTION convo_private.notify_head_move();
DROP FUNCTION convo_private.notify_effect_event();
DROP FUNCTION convo_private.is_erasure(text, jsonb, jsonb);
DROP FUNCTION convo_private.refuse_all_but_erasure();
DROP FUNCTION convo_private.check_parts(jsonb, text);
DROP FUNCTION convo_private.record_tool_call();
DROP FUNCTION convo_private.log_head_move();
DROP FUNCTION convo_private.notify_receipt();
DROP FUNCTION convo_private.move_live_path(uuid, uuid, uuid);

-- A part is stored once: in its message's array. The parts addressed by
-- key (tool calls, tool results, attachments) get a row of ids each, which
-- the ledger references; message_parts becomes a view of the arrays.
CREATE TABLE convo.keyed_parts (
    conversation_id uuid NOT NULL,
    message_id      uuid NOT NULL,
    ordinal         int  NOT NULL CHECK (ordinal >= 0),
    type            text NOT NULL CHECK (type IN ('tool_use', 'tool_result', 'attachment')),
    tool_call_id    text CONSTRAINT keyed_parts_tool_call_id_length CHECK (length(tool_call_id) <= 255),
    tool_name       text,
    PRIMARY KEY (conversation_id, message_id, ordinal),
    CONSTRAINT keyed_parts_message_fkey FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages (conversation_id, id),
    CONSTRAINT keyed_parts_call_check CHECK ((type IN ('tool_use', 'tool_result')) = (tool_call_id IS NOT NULL)),
    CONSTRAINT keyed_parts_name_check CHECK ((type = 'tool_use') = (tool_name IS NOT NULL))
);
CREATE UNIQUE INDEX keyed_parts_tool_use_key ON convo.keyed_parts (conversation_id, tool_call_id) WHERE type = 'tool_use';
CREATE INDEX keyed_parts_tool_call_idx ON convo.keyed_parts (tool_call_id) WHERE type = 'tool_use';
COMMENT ON TABLE convo.keyed_parts IS
    'The parts addressed by key (tool calls, tool results, attachments), ids only: the part itself is its message''s; append-only.';
ALTER TABLE convo.keyed_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY keyed_parts_reader_reads_all ON convo.keyed_parts FOR SELECT TO convo_reader USING (true);
-- (In a block: the rows are data, not the schema's, to the down migration's check.)
DO $$
BEGIN
    INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
    SELECT p.conversation_id, p.message_id, p.ordinal, p.type, p.tool_call_id, p.tool_name
      FROM convo.message_parts p WHERE p.type IN ('tool_use', 'tool_result', 'attachment');
END;
$$;
ALTER TABLE convo.tool_effect_calls DROP CONSTRAINT tool_effect_calls_conversation_id_message_id_ordinal_fkey,
    ADD CONSTRAINT tool_effect_calls_part_fkey FOREIGN KEY (conversation_id, message_id, ordinal)
        REFERENCES convo.keyed_parts (conversation_id, message_id, ordinal);
DROP TABLE convo.message_parts;

-- The live path as its segments: one row per branch it runs through.
DROP TABLE convo.live_path;
CREATE TABLE convo.live_path (
    conversation_id uuid NOT NULL,
    min_depth       int  NOT NULL CHECK (min_depth >= 0),
    branch_id       uuid NOT NULL,
    max_depth       int  NOT NULL,
    PRIMARY KEY (conversation_id, min_depth),
    CONSTRAINT live_path_depths_check CHECK (max_depth >= min_depth)
);
COMMENT ON TABLE convo.live_path IS
    'Derived: the segments of each conversation''s live path (branch, first and last depth on the path), kept by every head move; no content.';
ALTER TABLE convo.live_path ENABLE ROW LEVEL SECURITY;
CREATE POLICY live_path_reader_reads_all ON convo.live_path FOR SELECT TO convo_reader USING (true);

-- seq per conversation, numbered under the conversation's lock (the values
-- so far stay: they increase within each conversation).
ALTER TABLE convo.conversation_head_log ALTER COLUMN seq DROP IDENTITY;
ALTER TABLE convo.tool_effect_events ALTER COLUMN seq DROP IDENTITY;
ALTER TABLE convo.tool_effect_events DROP CONSTRAINT tool_effect_events_pkey, ADD PRIMARY KEY (conversation_id, seq);
CREATE INDEX tool_effect_events_effect_idx ON convo.tool_effect_events (conversation_id, effect_id, seq);
-- A head-log row's conversation is its head message's (that key checks it).
ALTER TABLE convo.conversation_head_log DROP CONSTRAINT conversation_head_log_conversation_id_fkey;
-- No transaction id tells an erasure any more, and no marker an import.
ALTER TABLE convo.erasures DROP COLUMN xact;
DROP TABLE convo_private.importing;

-- Every table says what it is (docs/schema.md prints it).
COMMENT ON TABLE convo.conversation_head_log IS
    'Every head movement, in the transaction that made it: seq per conversation, the head before and after, who and why; append-only.';
COMMENT ON TABLE convo.conversations IS
    'One conversation: its owner, its head (the live leaf) and metadata; the head moves only through the API (a direct UPDATE is logged as direct_update); never deleted.';
COMMENT ON TABLE convo.effect_transitions IS
    'The effect state machine: each allowed move of tool_effects.state and the columns it may change; fixed.';
COMMENT ON TABLE convo.generations IS
    'One model call: the prompt it answered, streaming until completed (its message), failed or cancelled; a finished one is never changed.';
COMMENT ON TABLE convo.messages IS
    'The message tree: each message''s parent, depth, sibling position and branch, role and parts; append-only (erasure redacts parts, nothing else changes).';
COMMENT ON TABLE convo.tool_effect_calls IS
    'Each tool call of a message and its ledger decision (new effect, repeat, paused, read-only), made before a request can leave; append-only.';
COMMENT ON TABLE convo.tool_effect_events IS
    'Each state change of an effect, seq per conversation, with who and the evidence; append-only.';
COMMENT ON TABLE convo.tool_effects IS
    'The effects ledger: what an effectful tool call does to the world, keyed for deduplication, in the state machine of effect_transitions.';
COMMENT ON TABLE convo.tool_receipts IS
    'A route-initiated mutation: the request (digest keyed), arguments validated against the tool''s frozen schema, then applied or failed with an HTTP-style status.';
COMMENT ON TABLE convo.tools IS
    'The tool registry: each name and version with its frozen argument schema, whether it is effectful, its idempotency scope and deadline; append-only.';

-- append_message: a child of the current head (a root if there is none), and
-- the head moves to it (reason 'append'), through write_messages. A repeat
-- with the same p_message_id is recognised before any other check and
-- returns the first result, writing nothing.
CREATE OR REPLACE FUNCTION convo.append_message(
    p_conversation_id uuid,
    p_role            text,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_message_id      uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid := convo_private.lock_conversation(p_conversation_id);
    v_id   uuid := coalesce(p_message_id, gen_random_uuid());
BEGIN
    IF p_role IS NULL OR p_parts IS NULL THEN
        RAISE EXCEPTION 'p_role and p_parts are required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF p_message_id IS NOT NULL
       AND convo_private.is_retry(p_conversation_id, p_message_id, p_role, p_parts, NULL, false) THEN
        RETURN p_message_id;
    END IF;
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head, ARRAY[v_id], ARRAY[v_head], ARRAY[p_role],
                                         ARRAY[p_parts], NULL, NULL, NULL, v_id, 'append', p_moved_by);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.append_message(uuid, text, jsonb, uuid, uuid, text) IS
    'Append a message under the current head and move the head to it; compare-and-set with p_expected_head, retry-safe by p_message_id.';

-- apply_receipt: pending, with validated arguments, to applied. Call it in
-- the same transaction as the mutation itself to make the two atomic: both
-- commit, or neither does. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.apply_receipt(p_receipt_id uuid, p_result_ref text, p_http_status int DEFAULT 201)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_result_ref IS NULL OR p_result_ref = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 200 AND 299 THEN
        RAISE EXCEPTION 'p_result_ref and a 2xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_result_ref) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_result_ref is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'applied' AND v_receipt.result_ref = p_result_ref AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments_valid IS NOT TRUE THEN
        RAISE EXCEPTION 'receipt % is % with % arguments: only a pending receipt with valid arguments is applied',
                p_receipt_id, v_receipt.status,
                CASE v_receipt.arguments_valid WHEN true THEN 'valid' WHEN false THEN 'invalid' ELSE 'no' END
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'applied', result_ref = p_result_ref, http_status = p_http_status, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'applied', true);
END;
$$;

COMMENT ON FUNCTION convo.apply_receipt(uuid, text, int) IS
    'Mark a pending, validly filled receipt applied; run it in the mutation''s own transaction to make the two atomic.';

-- begin_receipt: the receipt row first, in pending, before the model fills
-- any argument: one allowlisted tool, its version frozen here. A repeat with
-- the same owner and key returns the first row (created = false); the same
-- key with another tool or request raises CV009. A convo_app session files
-- receipts only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.begin_receipt(
    p_owner_id        text,
    p_idempotency_key text,
    p_tool_name       text,
    p_request         jsonb DEFAULT '{}')
RETURNS TABLE (receipt_id uuid, status text, http_status int, error_code text, result_ref text, created boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool    convo.tools;
    v_digest  text;
    v_receipt convo.tool_receipts;
    v_now     timestamptz;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' OR p_request IS NULL OR p_tool_name IS NULL THEN
        RAISE EXCEPTION 'p_owner_id, p_tool_name and p_request are required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, tool %s, key %s', coalesce(p_owner_id, 'NULL'),
                                                     coalesce(p_tool_name, 'NULL'), coalesce(p_idempotency_key, 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not create receipts for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    IF p_idempotency_key IS NULL OR length(p_idempotency_key) NOT BETWEEN 8 AND 255 THEN
        RAISE EXCEPTION 'an idempotency key is 8 to 255 characters'
            USING ERRCODE = 'CV011', DETAIL = format('key %s', coalesce(quote_literal(p_idempotency_key), 'NULL'));
    END IF;
    PERFORM convo_private.check_size('p_request', p_request, convo.max_request_bytes());
    -- Keyed (keyed_digest): the digest outlives an erasure of the request.
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_request::text, 'UTF8')), 'hex'));

    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    IF NOT FOUND THEN
        v_tool := convo_private.tool_ref(p_tool_name);
        v_now := clock_timestamp();
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest,
                                         created_at, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                v_now, v_now + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
            PERFORM convo_private.notify_receipt(v_receipt.id, 'pending', false);
            RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                                v_receipt.result_ref, true;
            RETURN;
        END IF;
        -- Another transaction filed the same key first: answer as a repeat.
        SELECT * INTO v_receipt FROM convo.tool_receipts r
         WHERE r.owner_id = p_owner_id AND r.idempotency_key = p_idempotency_key;
    END IF;
    IF v_receipt.tool_name <> p_tool_name OR v_receipt.request_digest <> v_digest THEN
        RAISE EXCEPTION 'idempotency key % is already used for a different request', p_idempotency_key
            USING ERRCODE = 'CV009',
                  DETAIL = format('receipt %s, owner %s, tool %s', v_receipt.id, p_owner_id, v_receipt.tool_name);
    END IF;
    RETURN QUERY SELECT v_receipt.id, v_receipt.status, v_receipt.http_status, v_receipt.error_code,
                        v_receipt.result_ref, false;
END;
$$;

COMMENT ON FUNCTION convo.begin_receipt(text, text, text, jsonb) IS
    'File a receipt (pending) before a route-initiated mutation; a repeat of the key returns the first row.';

-- cancel_generation: streaming to cancelled (the user pressed stop). A
-- repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.cancel_generation(p_conversation_id uuid, p_generation_id uuid)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz;
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF v_generation.state = 'cancelled' THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation is cancelled', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'cancelled', finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
END;
$$;

COMMENT ON FUNCTION convo.cancel_generation(uuid, uuid) IS 'A streaming generation was cancelled.';

-- compensate_effect: applied to compensated. A settled capture cannot be
-- withdrawn, only answered by a second movement (a refund, a reversal),
-- named by its id in compensated_by. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.compensate_effect(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_compensated_by  text,
    p_evidence        jsonb DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_compensated_by IS NULL OR p_compensated_by = '' OR p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_compensated_by (the id of the answering movement) and p_evidence are required'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF length(p_compensated_by) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_compensated_by is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());
    IF v_effect.state = 'compensated' AND v_effect.compensated_by = p_compensated_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'applied' THEN
        RAISE EXCEPTION 'effect % is %: only an applied effect is compensated', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, compensated_by %s', p_effect_id, v_effect.state, v_effect.compensated_by);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'applied', 'compensated', convo_private.caller(), p_evidence);
END;
$$;

COMMENT ON FUNCTION convo.compensate_effect(uuid, uuid, text, jsonb) IS
    'An applied effect answered by a second movement (refund, reversal) named in p_compensated_by.';

-- complete_generation: streaming to completed. The answer becomes an
-- assistant child of the prompt message in the same transaction
-- (regenerate if the prompt already has an assistant child, branch if it has
-- other children); the head moves to it only if the head is where it was at
-- begin_generation, so a late answer does not yank a tab that moved on.
-- An exact repeat returns the same message.
CREATE OR REPLACE FUNCTION convo.complete_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_parts           jsonb,
    p_usage           jsonb DEFAULT '{}',
    p_finish_reason   text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head       uuid := convo_private.lock_conversation(p_conversation_id);
    v_generation convo.generations := convo_private.generation_ref(p_conversation_id, p_generation_id);
    v_message    uuid := gen_random_uuid();
    v_reason     text;
    v_finished   timestamptz;
BEGIN
    IF p_parts IS NULL OR p_usage IS NULL OR jsonb_typeof(p_usage) <> 'object' THEN
        RAISE EXCEPTION 'p_parts and p_usage (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF v_generation.state = 'completed' AND v_generation.usage::text = p_usage::text
       AND v_generation.finish_reason IS NOT DISTINCT FROM p_finish_reason
       AND (SELECT m.parts FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_generation.message_id)::text = p_parts::text THEN
        RETURN v_generation.message_id;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation completes', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    PERFORM convo_private.check_size('p_usage', p_usage, convo.max_detail_bytes());
    IF length(p_finish_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_finish_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    -- 'regenerate' when the prompt already has an answer; write_messages
    -- makes any other later child a 'branch'.
    v_reason := CASE WHEN EXISTS (SELECT 1 FROM convo.messages c
                                   WHERE c.conversation_id = p_conversation_id
                                     AND c.parent_id = v_generation.prompt_message_id
                                     AND c.role = 'assistant') THEN 'regenerate' END;
    -- The head follows only if it is where it was at begin_generation; a
    -- head moved away and back again counts as unmoved: the user is looking
    -- at the prompt the answer is for.
    PERFORM convo_private.write_messages(p_conversation_id, v_head, ARRAY[v_message],
        ARRAY[v_generation.prompt_message_id], ARRAY['assistant'], ARRAY[p_parts], ARRAY[v_reason], NULL, NULL,
        CASE WHEN v_head IS NOT DISTINCT FROM v_generation.head_at_begin THEN v_message END,
        CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END, NULL);
    v_finished := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'completed', message_id = v_message, usage = p_usage, finish_reason = p_finish_reason,
           finished_at = v_finished
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    RETURN v_message;
END;
$$;

COMMENT ON FUNCTION convo.complete_generation(uuid, uuid, jsonb, jsonb, text) IS
    'Complete a streaming generation: its answer becomes a child of the prompt; the head follows only if it has not moved since begin.';

-- confirm_effect: a person confirms a held re-run: awaiting_confirmation to
-- pending, under a key of its own that names the re-run and the effect it
-- repeats (so the outside service sees a new request), its deadline
-- starting now. An exact repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.confirm_effect(p_conversation_id uuid, p_effect_id uuid, p_confirmed_by text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect   convo.tool_effects;
    v_now      timestamptz;
    v_deadline interval;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_confirmed_by IS NULL OR p_confirmed_by = '' THEN
        RAISE EXCEPTION 'p_confirmed_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.confirmed_by = p_confirmed_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is confirmed', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, confirmed_by %s', p_effect_id, v_effect.state, v_effect.confirmed_by);
    END IF;
    v_now := clock_timestamp();
    SELECT t.deadline INTO v_deadline FROM convo.tools t
     WHERE t.name = v_effect.tool_name AND t.version = v_effect.tool_version;
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = v_now,
           deadline_at = v_now + v_deadline
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'pending', p_confirmed_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.confirm_effect(uuid, uuid, text) IS
    'Confirm a held re-run: awaiting_confirmation to pending under a key of its own naming the effect it repeats.';

-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
-- A convo_app session creates only for the owner it set (CV011 otherwise).
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id       uuid := coalesce(p_conversation_id, gen_random_uuid());
    v_existing convo.conversations;
    v_taken    boolean := false;
    v_root     uuid;
    v_parts    jsonb := CASE WHEN p_system_prompt IS NOT NULL
                             THEN jsonb_build_array(jsonb_build_object('type', 'text', 'text', p_system_prompt)) END;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL'));
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF NOT convo_private.writes_owner(p_owner_id) THEN
        RAISE EXCEPTION 'this session may not create conversations for owner %', p_owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s', p_owner_id,
                                  coalesce(nullif(current_setting('convo.owner_id', true), ''), 'unset')),
                  HINT = 'Run SET LOCAL convo.owner_id = ''...'' in the transaction first.';
    END IF;
    IF p_metadata IS NULL OR jsonb_typeof(p_metadata) <> 'object' THEN
        RAISE EXCEPTION 'p_metadata must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF octet_length(p_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s: %s bytes', p_owner_id, octet_length(p_metadata::text));
    END IF;

    -- A given id that is taken is a retry: read first without a lock, so
    -- that another owner's row is never locked or waited for (an UPDATE in
    -- progress would hold up an INSERT ... ON CONFLICT on it).
    IF p_conversation_id IS NOT NULL THEN
        PERFORM FROM convo.conversations c WHERE c.id = v_id;
        v_taken := FOUND;
    END IF;
    IF NOT v_taken THEN
        INSERT INTO convo.conversations (id, owner_id, metadata)
        VALUES (v_id, p_owner_id, p_metadata)
        ON CONFLICT (id) DO NOTHING;
        v_taken := NOT FOUND; -- a concurrent call with the same id came first
    END IF;
    IF v_taken THEN
        -- The same owner, metadata and system prompt return the first
        -- result; anything else, another owner's id included, is CV009.
        -- Locked only if it is this owner's.
        SELECT * INTO v_existing FROM convo.conversations c
         WHERE c.id = v_id AND c.owner_id = p_owner_id
           FOR NO KEY UPDATE;
        -- The system prompt is the message the 'create' move named, whatever
        -- was appended since; compared as text, like the metadata.
        IF v_existing.owner_id IS DISTINCT FROM p_owner_id
           OR v_existing.metadata::text IS DISTINCT FROM p_metadata::text
           OR (SELECT m.parts FROM convo.conversation_head_log l
                 JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.head_message_id
                WHERE l.conversation_id = v_id AND l.reason = 'create')::text IS DISTINCT FROM v_parts::text THEN
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        RETURN v_id;
    END IF;

    IF p_system_prompt IS NOT NULL THEN
        v_root := gen_random_uuid();
        PERFORM convo_private.write_messages(v_id, NULL, ARRAY[v_root], ARRAY[NULL::uuid], ARRAY['system'],
                                             ARRAY[v_parts], NULL, NULL, NULL, v_root, 'create', NULL);
    END IF;
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';

-- decline_effect: a person declines a held re-run: awaiting_confirmation to
-- failed with error code 'declined'; who declined is in the event log. An
-- exact repeat (same person) is a no-op.
CREATE OR REPLACE FUNCTION convo.decline_effect(p_conversation_id uuid, p_effect_id uuid, p_declined_by text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_declined_by IS NULL OR p_declined_by = '' THEN
        RAISE EXCEPTION 'p_declined_by is required' USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF v_effect.state = 'failed' AND v_effect.error_code = 'declined'
       AND (SELECT ev.actor FROM convo.tool_effect_events ev
             WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id AND ev.to_state = 'failed'
             ORDER BY ev.seq DESC LIMIT 1) = p_declined_by THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'awaiting_confirmation' THEN
        RAISE EXCEPTION 'effect % is %: only an effect awaiting confirmation is declined', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', p_effect_id, v_effect.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'awaiting_confirmation', 'failed', p_declined_by, '{}');
END;
$$;

COMMENT ON FUNCTION convo.decline_effect(uuid, uuid, text) IS
    'Decline a held re-run: awaiting_confirmation to failed, error_code declined.';

-- effect_for_call: what the agent loop must do for a tool call, read from the
-- ledger decision written when the call was appended: execute (send with
-- idempotency_key), reuse (take the existing outcome), confirm (ask a
-- person), rejected, or replay (a registered tool without effects). A call
-- of a tool that was not registered then is CV007, whatever came after.
CREATE OR REPLACE FUNCTION convo.effect_for_call(p_conversation_id uuid, p_tool_call_id text)
RETURNS TABLE (effect_id uuid, decision text, state text, idempotency_key text, external_ref text,
               http_status int, error_code text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tool_name text;
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    IF p_tool_call_id IS NULL THEN
        RAISE EXCEPTION 'p_tool_call_id is required' USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT p.tool_name INTO v_tool_name FROM convo.keyed_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            (SELECT p.conversation_id FROM convo.keyed_parts p
              WHERE p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id LIMIT 1));
    END IF;

    RETURN QUERY
    SELECT e.id, l.decision, e.state, e.idempotency_key, e.external_ref, e.http_status, e.error_code
      FROM convo.tool_effect_calls l
      LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
     WHERE l.conversation_id = p_conversation_id AND l.tool_call_id = p_tool_call_id;
    IF FOUND THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'tool % of call % was not on the allowlist when the call was appended',
            v_tool_name, p_tool_call_id
        USING ERRCODE = 'CV007',
              DETAIL = format('tool %s, tool call %s, conversation %s', v_tool_name, p_tool_call_id, p_conversation_id),
              HINT = 'An unregistered tool never gets a go-ahead; register it, then append a new call.';
END;
$$;

COMMENT ON FUNCTION convo.effect_for_call(uuid, text) IS
    'What the agent loop must do for a tool call: execute, reuse, confirm, rejected or replay (CV007 for an unregistered tool).';

-- erase_owner: erase_conversation for every conversation of an owner, and
-- the owner's receipts (request, arguments, expected values), in one
-- transaction; each conversation's erasure and the receipts' are recorded
-- on their own. An owner with nothing stored is not an error. convo_admin's.
CREATE OR REPLACE FUNCTION convo.erase_owner(p_owner_id text, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_owner_id IS NULL OR p_owner_id = '' THEN
        RAISE EXCEPTION 'p_owner_id is required' USING ERRCODE = 'CV011', DETAIL = 'owner NULL or empty';
    END IF;
    IF length(p_owner_id) > convo_private.max_id_length() THEN
        RAISE EXCEPTION 'an owner id is at most % characters', convo_private.max_id_length()
            USING ERRCODE = 'CV011', DETAIL = format('owner of %s characters', length(p_owner_id));
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', p_owner_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('owner %s', p_owner_id);
    END IF;
    -- Lock the owner's conversations in one order, each by its key, as every
    -- writer would.
    FOR v_id IN SELECT c.id FROM convo.conversations c WHERE c.owner_id = p_owner_id ORDER BY c.id LOOP
        PERFORM 1 FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
    END LOOP;
    RETURN QUERY
    SELECT e.place, sum(e.rows_redacted)::bigint
      FROM (SELECT x.* FROM convo.conversations c
                  CROSS JOIN LATERAL convo_private.erase_content(p_owner_id, c.id, p_reason) x
             WHERE c.owner_id = p_owner_id
            UNION ALL
            SELECT y.* FROM convo_private.erase_content(p_owner_id, NULL, p_reason) y) e
     GROUP BY e.place
     ORDER BY e.place;
END;
$$;

COMMENT ON FUNCTION convo.erase_owner(text, text) IS
    'Erase the content of every conversation and receipt of an owner, keeping their shape; recorded with p_reason.';

-- expire_receipts: the sweeper: pending receipts past their tool's deadline
-- fail with 504 deadline_exceeded, so none stays pending forever. Returns
-- how many it failed.
CREATE OR REPLACE FUNCTION convo.expire_receipts(p_now timestamptz DEFAULT clock_timestamp())
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count int;
    v_now   timestamptz;
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
    END IF;
    v_now := clock_timestamp();
    WITH expired AS (
        UPDATE convo.tool_receipts r
           SET status = 'failed', http_status = 504, error_code = 'deadline_exceeded', settled_at = v_now
         WHERE r.status = 'pending' AND r.deadline_at < p_now
        RETURNING r.id, r.arguments IS NOT NULL AS filled)
    SELECT count(*) INTO v_count
      FROM expired e, LATERAL (SELECT convo_private.notify_receipt(e.id, 'failed', e.filled)) n;
    RETURN v_count;
END;
$$;

COMMENT ON FUNCTION convo.expire_receipts(timestamptz) IS
    'Fail pending receipts past their tool''s deadline with 504 deadline_exceeded; returns the count.';

-- fail_generation: streaming to failed, with an error code and details.
-- An exact repeat is a no-op; anything else on an ended generation is CV006.
CREATE OR REPLACE FUNCTION convo.fail_generation(
    p_conversation_id uuid,
    p_generation_id   uuid,
    p_error_code      text,
    p_error           jsonb DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz;
    v_generation convo.generations;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_generation := convo_private.generation_ref(p_conversation_id, p_generation_id);
    IF p_error_code IS NULL OR p_error_code = '' OR p_error IS NULL THEN
        RAISE EXCEPTION 'p_error_code and p_error are required' USING ERRCODE = 'CV011',
            DETAIL = format('generation %s', p_generation_id);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s, generation %s', p_conversation_id, p_generation_id);
    END IF;
    PERFORM convo_private.check_size('p_error', p_error, convo.max_detail_bytes());
    IF v_generation.state = 'failed' AND v_generation.error_code = p_error_code AND v_generation.error::text = p_error::text THEN
        RETURN;
    END IF;
    IF v_generation.state <> 'streaming' THEN
        RAISE EXCEPTION 'generation % is %: only a streaming generation fails', p_generation_id, v_generation.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, state %s', p_generation_id, v_generation.state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.generations g
       SET state = 'failed', error_code = p_error_code, error = p_error, finished_at = v_now
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
END;
$$;

COMMENT ON FUNCTION convo.fail_generation(uuid, uuid, text, jsonb) IS 'A streaming generation failed: record its error code and details.';

-- fail_receipt: pending to failed, with an HTTP-style status and an error
-- code (the fill failed upstream, the mutation was refused, ...). An exact
-- repeat is a no-op.
CREATE OR REPLACE FUNCTION convo.fail_receipt(p_receipt_id uuid, p_http_status int, p_error_code text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_now     timestamptz;
BEGIN
    IF p_error_code IS NULL OR p_error_code = '' OR p_http_status IS NULL OR p_http_status NOT BETWEEN 400 AND 599 THEN
        RAISE EXCEPTION 'p_error_code and a 4xx or 5xx p_http_status are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s, http_status %s', p_receipt_id, p_http_status);
    END IF;
    IF length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_error_code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    IF v_receipt.status = 'failed' AND v_receipt.error_code = p_error_code AND v_receipt.http_status = p_http_status THEN
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' THEN
        RAISE EXCEPTION 'receipt % is %: only a pending receipt fails', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = p_http_status, error_code = p_error_code, settled_at = v_now
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id;
    PERFORM convo_private.notify_receipt(p_receipt_id, 'failed', v_receipt.arguments IS NOT NULL);
END;
$$;

COMMENT ON FUNCTION convo.fail_receipt(uuid, int, text) IS 'Mark a pending receipt failed with an HTTP-style status and error code.';

-- fill_receipt: the model's arguments, checked against the tool version
-- frozen at begin_receipt (422 invalid_arguments), then against the route's
-- own values: every top-level key of p_expected must match (422
-- arg_mismatch, a model retargeting a ticket). Past the deadline the receipt
-- fails with 504 deadline_exceeded. The arguments are kept either way.
CREATE OR REPLACE FUNCTION convo.fill_receipt(p_receipt_id uuid, p_arguments jsonb, p_expected jsonb DEFAULT '{}')
RETURNS TABLE (status text, http_status int, error_code text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts := convo_private.receipt_ref(p_receipt_id);
    v_code    text;
    v_now     timestamptz;
BEGIN
    IF p_arguments IS NULL OR p_expected IS NULL OR jsonb_typeof(p_expected) <> 'object' THEN
        RAISE EXCEPTION 'p_arguments and p_expected (a JSON object) are required'
            USING ERRCODE = 'CV011', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    PERFORM convo_private.check_size('p_arguments', p_arguments, convo.max_request_bytes());
    PERFORM convo_private.check_size('p_expected', p_expected, convo.max_request_bytes());
    -- A repeat is the same text (canonical arguments): 500 and 500.0 differ.
    IF v_receipt.arguments::text = p_arguments::text AND v_receipt.expected::text = p_expected::text THEN
        RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
        RETURN;
    END IF;
    IF v_receipt.status <> 'pending' OR v_receipt.arguments IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % is % with its arguments filled: it is filled once', p_receipt_id, v_receipt.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, status %s', p_receipt_id, v_receipt.status);
    END IF;

    v_now := clock_timestamp();
    v_code := CASE
        WHEN v_now > v_receipt.deadline_at THEN 'deadline_exceeded'
        ELSE convo_private.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
    END;
    UPDATE convo.tool_receipts r
       SET arguments = p_arguments, expected = p_expected, arguments_valid = (v_code IS NULL),
           filled_at = v_now,
           status = CASE WHEN v_code IS NULL THEN 'pending' ELSE 'failed' END,
           http_status = CASE WHEN v_code IS NULL THEN NULL WHEN v_code = 'deadline_exceeded' THEN 504 ELSE 422 END,
           error_code = v_code,
           settled_at = CASE WHEN v_code IS NOT NULL THEN v_now END
     WHERE r.owner_id = v_receipt.owner_id AND r.id = p_receipt_id
    RETURNING r.status, r.http_status, r.error_code INTO v_receipt.status, v_receipt.http_status, v_receipt.error_code;
    PERFORM convo_private.notify_receipt(p_receipt_id, v_receipt.status, true);
    RETURN QUERY SELECT v_receipt.status, v_receipt.http_status, v_receipt.error_code;
END;
$$;

COMMENT ON FUNCTION convo.fill_receipt(uuid, jsonb, jsonb) IS
    'Check a receipt''s arguments: frozen schema (422 invalid_arguments), then the route''s values (422 arg_mismatch).';

-- import_conversation: restores an export (export_conversation's document,
-- version 2) into this database: a DBA's operation, convo_admin's, for
-- moving or restoring a conversation between databases. The document is
-- accepted only when every row is one the API could have written: its
-- shape and times (restore_problem) before anything is written, its ledger
-- (ledger_problems) once the tree is in; anything else is CV011 naming the
-- key and the row, and nothing is written. Ids, times, reasons, states and
-- who-columns are kept as data; what the database assigns is assigned anew:
-- head-log and event seq are numbered here in the document's order (its
-- numbers kept beside, as source_seq), and a restored effect's scope key is
-- computed under this database's secret (its idempotency key, which may
-- have been sent, is kept). The restore is recorded in convo.imports (who:
-- the caller; when; the document's keyed digest), and every row it writes
-- names that record (import_id), so a restored row is told from one
-- written here. The tree goes in through write_messages, the rest as the
-- document has it, once checked. A repeat is a no-op returning the id; the
-- id with other content is CV009.
CREATE OR REPLACE FUNCTION convo.import_conversation(p_owner_id text, p_export jsonb)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
DECLARE
    v_keys      constant text[] := ARRAY['format', 'version', 'conversation', 'messages', 'head_log', 'generations',
                                         'tools', 'tool_calls', 'effects', 'effect_events', 'erasures', 'origins',
                                         'imports'];
    -- What the database assigns, and so what a restore does not read back as given.
    v_assigned  constant text[] := ARRAY['seq', 'source_seq', 'import_id', 'scope_key', 'idempotency_key'];
    v_now       timestamptz := clock_timestamp();
    v_import    uuid := gen_random_uuid();
    v_key       text;
    v_conv      jsonb;
    v_id        uuid;
    v_digest    text;
    v_existing  convo.conversations;
    v_problem   text;
    v_ids       uuid[];
    v_parents   uuid[];
    v_roles     text[];
    v_parts     jsonb[];
    v_reasons   text[];
    v_times     timestamptz[];
    v_state     text;
    v_table     text;
    v_constraint text;
BEGIN
    PERFORM convo_private.check_import_owner(p_owner_id);

    -- The envelope: format, version, exactly the keys of version 2.
    IF p_export IS NULL OR jsonb_typeof(p_export) <> 'object' THEN
        RAISE EXCEPTION 'p_export must be a JSON object'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, p_export %s', p_owner_id, coalesce(jsonb_typeof(p_export), 'NULL'));
    END IF;
    IF p_export -> 'format' IS DISTINCT FROM '"pgconvo.export"' OR p_export -> 'version' IS DISTINCT FROM '2' THEN
        RAISE EXCEPTION 'not a pgconvo export of version 2'
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, format %s, version %s', p_owner_id,
                                  coalesce((p_export -> 'format')::text, 'missing'), coalesce((p_export -> 'version')::text, 'missing')),
                  HINT = CASE WHEN p_export -> 'version' = '1'
                              THEN 'Version 1 exports lack what a restore checks (the tool version of each call): migrate the source database and export again.'
                              ELSE 'import_conversation reads what export_conversation writes: {"format": "pgconvo.export", "version": 2, ...}.' END;
    END IF;
    FOREACH v_key IN ARRAY v_keys LOOP
        IF NOT p_export ? v_key THEN
            RAISE EXCEPTION 'the export has no key "%"', v_key
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, missing key %s', p_owner_id, v_key);
        END IF;
        IF jsonb_typeof(p_export -> v_key) <> (CASE v_key WHEN 'format' THEN 'string' WHEN 'version' THEN 'number'
                                                        WHEN 'conversation' THEN 'object' ELSE 'array' END) THEN
            RAISE EXCEPTION 'the export''s "%" is a JSON %', v_key, jsonb_typeof(p_export -> v_key)
                USING ERRCODE = 'CV011', DETAIL = format('owner %s, key %s', p_owner_id, v_key);
        END IF;
    END LOOP;
    SELECT k INTO v_key FROM jsonb_object_keys(p_export) k WHERE k <> ALL (v_keys) ORDER BY k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the export has an unknown key "%"', v_key
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, unknown key %s', p_owner_id, v_key);
    END IF;
    v_conv := p_export -> 'conversation';
    IF jsonb_typeof(v_conv -> 'id') IS DISTINCT FROM 'string'
       OR v_conv ->> 'id' !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'the export''s conversation has no uuid "id"'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s, key conversation.id', p_owner_id);
    END IF;
    v_id := (v_conv ->> 'id')::uuid;
    IF v_conv -> 'owner_id' IS DISTINCT FROM to_jsonb(p_owner_id) THEN
        RAISE EXCEPTION 'the export belongs to another owner'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, owner %s', v_id, p_owner_id);
    END IF;
    v_digest := convo_private.keyed_digest(encode(sha256(convert_to(p_export::text, 'UTF8')), 'hex'));

    BEGIN
        -- A repeat, recognised by the id before any other check, and read
        -- without a lock (another owner's row is never locked or waited
        -- for): the same document restored here before (its digest), or a
        -- conversation of this database that exports to exactly it, returns
        -- the id and writes nothing; anything else under that id is CV009.
        SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id;
        IF FOUND THEN
            IF v_existing.owner_id = p_owner_id
               AND (EXISTS (SELECT 1 FROM convo.imports i
                             WHERE i.conversation_id = v_id AND i.format = 'pgconvo' AND i.import_id IS NULL
                               AND i.digest = v_digest)
                    OR convo_private.export_of(v_id)::text = p_export::text) THEN
                RETURN v_id;
            END IF;
            RAISE EXCEPTION 'conversation id % is already used for a different conversation', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        IF octet_length((v_conv -> 'metadata')::text) > convo.max_metadata_bytes() THEN
            RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('conversation %s: %s bytes', v_id, octet_length((v_conv -> 'metadata')::text));
        END IF;

        -- A history this database could have written, or CV011 naming the
        -- first row that is not (restore_problem), before anything is written.
        v_problem := convo_private.restore_problem(p_owner_id, p_export, v_now);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;
        -- The tool versions its effects were checked against are this
        -- database's too: an import never adds to the allowlist (the DBA's).
        SELECT format('tool %s version %s', x.name, x.version) INTO v_problem
          FROM jsonb_array_elements(p_export -> 'tools') AS j (tool)
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tools, j.tool) AS x
          LEFT JOIN convo.tools t ON t.name = x.name AND t.version = x.version
         WHERE t.name IS NULL OR (to_jsonb(t) - 'registered_at' - 'registered_by')::text IS DISTINCT FROM j.tool::text
         LIMIT 1;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'the export''s % is not registered here with the same settings', v_problem
                USING ERRCODE = 'CV007', DETAIL = format('conversation %s, %s', v_id, v_problem),
                      HINT = 'Register the tool versions the export lists (convo.register_tool) before importing.';
        END IF;

        INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
        VALUES (v_id, p_owner_id, v_conv -> 'metadata', (v_conv ->> 'created_at')::timestamptz)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'conversation id % was taken meanwhile', v_id
                USING ERRCODE = 'CV009', DETAIL = format('conversation %s', v_id);
        END IF;
        -- The restore's record, and the document's own records of imports,
        -- kept as restored rows.
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
        VALUES (v_id, v_import, p_owner_id, 'pgconvo', NULL, v_digest);
        INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest, imported_by, imported_at, import_id)
        SELECT v_id, i.id, i.owner_id, i.format, i.source_key, i.digest, i.imported_by, i.imported_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.imports, p_export -> 'imports') i;

        -- Origins first (their foreign key to the message is deferred), then
        -- the tree through write_messages: parents first, siblings in order,
        -- with their times and the restore's record (so no ledger decision:
        -- the document's are restored below); the head does not move there,
        -- its log is the document's.
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_id, o.message_id, o.source, o.node_key, o.node
          FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins') o;
        SELECT array_agg(m.id ORDER BY m.depth, m.sibling_index), array_agg(m.parent_id ORDER BY m.depth, m.sibling_index),
               array_agg(m.role ORDER BY m.depth, m.sibling_index), array_agg(m.parts ORDER BY m.depth, m.sibling_index),
               array_agg(m.branch_reason ORDER BY m.depth, m.sibling_index),
               array_agg(m.created_at ORDER BY m.depth, m.sibling_index)
          INTO v_ids, v_parents, v_roles, v_parts, v_reasons, v_times
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m;
        PERFORM convo_private.write_messages(v_id, NULL, v_ids, v_parents, v_roles, v_parts, v_reasons, v_times,
                                             v_import, NULL, NULL, NULL);

        -- The head log, numbered here from 1 in the document's order, the
        -- head where it ends, and the live path to it.
        INSERT INTO convo.conversation_head_log
            (conversation_id, seq, head_message_id, previous_head_id, moved_at, moved_by, reason, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY l.seq), l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by,
               l.reason, l.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log') l;
        IF v_conv ->> 'head_message_id' IS NOT NULL THEN
            UPDATE convo.conversations c SET head_message_id = (v_conv ->> 'head_message_id')::uuid WHERE c.id = v_id;
            PERFORM convo_private.move_live_path(v_id, (v_conv ->> 'head_message_id')::uuid);
        END IF;

        -- Generations as they stand.
        INSERT INTO convo.generations
        SELECT r.* FROM jsonb_array_elements(p_export -> 'generations') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.generations,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;

        -- Effects as they stand (their event chains were checked above). The
        -- scope key is computed here (scope_key, this database's secret)
        -- from the creating call's input, unless erasure left none; the
        -- idempotency key is the document's, which may have been sent,
        -- except where nothing was sent (awaiting confirmation, rejected),
        -- where it is the scope key.
        INSERT INTO convo.tool_effects
        SELECT r.*
          FROM jsonb_array_elements(p_export -> 'effects') j (elem)
          LEFT JOIN (SELECT k.effect_id, k.decision,
                            convo_private.scope_key(CASE WHEN k.decision = 'rejected' THEN 'rejected' ELSE t.idempotency_scope END,
                                                    v_id, k.tool_call_id, k.fork_point_id, k.tool_name, m.parts -> k.ordinal -> 'input')
                                AS scope_key
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_calls, p_export -> 'tool_calls') k
                       JOIN jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m ON m.id = k.message_id
                       JOIN convo.tools t ON t.name = k.tool_name AND t.version = k.tool_version
                      WHERE k.decision IN ('execute', 'confirm', 'rejected')
                        AND (m.parts -> k.ordinal)::text <> convo_private.redact_part(m.parts -> k.ordinal)::text) q
            ON q.effect_id::text = j.elem ->> 'id'
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tool_effects,
              j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import,
                                           'scope_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                    || CASE WHEN j.elem ->> 'state' = 'awaiting_confirmation' OR q.decision = 'rejected'
                            THEN jsonb_build_object('idempotency_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                            ELSE '{}' END) r;

        INSERT INTO convo.tool_effect_calls
        SELECT r.* FROM jsonb_array_elements(p_export -> 'tool_calls') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_calls,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;
        -- The event log, numbered here from 1 in the document's order.
        INSERT INTO convo.tool_effect_events
            (conversation_id, seq, effect_id, from_state, to_state, actor, evidence, at, source_seq, import_id)
        SELECT v_id, row_number() OVER (ORDER BY v.seq), v.effect_id, v.from_state, v.to_state, v.actor, v.evidence, v.at,
               v.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v;

        -- The record of earlier erasures, recorded by this transaction.
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at, import_id)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        -- The ledger is one the API could have written (ledger_problems):
        -- decisions that follow from the tool versions, links within a
        -- scope, amounts from the arguments.
        SELECT p.row_name || ': ' || p.problem INTO v_problem FROM convo_private.ledger_problems(v_id) p
         ORDER BY p.row_name, p.problem LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export is not a history the API could have written: %', v_problem
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, %s', v_id, v_problem);
        END IF;

        -- What is stored exports back to the input but for what the
        -- database assigned (v_assigned; an idempotency key is kept or is
        -- the new scope key, as above) and the restore's own record: no key
        -- ignored, no value changed (a derived column, a time, a number's
        -- text).
        SELECT k INTO v_key
          FROM (SELECT convo_private.export_of(v_id) AS stored) s, unnest(v_keys) k
         WHERE (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.stored -> k) = 'array' THEN s.stored -> k END)
                       WITH ORDINALITY r (elem, n)
                 WHERE NOT (k = 'imports' AND r.elem ->> 'id' = v_import::text))::text
               IS DISTINCT FROM
               (SELECT coalesce(jsonb_agg(r.elem - v_assigned ORDER BY r.n), '[]')
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_export -> k) = 'array' THEN p_export -> k END)
                       WITH ORDINALITY r (elem, n))::text
            OR (jsonb_typeof(p_export -> k) <> 'array' AND (s.stored -> k)::text IS DISTINCT FROM (p_export -> k)::text)
         ORDER BY array_position(v_keys, k) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the export does not read back identically: its "%" differs from what it stores', v_key
                USING ERRCODE = 'CV011', DETAIL = format('conversation %s, key %s', v_id, v_key),
                      HINT = 'Import exactly what export_conversation wrote: rows with all their columns, as it spells them.';
        END IF;
    EXCEPTION
        WHEN integrity_constraint_violation OR data_exception THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_table = TABLE_NAME, v_constraint = CONSTRAINT_NAME;
            RAISE EXCEPTION 'the export is not well formed'
                USING ERRCODE = 'CV011',
                      DETAIL = format('conversation %s, SQLSTATE %s, table %s, constraint %s', v_id, v_state,
                                      coalesce(nullif(v_table, ''), 'none'), coalesce(nullif(v_constraint, ''), 'none'));
    END;

    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.import_conversation(text, jsonb) IS
    'Restores an export_conversation document for its owner (convo_admin): only a history the API could have written (CV011 otherwise), seq numbered here, recorded in convo.imports and marked on every row; a repeat returns the id, other content under the id is CV009.';

-- move_head: a branch switch: the head names any message of the conversation,
-- moved through write_messages (no new message). p_reason is free text in
-- lower snake case; 'create' and 'direct_update' are kept for the
-- database's own log rows. Moving to where the head is writes nothing.
CREATE OR REPLACE FUNCTION convo.move_head(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text DEFAULT 'switch',
    p_expected_head   uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,62}$' OR p_reason IN ('create', 'direct_update') THEN
        RAISE EXCEPTION 'invalid head-move reason %', coalesce(quote_literal(p_reason), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id),
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create and direct_update are reserved.';
    END IF;
    v_head := convo_private.lock_conversation(p_conversation_id);
    PERFORM convo_private.message_ref(p_conversation_id, p_message_id);
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                         p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. The live-path index (convo.live_path: one row per branch the
-- path runs through, kept by every head move) gives the segments, and the
-- messages of each are one index range scan of messages_branch_key (a
-- conversation never edited is one segment: one range scan, as a flat list
-- is). Sibling counts come from the few later siblings (messages_forks_idx),
-- read once into an object by parent that each row looks up (a conversation
-- never edited has none and looks nothing up): no probe and no join per
-- message, whatever the plan. CV002 for an unknown conversation; empty
-- before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_forks jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
      FROM convo.live_path s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     WHERE s.conversation_id = p_conversation_id
     ORDER BY m.depth;
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet: the path to the head of that instant (head_at),
-- which never changes, read as path_from reads it.
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, convo.head_at(p_conversation_id, p_at), p_at);
END;
$$;

COMMENT ON FUNCTION convo.path_at(uuid, timestamptz) IS
    'The path that was live at instant p_at (root to the head of that time); empty before the first head.';

-- self_check: every invariant a DBA can verify on a live database, one row
-- per check, ok or not with the offenders (the first 10) in detail. It reads
-- every row of the package once per check: run it from a maintenance job or
-- `migrate verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad text[];
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it
    -- guards; a view's trigger present and enabled (a view cannot be
    -- written in replica mode anyway: its INSERT writes nothing).
    FOR check_name, v_bad IN
        SELECT g.guards, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR (tg.tgenabled <> 'A' AND NOT (rel.relkind = 'v' AND tg.tgenabled = 'O')))
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_class rel ON rel.oid = to_regclass('convo.' || g.table_name)
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name AND tg.tgrelid = rel.oid
         GROUP BY g.guards
    LOOP
        check_name := CASE check_name WHEN 'append_only' THEN 'append_only_triggers'
                                      WHEN 'head_log' THEN 'head_log_trigger' ELSE 'rule_triggers' END;
        ok := v_bad IS NULL;
        detail := coalesce(array_to_string(v_bad[1:10], '; '), 'all present, enabled always');
        RETURN NEXT;
    END LOOP;

    -- No trigger of anyone else's on the package's tables: with TRIGGER
    -- privilege a role could rewrite rows on their way in.
    SELECT array_agg(c.relname || '.' || tg.tgname ORDER BY c.relname, tg.tgname) INTO v_bad
      FROM pg_trigger tg
      JOIN pg_class c ON c.oid = tg.tgrelid
     WHERE c.relnamespace = 'convo'::regnamespace AND NOT tg.tgisinternal
       AND NOT EXISTS (SELECT 1 FROM convo_private.package_triggers() g
                        WHERE g.table_name = c.relname AND g.trigger_name = tg.tgname);
    RETURN QUERY SELECT 'no_foreign_triggers', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'none');

    -- Every head equals its last head-log row, and each log row starts where
    -- the one before it ended.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ' head ' || coalesce(c.head_message_id::text, 'none')
               || ', last logged ' || coalesce(last.head_message_id::text, 'none') AS id
          FROM convo.conversations c
          LEFT JOIN LATERAL (SELECT l.head_message_id FROM convo.conversation_head_log l
                              WHERE l.conversation_id = c.id ORDER BY l.seq DESC LIMIT 1) last ON true
         WHERE c.head_message_id IS DISTINCT FROM last.head_message_id
        UNION ALL
        SELECT 'conversation ' || l.conversation_id || ' log seq ' || l.seq || ' does not start where '
               || coalesce('seq ' || l.prev_seq || ' ended', 'the conversation began')
          FROM (SELECT l.*, lag(l.head_message_id) OVER w AS prev_head, lag(l.seq) OVER w AS prev_seq
                  FROM convo.conversation_head_log l
                WINDOW w AS (PARTITION BY l.conversation_id ORDER BY l.seq)) l
         WHERE l.previous_head_id IS DISTINCT FROM l.prev_head) x;
    RETURN QUERY SELECT 'heads_match_log', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every head is its last logged move');

    -- The live-path index (convo.live_path, what path reads) holds exactly
    -- the segments of the path from the root to each head (each branch it
    -- runs through, from where the branch starts to the deepest of it on
    -- the path), walked from the tree here. Repair:
    -- convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM (SELECT s.branch_id, b.depth AS min_depth, s.max_depth
                         FROM convo_private.path_segments(c.id, c.head_message_id) s
                         JOIN convo.messages b ON b.conversation_id = c.id AND b.id = s.branch_id) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.branch_id = p.branch_id
                WHERE (p.min_depth, p.max_depth) IS DISTINCT FROM (l.min_depth, l.max_depth)) d
         WHERE d.n > 0
        UNION ALL
        SELECT 'live_path rows of conversation ' || l.conversation_id || ', which does not exist'
          FROM convo.live_path l
         WHERE NOT EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = l.conversation_id)
         GROUP BY l.conversation_id) x;
    RETURN QUERY SELECT 'live_path_index', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every live path is its head''s path');

    -- Every effect was created by exactly one call (execute, confirm or
    -- rejected) and every link names a tool_use of the effect's tool.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' has ' || count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse')
               || ' creating calls' AS id
          FROM convo.tool_effects e
          LEFT JOIN convo.tool_effect_calls l ON l.conversation_id = e.conversation_id AND l.effect_id = e.id
         GROUP BY e.conversation_id, e.id
        HAVING count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse') <> 1
        UNION ALL
        SELECT 'call ' || l.tool_call_id || ' of conversation ' || l.conversation_id || ' links a part that is not its tool_use'
          FROM convo.tool_effect_calls l
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
         WHERE p.type <> 'tool_use' OR p.tool_call_id <> l.tool_call_id
            OR (e.id IS NOT NULL AND e.tool_name <> p.tool_name)) x;
    RETURN QUERY SELECT 'effects_linked', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every effect and link is consistent');

    -- Every ledger row is one the API could have written (ledger_problems):
    -- decisions that follow from the tool version, links within a scope,
    -- effects that their creating call explains. Written by hand past the
    -- API (a superuser, an import of old), a row shows here.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'conversation ' || p.conversation_id || ', ' || p.row_name || ': ' || p.problem AS d
          FROM convo_private.ledger_problems(NULL) p) x;
    RETURN QUERY SELECT 'ledger_as_written', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every decision, link and effect is one the API writes');

    -- Every effect's events form one chain from 'requested' to its state, and
    -- every CHECK that ties a state to its columns is in force (validated).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' is ' || e.state || ', its events end at '
               || coalesce(last.to_state, 'nothing') AS id
          FROM convo.tool_effects e
          LEFT JOIN LATERAL (SELECT ev.to_state FROM convo.tool_effect_events ev
                              WHERE ev.conversation_id = e.conversation_id AND ev.effect_id = e.id
                              ORDER BY ev.seq DESC LIMIT 1) last ON true
         WHERE last.to_state IS DISTINCT FROM e.state
        UNION ALL
        SELECT 'effect ' || ev.effect_id || ' event ' || ev.seq || ' starts from ' || ev.from_state
          FROM (SELECT ev.*, lag(ev.to_state, 1, 'requested') OVER (PARTITION BY ev.conversation_id, ev.effect_id
                                                                   ORDER BY ev.seq) AS prev_state
                  FROM convo.tool_effect_events ev) ev
         WHERE ev.from_state <> ev.prev_state
        UNION ALL
        SELECT 'constraint ' || con.conname || ' is not validated'
          FROM pg_constraint con
         WHERE con.connamespace = 'convo'::regnamespace AND NOT con.convalidated) x;
    RETURN QUERY SELECT 'effect_states_consistent', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every state matches its event chain');

    -- Row-level security on every owner-scoped table. It is enabled, not
    -- forced: the API functions run as the owner role and check the owner
    -- once per call (sees_owner, writes_owner), which keeps the path at the
    -- cost of a flat read; any other role is bound by the policies.
    SELECT array_agg(t.name ORDER BY t.name) INTO v_bad
      FROM unnest(ARRAY['conversations', 'messages', 'keyed_parts', 'conversation_head_log', 'generations',
                        'tool_effects', 'tool_effect_calls', 'tool_effect_events', 'tool_receipts',
                        'erasures', 'erasure_places', 'live_path',
                        'import_origins', 'imports']) AS t (name)
      LEFT JOIN pg_class c ON c.oid = to_regclass('convo.' || t.name)
     WHERE c.relrowsecurity IS NOT TRUE;
    RETURN QUERY SELECT 'row_level_security', v_bad IS NULL,
                        coalesce('not enabled on ' || array_to_string(v_bad, ', '),
                                 'enabled on every owner-scoped table');

    -- Privileges exactly as documented: nothing for PUBLIC, nothing on a table
    -- for convo_app, nothing at all on convo_private.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        (SELECT 'extra: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee AS d
           FROM (SELECT * FROM convo_private.granted_privileges()
                 EXCEPT SELECT * FROM convo_private.documented_grants()) g)
        UNION ALL
        (SELECT 'missing: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee
           FROM (SELECT * FROM convo_private.documented_grants()
                 EXCEPT SELECT * FROM convo_private.granted_privileges()) g)) x;
    RETURN QUERY SELECT 'privileges', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'exactly as documented');

    -- Every object belongs to convo_owner, which cannot log in, is no
    -- superuser, and has no member that can (read from pg_auth_members, not
    -- pg_has_role, which fails on a role dropped while the query runs).
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'schema ' || n.nspname || ' owned by ' || pg_get_userbyid(n.nspowner) AS d
          FROM pg_namespace n
         WHERE n.nspname IN ('convo', 'convo_private') AND pg_get_userbyid(n.nspowner) <> 'convo_owner'
        UNION ALL
        SELECT 'relation ' || c.oid::regclass || ' owned by ' || pg_get_userbyid(c.relowner)
          FROM pg_class c
         WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(c.relowner) <> 'convo_owner'
        UNION ALL
        SELECT 'function ' || p.oid::regprocedure || ' owned by ' || pg_get_userbyid(p.proowner)
          FROM pg_proc p
         WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(p.proowner) <> 'convo_owner'
        UNION ALL
        SELECT 'role convo_owner can log in or is a superuser'
          FROM pg_roles r WHERE r.rolname = 'convo_owner' AND (r.rolcanlogin OR r.rolsuper)
        UNION ALL
        SELECT 'login role ' || r.rolname || ' is a member of convo_owner'
          FROM (WITH RECURSIVE members (oid) AS (
                    SELECT m.member FROM pg_auth_members m WHERE m.roleid = 'convo_owner'::regrole
                    UNION
                    SELECT m.member FROM pg_auth_members m JOIN members ON m.roleid = members.oid)
                SELECT members.oid FROM members) mm
          JOIN pg_roles r ON r.oid = mm.oid
         WHERE r.rolcanlogin AND NOT r.rolsuper) x;
    RETURN QUERY SELECT 'ownership', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every object owned by convo_owner, which no login role can become');
END;
$$;

COMMENT ON FUNCTION convo.self_check() IS
    'Every invariant a DBA can verify on a live database: one row per check, ok, and the offenders in detail.';

-- settle_effect: records the outside service's answer: pending to applied
-- (with its external reference) or failed (with an error code). An exact
-- repeat is a no-op; anything else on a settled effect raises CV006.
CREATE OR REPLACE FUNCTION convo.settle_effect(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_state           text,
    p_external_ref    text DEFAULT NULL,
    p_http_status     int DEFAULT NULL,
    p_error_code      text DEFAULT NULL,
    p_evidence        jsonb DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_now    timestamptz;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    v_effect := convo_private.effect_ref(p_conversation_id, p_effect_id);
    IF p_state IS NULL OR p_state NOT IN ('applied', 'failed') THEN
        RAISE EXCEPTION 'an effect settles as applied or failed, not %', coalesce(quote_literal(p_state), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'applied' AND (p_external_ref IS NULL OR p_external_ref = '' OR p_error_code IS NOT NULL) THEN
        RAISE EXCEPTION 'an applied effect needs p_external_ref and no error code'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_state = 'failed' AND (p_error_code IS NULL OR p_error_code = '' OR p_external_ref IS NOT NULL) THEN
        RAISE EXCEPTION 'a failed effect needs p_error_code and no external reference (put it in p_evidence)'
            USING ERRCODE = 'CV011', DETAIL = format('effect %s', p_effect_id);
    END IF;
    IF p_http_status IS NOT NULL AND p_http_status NOT BETWEEN 100 AND 599 THEN
        RAISE EXCEPTION 'p_http_status % is not an HTTP status', p_http_status
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF p_evidence IS NULL THEN
        RAISE EXCEPTION 'p_evidence is required (''{}'' for none)'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, effect %s', p_conversation_id, p_effect_id);
    END IF;
    IF length(p_external_ref) > convo.max_ref_length() OR length(p_error_code) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'an external reference or error code is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('effect %s', p_effect_id);
    END IF;
    PERFORM convo_private.check_size('evidence', p_evidence, convo.max_detail_bytes());

    -- An exact repeat of a settlement is a no-op, also after the effect moved
    -- on (applied, then compensated: the settlement's columns stay as they
    -- were). A rejection or a decline was no settlement: settling one is CV006.
    IF (v_effect.state = p_state OR (p_state = 'applied' AND v_effect.state = 'compensated'))
       AND v_effect.external_ref IS NOT DISTINCT FROM p_external_ref
       AND v_effect.http_status IS NOT DISTINCT FROM p_http_status
       AND v_effect.error_code IS NOT DISTINCT FROM p_error_code
       AND EXISTS (SELECT 1 FROM convo.tool_effect_events ev
                    WHERE ev.conversation_id = p_conversation_id AND ev.effect_id = p_effect_id
                      AND ev.from_state = 'pending' AND ev.to_state = p_state) THEN
        RETURN;
    END IF;
    IF v_effect.state <> 'pending' THEN
        RAISE EXCEPTION 'effect % is %: only a pending effect settles', p_effect_id, v_effect.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s, asked %s', p_effect_id, v_effect.state, p_state);
    END IF;
    v_now := clock_timestamp();
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = v_now
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.effect_event(p_conversation_id, p_effect_id, 'pending', p_state, convo_private.caller(), p_evidence);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- add_sibling: what edit_and_resend and regenerate share: a new message
-- beside an existing one (same parent), the head moved to it, through
-- write_messages. No existing row changes; the old subtree simply stops
-- being on the path.
CREATE OR REPLACE FUNCTION convo_private.add_sibling(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid,
    p_new_message_id  uuid,
    p_moved_by        text,
    p_role            text,
    p_branch_reason   text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head     uuid := convo_private.lock_conversation(p_conversation_id);
    v_original convo.messages := convo_private.message_ref(p_conversation_id, p_message_id);
    v_id       uuid := coalesce(p_new_message_id, gen_random_uuid());
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id);
    END IF;
    IF p_new_message_id IS NOT NULL
       AND convo_private.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head, ARRAY[v_id], ARRAY[v_original.parent_id],
                                         ARRAY[p_role], ARRAY[p_parts], ARRAY[p_branch_reason], NULL, NULL,
                                         v_id, p_branch_reason, p_moved_by);
    RETURN v_id;
END;
$$;

-- conversations_guard: of a conversation only the head may change, and its
-- metadata only by erasure (pgconvo's erase_content): its id, owner and
-- creation time are fixed, and a head once set is never unset (the head
-- always names a message). It runs for every UPDATE that changes a fixed
-- column or unsets the head, and for every UPDATE outside pgconvo's code
-- (not the owner role, or the owner role only because a session SET ROLE
-- to it: pgconvo's SECURITY DEFINER functions run as the owner role with the
-- caller's role setting).
CREATE OR REPLACE FUNCTION convo_private.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    IF (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
       AND NEW.metadata::text IS DISTINCT FROM OLD.metadata::text THEN
        RAISE EXCEPTION 'convo.conversations is append-only: its metadata changes only by erasure'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation or convo.erase_owner.';
    END IF;
    RETURN NEW;
END;
$$;

-- effect_event: one transition of an effect, in the transaction that made
-- it: its row of tool_effect_events (seq numbered per conversation, under
-- the conversation's lock; the actor and evidence the caller names) and
-- the convo_effect notification (unless convo.notify is off; the payload
-- holds ids, seq and states only, never arguments, evidence, references,
-- error codes or the actor: LISTEN is not owner-scoped). Every transition
-- pgconvo makes writes it (record_tool_call for a new effect, settle,
-- compensate, confirm, decline), and tool_effects_log_direct for one made
-- outside the API, by the caller.
CREATE OR REPLACE FUNCTION convo_private.effect_event(
    p_conversation_id uuid,
    p_effect_id       uuid,
    p_from            text,
    p_to              text,
    p_actor           text,
    p_evidence        jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq bigint;
BEGIN
    v_seq := coalesce((SELECT v.seq FROM convo.tool_effect_events v
                        WHERE v.conversation_id = p_conversation_id ORDER BY v.seq DESC LIMIT 1), 0) + 1;
    INSERT INTO convo.tool_effect_events (conversation_id, seq, effect_id, from_state, to_state, actor, evidence)
    VALUES (p_conversation_id, v_seq, p_effect_id, p_from, p_to, p_actor, p_evidence);
    IF current_setting('convo.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'effect', 'conversation_id', p_conversation_id, 'effect_id', p_effect_id,
            'seq', v_seq, 'from_state', p_from, 'state', p_to)::text);
    END IF;
END;
$$;

-- erase_content: one erasure, recorded first in convo.erasures, then
-- written: every row of the conversation that holds content becomes its
-- redact_row, or, with no conversation, every receipt of the owner. It is
-- the one piece of pgconvo that updates content: the tables refuse every
-- UPDATE of content from outside pgconvo's code. Rows already redacted are left alone, so a repeat changes
-- nothing and returns no rows, but is recorded. One row per place (table)
-- where rows changed, also recorded in convo.erasure_places.
CREATE OR REPLACE FUNCTION convo_private.erase_content(p_owner_id text, p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_erasure uuid := gen_random_uuid();
    v_place   record;
    v_n       bigint;
BEGIN
    INSERT INTO convo.erasures (owner_id, id, conversation_id, reason)
    VALUES (p_owner_id, v_erasure, p_conversation_id, p_reason);

    -- Each place: its table, the columns redact_row changes, and the key
    -- that selects the conversation's (or the owner's) rows.
    FOR v_place IN
        SELECT * FROM (VALUES
            ('messages', 'parts', 'conversation_id'),
            ('conversations', 'metadata', 'id'),
            ('generations', 'params, request_digest, usage, error', 'conversation_id'),
            ('tool_effects', 'arguments', 'conversation_id'),
            ('tool_effect_events', 'evidence', 'conversation_id'),
            ('import_origins', 'node', 'conversation_id'),
            ('imports', 'source_key, digest', 'conversation_id'),
            ('tool_receipts', 'request, arguments, expected', 'owner_id')) AS p (tab, cols, key)
         WHERE (p.tab = 'tool_receipts') = (p_conversation_id IS NULL)
    LOOP
        EXECUTE format('UPDATE convo.%1$I t SET (%2$s) = (SELECT %2$s FROM jsonb_populate_record(NULL::convo.%1$I,
                            convo_private.redact_row(%1$L, to_jsonb(t))))
                         WHERE t.%3$I = $1::%4$s AND to_jsonb(t)::text <> convo_private.redact_row(%1$L, to_jsonb(t))::text',
                       v_place.tab, v_place.cols, v_place.key,
                       CASE WHEN p_conversation_id IS NULL THEN 'text' ELSE 'uuid' END)
        USING CASE WHEN p_conversation_id IS NULL THEN p_owner_id ELSE p_conversation_id::text END;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
            VALUES (p_owner_id, v_erasure, v_place.tab, v_n);
            place := v_place.tab;
            rows_redacted := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;

-- export_of: the export document of one conversation (format pgconvo.export,
-- version 2; every key is described in the README and on
-- convo.export_conversation), without an owner check: export_conversation
-- checks the reader, import_conversation compares an import with what it
-- stored. Every row is the table's own row as jsonb, without the
-- conversation id it repeats, in a fixed order, and times print in UTC, so
-- the same rows give the same text in any session and any database.
-- PL/pgSQL, as every function over the tables (a distributed engine runs
-- its statements where the rows are). The
-- tools are the versions the ledger's calls and effects were checked
-- against; the imports are the conversation's record of imports.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'format', 'pgconvo.export',
        'version', 2,
        'conversation', to_jsonb(c),
        'messages', coalesce((SELECT jsonb_agg(to_jsonb(m) - 'conversation_id' ORDER BY m.depth, m.parent_id, m.sibling_index)
                                FROM convo.messages m WHERE m.conversation_id = c.id), '[]'),
        'head_log', coalesce((SELECT jsonb_agg(to_jsonb(l) - 'conversation_id' ORDER BY l.seq)
                                FROM convo.conversation_head_log l WHERE l.conversation_id = c.id), '[]'),
        'generations', coalesce((SELECT jsonb_agg(to_jsonb(g) - 'conversation_id' ORDER BY g.started_at, g.id)
                                   FROM convo.generations g WHERE g.conversation_id = c.id), '[]'),
        'tools', coalesce((SELECT jsonb_agg(to_jsonb(t) - 'registered_at' - 'registered_by' ORDER BY t.name, t.version)
                             FROM convo.tools t
                            WHERE (t.name, t.version) IN (SELECT e.tool_name, e.tool_version FROM convo.tool_effects e
                                                           WHERE e.conversation_id = c.id
                                                          UNION
                                                          SELECT k.tool_name, k.tool_version FROM convo.tool_effect_calls k
                                                           WHERE k.conversation_id = c.id)), '[]'),
        'tool_calls', coalesce((SELECT jsonb_agg(to_jsonb(k) - 'conversation_id' ORDER BY k.decided_at, k.tool_call_id)
                                  FROM convo.tool_effect_calls k WHERE k.conversation_id = c.id), '[]'),
        'effects', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'conversation_id' ORDER BY e.requested_at, e.id)
                               FROM convo.tool_effects e WHERE e.conversation_id = c.id), '[]'),
        'effect_events', coalesce((SELECT jsonb_agg(to_jsonb(v) - 'conversation_id' ORDER BY v.seq)
                                     FROM convo.tool_effect_events v WHERE v.conversation_id = c.id), '[]'),
        'erasures', coalesce((SELECT jsonb_agg(to_jsonb(r) - 'conversation_id'
                                               || jsonb_build_object('places', coalesce(
                                                      (SELECT jsonb_agg(jsonb_build_object('place', p.place, 'rows_redacted', p.rows_redacted)
                                                                        ORDER BY p.place)
                                                         FROM convo.erasure_places p
                                                        WHERE p.owner_id = r.owner_id AND p.erasure_id = r.id), '[]'))
                                               ORDER BY r.erased_at, r.id)
                                FROM convo.erasures r WHERE r.conversation_id = c.id), '[]'),
        -- Import origins: the source node of each message that came from
        -- another product (import_chatgpt, import_openwebui), by message.
        'origins', coalesce((SELECT jsonb_agg(to_jsonb(o) - 'conversation_id' ORDER BY o.message_id)
                               FROM convo.import_origins o WHERE o.conversation_id = c.id), '[]'),
        'imports', coalesce((SELECT jsonb_agg(to_jsonb(i) - 'conversation_id' ORDER BY i.imported_at, i.id)
                               FROM convo.imports i WHERE i.conversation_id = c.id), '[]'))
      FROM convo.conversations c
     WHERE c.id = p_conversation_id);
END;
$$;

-- fork_point_of: the fork point of a tool call's message: the parent of the
-- nearest person's turn at or above it (a user message with a part other
-- than tool_result: messages that only carry tool results belong to the
-- agent loop). NULL stands for the conversation itself: that turn has no
-- parent, or there is no such turn. A walk up that stops at that turn, so
-- it costs the length of the agent's turn, not the depth of the conversation.
CREATE OR REPLACE FUNCTION convo_private.fork_point_of(p_conversation_id uuid, p_message_id uuid)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id     uuid := p_message_id;
    v_parent uuid;
    v_role   text;
    v_parts  jsonb;
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.parent_id, m.role, m.parts INTO v_parent, v_role, v_parts
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF v_role = 'user' AND EXISTS (SELECT 1 FROM jsonb_array_elements(v_parts) e (part)
                                        WHERE e.part ->> 'type' IS DISTINCT FROM 'tool_result') THEN
            RETURN v_parent;
        END IF;
        v_id := v_parent;
    END LOOP;
    RETURN NULL;
END;
$$;

-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation never
-- changes; its identity (prompt, model, params, digest, start) never changes
-- at all, and its answer is an assistant child of its prompt. CV006. It
-- guards every write outside pgconvo's code (whose entries, and erasure,
-- write only such rows).
CREATE OR REPLACE FUNCTION convo_private.generations_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'streaming' THEN
            RAISE EXCEPTION 'a generation starts streaming, not %', NEW.state
                USING ERRCODE = 'CV006', DETAIL = format('generation %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.conversation_id, NEW.id, NEW.prompt_message_id, NEW.head_at_begin, NEW.model, NEW.params::text,
        NEW.request_digest, NEW.started_at)
       IS DISTINCT FROM
       (OLD.conversation_id, OLD.id, OLD.prompt_message_id, OLD.head_at_begin, OLD.model, OLD.params::text,
        OLD.request_digest, OLD.started_at) THEN
        RAISE EXCEPTION 'a generation''s prompt, model, params, digest and start never change'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id);
    END IF;
    IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text AND NOT (OLD.state = 'streaming' AND NEW.state IN ('completed', 'failed', 'cancelled')) THEN
        RAISE EXCEPTION 'a generation cannot go from % to %', OLD.state, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id),
                  HINT = 'A generation goes from streaming to completed, failed or cancelled, once.';
    END IF;
    IF NEW.state = 'completed' AND OLD.state = 'streaming'
       AND NOT EXISTS (SELECT 1 FROM convo.messages m
                        WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id
                          AND m.parent_id = NEW.prompt_message_id AND m.role = 'assistant') THEN
        RAISE EXCEPTION 'a completed generation''s message is an assistant answer to its prompt'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, message %s, prompt %s', OLD.id, NEW.message_id, OLD.prompt_message_id);
    END IF;
    RETURN NEW;
END;
$$;

-- import_tree: the shared second half of import_chatgpt, import_openwebui
-- and import_librechat, once the source is checked: the tree (import-mapping.md §4.3-§4.6, §4.10,
-- §4.12) written as one new conversation. Imported messages are the nodes
-- whose message is an object; each hangs under its nearest imported
-- ancestor (import_walk) with its original time; siblings are inserted in
-- the order (time, position in the source parent's children, key bytewise),
-- which is their sibling_index, with branch reasons by role; the head is
-- the nearest imported node at or above p_current, else the latest leaf;
-- each message's source node is kept in import_origins. Caps are checked
-- first (CV010 naming the node); no ledger row, receipt or generation is
-- written. The import is recorded in convo.imports (owner, format, source
-- key, keyed digest, who, when), and every row it writes, the head-log row
-- 'import' included, names that record (import_id). Every step is a pass
-- or a hash join over the nodes: linear.
CREATE OR REPLACE FUNCTION convo_private.import_tree(
    p_conversation_id uuid,
    p_owner_id        text,
    p_source          text,
    p_source_key      text,
    p_digest          text,
    p_mapping         jsonb,
    p_current         text,
    p_conv_time       timestamptz,
    p_metadata        jsonb,
    p_where           text)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_import     uuid := gen_random_uuid();
    v_existing   uuid;
    v_keys       text[];
    v_parent     int[];
    v_imported   boolean[];
    v_time       timestamptz[];
    v_dropped    jsonb;
    v_imp        int[];
    v_depth      int[];
    v_at         timestamptz[];
    -- the messages, in insertion order
    m_idx        int[];
    m_imp        int[];
    m_key        text[];
    m_id         uuid[];
    m_parent     uuid[];
    m_role       text[];
    m_reason     text[];
    m_parts      jsonb[];
    m_at         timestamptz[];
    m_node       jsonb[];
    v_mismatches bigint;
    v_i          int;
    v_head_idx   int;
    v_head       uuid;
    v_fallback   text;
    v_bad        record;
    v_metadata   jsonb;
BEGIN
    -- The nodes as arrays in key order, each parent as an index (0: none).
    WITH n AS MATERIALIZED (SELECT * FROM convo_private.import_nodes(p_source, p_mapping))
    SELECT coalesce(array_agg(n.key ORDER BY n.idx), '{}'),
           coalesce(array_agg(coalesce(p.idx, 0) ORDER BY n.idx), '{}'),
           coalesce(array_agg(jsonb_typeof(n.message) IS NOT DISTINCT FROM 'object' ORDER BY n.idx), '{}'),
           coalesce(array_agg(n.at ORDER BY n.idx), '{}'),
           coalesce(jsonb_object_agg(n.key, n.node) FILTER (WHERE jsonb_typeof(n.message) IS DISTINCT FROM 'object'), '{}')
      INTO v_keys, v_parent, v_imported, v_time, v_dropped
      FROM n LEFT JOIN n p ON p.key = n.parent_key;

    SELECT * INTO v_imp, v_depth, v_at
      FROM convo_private.import_walk(v_keys, v_parent, v_imported, v_time, coalesce(p_conv_time, v_now), p_where);

    -- The messages: role and parts (given the imported parent), sibling
    -- order and branch reason; and the children lists' disagreements.
    WITH n AS MATERIALIZED (
        SELECT n.*, x.imp, x.depth, x.at AS created_at
          FROM convo_private.import_nodes(p_source, p_mapping) n
          JOIN unnest(v_imp, v_depth, v_at) WITH ORDINALITY AS x (imp, depth, at, idx) ON x.idx = n.idx
    ), listed AS MATERIALIZED (
        SELECT n.key AS parent_key, c.child, min(c.ord) AS ord
          FROM n, jsonb_array_elements_text(CASE WHEN jsonb_typeof(n.children) = 'array' THEN n.children ELSE '[]' END)
                  WITH ORDINALITY AS c (child, ord)
         GROUP BY n.key, c.child
    ), m AS MATERIALIZED (
        SELECT n.idx, n.imp, n.key, n.node, n.depth, n.created_at, l.ord, p.key AS imp_parent_key,
               CASE p_source WHEN 'chatgpt' THEN convo_private.chatgpt_message(n.key, n.message, p.key, p.message)
                             WHEN 'librechat' THEN convo_private.librechat_message(n.message)
                             ELSE convo_private.openwebui_message(n.message) END AS rp
          FROM n
          LEFT JOIN n p ON p.idx = n.imp
          LEFT JOIN listed l ON l.parent_key = n.parent_key AND l.child = n.key
         WHERE jsonb_typeof(n.message) = 'object'
    ), o AS (
        SELECT m.*, m.rp ->> 'role' AS role, row_number() OVER s AS sib, first_value(m.rp ->> 'role') OVER s AS first_role
          FROM m
        WINDOW s AS (PARTITION BY m.imp ORDER BY m.created_at, m.ord NULLS LAST, m.key COLLATE "C")
    )
    SELECT array_agg(o.idx ORDER BY o.depth, o.imp, o.sib), array_agg(o.imp ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.key ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(md5(p_conversation_id::text || ':' || o.imp_parent_key)::uuid ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.role ORDER BY o.depth, o.imp, o.sib),
           array_agg(CASE WHEN o.sib = 1 THEN NULL
                          WHEN o.role = 'user' AND o.first_role = 'user' THEN 'user_edit'
                          WHEN o.role = 'assistant' AND o.first_role = 'assistant' THEN 'regenerate'
                          ELSE 'branch' END ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.rp -> 'parts' ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.created_at ORDER BY o.depth, o.imp, o.sib),
           array_agg(o.node ORDER BY o.depth, o.imp, o.sib),
           -- (A LibreChat message whose children were not read, every one of
           -- a flat export, lists nothing to disagree with.)
           (SELECT count(*)
              FROM (SELECT c.parent_key, c.key FROM n c JOIN n p ON p.key = c.parent_key
                     WHERE p_source <> 'librechat' OR p.children IS NOT NULL) a
              FULL JOIN listed b ON b.parent_key = a.parent_key AND b.child = a.key
             WHERE a.key IS NULL OR b.child IS NULL)
      INTO m_idx, m_imp, m_key, m_id, m_parent, m_role, m_reason, m_parts, m_at, m_node, v_mismatches
      FROM o;

    -- Caps, before anything is written: CV010 naming the first node over one.
    SELECT x.key, x.why INTO v_bad
      FROM (SELECT x.key, CASE
                   WHEN octet_length(x.parts::text) > convo.max_message_bytes()
                       THEN format('a message of %s bytes (max_message_bytes %s)', octet_length(x.parts::text), convo.max_message_bytes())
                   WHEN octet_length(x.node::text) > convo.max_message_bytes()
                       THEN format('a source node of %s bytes (max_message_bytes %s)', octet_length(x.node::text), convo.max_message_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE octet_length(p.part::text) > convo.max_part_bytes())
                       THEN format('a part over max_part_bytes %s', convo.max_part_bytes())
                   WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(x.parts) p (part)
                                 WHERE p.part ->> 'type' = 'tool_use'
                                   AND octet_length((p.part -> 'input')::text) > convo.max_tool_input_bytes())
                       THEN format('a tool input over max_tool_input_bytes %s', convo.max_tool_input_bytes())
                   WHEN length(x.key) > convo_private.max_id_length() AND x.parts -> 0 ->> 'type' = 'tool_use'
                       THEN format('a tool call id (the node key) of %s characters (at most %s)', length(x.key), convo_private.max_id_length())
                   END AS why
              FROM unnest(m_key, m_parts, m_node) AS x (key, parts, node)) x
     WHERE x.why IS NOT NULL
     ORDER BY x.key COLLATE "C"
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the import is over a size cap at node %', v_bad.key
            USING ERRCODE = 'CV010', DETAIL = format('%s, node %s: %s', p_where, v_bad.key, v_bad.why);
    END IF;

    -- The head: the nearest imported node at or above p_current, else the latest leaf.
    IF p_current IS NOT NULL THEN
        v_i := array_position(v_keys, p_current);
        v_head_idx := CASE WHEN v_imported[v_i] THEN v_i ELSE nullif(v_imp[v_i], 0) END;
    END IF;
    IF v_head_idx IS NOT NULL THEN
        v_head := md5(p_conversation_id::text || ':' || v_keys[v_head_idx])::uuid;
    ELSE
        SELECT x.id INTO v_head
          FROM unnest(m_id, m_idx, m_at, m_key) AS x (id, idx, at, key)
         WHERE NOT EXISTS (SELECT 1 FROM unnest(m_imp) AS c (imp) WHERE c.imp = x.idx)
         ORDER BY x.at DESC, x.key COLLATE "C" DESC
         LIMIT 1;
        v_fallback := CASE WHEN v_head IS NOT NULL THEN 'latest_leaf' END;
    END IF;

    v_metadata := jsonb_build_object('import', p_metadata || jsonb_build_object(
        'dropped_nodes', v_dropped, 'children_mismatches', v_mismatches, 'head_fallback', v_fallback));
    IF octet_length(v_metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'the import''s conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: metadata of %s bytes', p_where, octet_length(v_metadata::text));
    END IF;

    INSERT INTO convo.conversations (id, owner_id, metadata, created_at)
    VALUES (p_conversation_id, p_owner_id, v_metadata,
            coalesce(p_conv_time, (SELECT min(a) FROM unnest(m_at) AS a), v_now))
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same import committed by another session meanwhile (a repeat,
        -- or CV009), or an earlier import of this source that erasure has
        -- left without its source key.
        v_existing := convo_private.import_repeat(p_owner_id, p_source, p_source_key, p_digest, p_where);
        IF v_existing IS NOT NULL THEN
            RETURN v_existing;
        END IF;
        RAISE EXCEPTION 'conversation % was imported before from this source and erased', p_conversation_id
            USING ERRCODE = 'CV009', DETAIL = p_where,
                  HINT = 'An erased import is not imported again under its id; import it under another owner.';
    END IF;
    INSERT INTO convo.imports (conversation_id, id, owner_id, format, source_key, digest)
    VALUES (p_conversation_id, v_import, p_owner_id, p_source, p_source_key, p_digest);

    -- Origins (their foreign key is deferred), then the messages through
    -- write_messages, parents before children, siblings in order, with
    -- their original times and the import's record (so no ledger row),
    -- and the head's one move, 'import'.
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    PERFORM convo_private.write_messages(p_conversation_id, NULL, m_id, m_parent, m_role, m_parts, m_reason, m_at,
                                         v_import, v_head, 'import', NULL);
    RETURN p_conversation_id;
END;
$$;

-- keyed_parts_guard: a keyed part inserted outside pgconvo's code must be
-- its message's part at that ordinal, of a type addressed by key (tool_use,
-- tool_result, attachment), with its type, call id and tool name as the
-- part says; it computes nothing (CV008 otherwise).
CREATE OR REPLACE FUNCTION convo_private.keyed_parts_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_part jsonb;
BEGIN
    SELECT m.parts -> NEW.ordinal INTO v_part
      FROM convo.messages m WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id;
    IF v_part IS NULL OR v_part ->> 'type' NOT IN ('tool_use', 'tool_result', 'attachment')
       OR NEW.type IS DISTINCT FROM v_part ->> 'type'
       OR NEW.tool_call_id IS DISTINCT FROM (CASE v_part ->> 'type' WHEN 'tool_use' THEN v_part ->> 'id'
                                                                   WHEN 'tool_result' THEN v_part ->> 'tool_use_id' END)
       OR NEW.tool_name IS DISTINCT FROM (CASE WHEN v_part ->> 'type' = 'tool_use' THEN v_part ->> 'name' END) THEN
        RAISE EXCEPTION 'a keyed part must be its message''s part at that ordinal'
            USING ERRCODE = 'CV008',
                  DETAIL = format('conversation %s, message %s, ordinal %s', NEW.conversation_id, NEW.message_id, NEW.ordinal);
    END IF;
    RETURN NEW;
END;
$$;

-- ledger_problems: every ledger row of one conversation (NULL: of every
-- conversation) that the API could not have written, one row each, naming
-- the row and what is wrong with it:
--   a call's decision that does not follow from the tool version it was
--   checked against (replay for an effectful tool, a ledger decision for one
--   without effects), or that names another tool than its tool_use part;
--   a fork point that is not the call's (fork_point_of);
--   a reuse whose effect's scope key is not the one the call would compute
--   (a link across scopes);
--   an effect its creating call does not explain: another tool version, a
--   first state the decision does not give, a rejection without its 422, a
--   re-run that repeats no earlier call of the same tool and fork point on
--   another branch, arguments other than the call's input, an amount or
--   currency other than the registration reads from them (effect_money), a
--   scope key other than scope_key computes, a verdict of the schema other
--   than args_errors gives.
-- Content erased since (a part that is exactly its redaction) is not
-- compared: only its shape is left. self_check reports these for the whole
-- database, so a forgery by a superuser's hand is found too;
-- import_conversation refuses a document that leaves any (CV011).
CREATE OR REPLACE FUNCTION convo_private.ledger_problems(p_conversation_id uuid)
RETURNS TABLE (conversation_id uuid, row_name text, problem text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH calls AS MATERIALIZED (
        SELECT l.conversation_id, l.tool_call_id, l.message_id, l.effect_id, l.decision, l.fork_point_id,
               l.tool_name, l.tool_version, p.tool_name AS part_tool, m.parts -> l.ordinal -> 'input' AS input,
               (m.parts -> l.ordinal)::text = convo_private.redact_part(m.parts -> l.ordinal)::text AS erased,
               t.effectful, t.idempotency_scope AS scope
          FROM convo.tool_effect_calls l
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN convo.tools t ON t.name = l.tool_name AND t.version = l.tool_version
         WHERE p_conversation_id IS NULL OR l.conversation_id = p_conversation_id),
    effects AS MATERIALIZED (
        SELECT e.conversation_id, e.id, e.tool_name, e.tool_version, e.idempotency_key, e.scope_key, e.arguments,
               e.amount_minor, e.currency::text AS currency, e.repeats_effect_id, e.http_status, e.error_code,
               t.effectful, t.idempotency_scope AS scope, t.amount_arg, t.currency_arg, t.args_schema,
               c.tool_call_id AS by_call, c.decision AS by_decision, c.input AS by_input, c.erased AS by_erased,
               c.message_id AS by_message, c.fork_point_id AS by_fork, c.tool_name AS by_tool,
               c.tool_version AS by_version,
               (SELECT v.to_state FROM convo.tool_effect_events v
                 WHERE v.conversation_id = e.conversation_id AND v.effect_id = e.id
                 ORDER BY v.seq LIMIT 1) AS first_state
          FROM convo.tool_effects e
          JOIN convo.tools t ON t.name = e.tool_name AND t.version = e.tool_version
          JOIN calls c ON c.conversation_id = e.conversation_id AND c.effect_id = e.id
                      AND c.decision IN ('execute', 'confirm', 'rejected')
         WHERE p_conversation_id IS NULL OR e.conversation_id = p_conversation_id)
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('decision %s for %s version %s, which %s', c.decision, c.tool_name, c.tool_version,
                  CASE WHEN c.effectful THEN 'is effectful (replay is for tools without effects)'
                       ELSE 'has no effects (its calls are replayed)' END)
      FROM calls c
     WHERE (c.decision = 'replay') = c.effectful
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('is recorded for tool %s, its tool_use part names %s', c.tool_name, c.part_tool)
      FROM calls c
     WHERE c.tool_name IS DISTINCT FROM c.part_tool
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('fork point %s, the call''s is %s', coalesce(c.fork_point_id::text, 'the conversation'),
                  coalesce(f.fork::text, 'the conversation'))
      FROM calls c
     CROSS JOIN LATERAL (SELECT convo_private.fork_point_of(c.conversation_id, c.message_id) AS fork) f
     WHERE c.fork_point_id IS DISTINCT FROM f.fork
    UNION ALL
    SELECT c.conversation_id, 'tool call ' || c.tool_call_id,
           format('reuses effect %s, whose scope key is not the one the call computes (%s)', c.effect_id, c.scope)
      FROM calls c
      JOIN convo.tool_effects e ON e.conversation_id = c.conversation_id AND e.id = c.effect_id
     WHERE c.decision = 'reuse' AND NOT c.erased
       AND e.scope_key IS DISTINCT FROM convo_private.scope_key(c.scope, c.conversation_id, c.tool_call_id,
                                                                c.fork_point_id, c.tool_name, c.input)
    UNION ALL
    SELECT e.conversation_id, 'effect ' || e.id, x.problem
      FROM effects e
     CROSS JOIN LATERAL convo_private.effect_money(e.arguments, e.amount_arg, e.currency_arg) m
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN (e.by_tool, e.by_version) IS DISTINCT FROM (e.tool_name, e.tool_version)
              THEN format('is of %s version %s, its call %s of %s version %s', e.tool_name, e.tool_version,
                          e.by_call, e.by_tool, e.by_version) END),
        (CASE WHEN e.first_state IS DISTINCT FROM CASE e.by_decision WHEN 'execute' THEN 'pending'
                                                                     WHEN 'confirm' THEN 'awaiting_confirmation'
                                                                     ELSE 'failed' END
              THEN format('began %s, its call %s decided %s', coalesce(e.first_state, 'with no event'), e.by_call,
                          e.by_decision) END),
        (CASE WHEN e.by_decision = 'rejected' AND (e.http_status, e.error_code) IS DISTINCT FROM (422, 'invalid_arguments')
              THEN format('was rejected with %s %s, not 422 invalid_arguments', e.http_status, e.error_code) END),
        (CASE WHEN (e.by_decision = 'confirm') <> (e.repeats_effect_id IS NOT NULL)
              THEN format('repeats %s, its call %s decided %s', coalesce(e.repeats_effect_id::text, 'nothing'),
                          e.by_call, e.by_decision) END),
        (CASE WHEN e.by_decision = 'confirm' AND NOT EXISTS (
                  SELECT 1 FROM calls r
                   WHERE r.conversation_id = e.conversation_id AND r.effect_id = e.repeats_effect_id
                     AND r.decision IN ('execute', 'reuse', 'confirm') AND r.tool_name = e.by_tool
                     AND r.fork_point_id IS NOT DISTINCT FROM e.by_fork
                     AND NOT convo_private.is_on_path(e.conversation_id, r.message_id, e.by_message))
              THEN format('repeats effect %s, which no call of %s at the same fork point on another branch made',
                          e.repeats_effect_id, e.by_tool) END),
        (CASE WHEN NOT e.by_erased AND e.arguments::text IS DISTINCT FROM e.by_input::text
              THEN format('has arguments other than the input of its call %s', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND (e.amount_minor, e.currency) IS DISTINCT FROM (m.amount_minor, m.currency)
              THEN format('amount %s %s, its arguments say %s %s (tool %s version %s reads %s and %s)',
                          coalesce(e.amount_minor::text, 'none'), coalesce(e.currency, 'none'),
                          coalesce(m.amount_minor::text, 'none'), coalesce(m.currency, 'none'),
                          e.tool_name, e.tool_version, coalesce(e.amount_arg, 'no amount'),
                          coalesce(e.currency_arg, 'no currency')) END),
        (CASE WHEN NOT e.by_erased
                   AND e.scope_key IS DISTINCT FROM convo_private.scope_key(
                           CASE WHEN e.by_decision = 'rejected' THEN 'rejected' ELSE e.scope END,
                           e.conversation_id, e.by_call, e.by_fork, e.tool_name, e.by_input)
              THEN format('scope key is not the one its call %s computes', e.by_call) END),
        (CASE WHEN NOT e.by_erased AND e.effectful
                   AND (e.by_decision = 'rejected') <> (cardinality(convo.args_errors(e.args_schema, e.by_input)) > 0)
              THEN format('was %s, but its input %s the schema of %s version %s', e.by_decision,
                          CASE WHEN e.by_decision = 'rejected' THEN 'passes' ELSE 'fails' END,
                          e.tool_name, e.tool_version) END)
     ) AS x (problem)
     WHERE x.problem IS NOT NULL;
END;
$$;

-- log_direct_head_move: a head moved by an UPDATE outside pgconvo's code (a
-- superuser, or a role a DBA gave UPDATE) is logged like any move
-- (log_head_move: the head log, the live path, the notification), as
-- direct_update by the caller, whatever settings the session holds.
-- SECURITY DEFINER: it writes the history tables as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.log_direct_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.log_head_move(NEW.id, NEW.head_message_id, OLD.head_message_id, 'direct_update',
                                        convo_private.caller(), NULL);
    RETURN NULL;
END;
$$;

-- log_head_move: what follows a head's move, in the transaction that made
-- it: one conversation_head_log row (seq numbered per conversation, under
-- the conversation's lock), the live path moved with it, and the convo_head
-- notification (unless convo.notify is off; the payload holds ids, seq and
-- reason only, never content, the owner or the mover: LISTEN is not
-- owner-scoped). write_messages calls it for pgconvo's own moves, with the
-- reason, mover and import they were given; conversations_log_direct for an
-- UPDATE outside the API (direct_update, by the caller). An append (the new
-- head a child of the old one) extends the live path by one UPDATE or
-- INSERT; any other move goes to move_live_path.
CREATE OR REPLACE FUNCTION convo_private.log_head_move(
    p_conversation_id uuid,
    p_head            uuid,
    p_old_head        uuid,
    p_reason          text,
    p_moved_by        text,
    p_import_id       uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seq    bigint;
    v_depth  int;
    v_parent uuid;
    v_sib    int;
BEGIN
    INSERT INTO convo.conversation_head_log
        (conversation_id, seq, head_message_id, previous_head_id, moved_by, reason, import_id)
    SELECT p_conversation_id, coalesce(max(l.seq), 0) + 1, p_head, p_old_head, p_moved_by, p_reason, p_import_id
      FROM convo.conversation_head_log l
     WHERE l.conversation_id = p_conversation_id
    RETURNING seq INTO v_seq;

    -- An append that continues the head's branch (the new head its first
    -- child) grows the last segment, in one statement; anything else reads
    -- the new head and moves the path.
    UPDATE convo.live_path l SET max_depth = m.depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head AND m.parent_id = p_old_head AND m.sibling_index = 1
       AND l.conversation_id = p_conversation_id AND l.branch_id = m.branch_id AND l.max_depth = m.depth - 1;
    IF NOT FOUND THEN
        SELECT m.depth, m.parent_id, m.sibling_index INTO v_depth, v_parent, v_sib
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = p_head;
        IF p_old_head IS NOT NULL AND v_parent = p_old_head AND v_sib > 1 THEN
            -- A later child starts a branch of its own: one new segment.
            INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
            VALUES (p_conversation_id, v_depth, p_head, v_depth);
        ELSE
            PERFORM convo_private.move_live_path(p_conversation_id, p_head);
        END IF;
    END IF;

    IF current_setting('convo.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('convo_head', json_build_object(
            'conversation_id', p_conversation_id, 'seq', v_seq, 'head_message_id', p_head,
            'previous_head_id', p_old_head, 'reason', p_reason)::text);
    END IF;
END;
$$;

-- messages_guard: a message inserted outside pgconvo's code (a DBA's
-- repair, as a superuser) must be one write_messages could have written:
-- in a conversation the writer may write for, under its lock (so it
-- serializes with the API), with the depth, sibling position and branch the
-- tree gives it, no import, a time neither before its parent's nor after
-- now, well-formed parts (part_problem), and none addressed by key (a tool
-- call, result or attachment needs its keyed row and its ledger decision:
-- write those through the API). It computes nothing; it refuses.
CREATE OR REPLACE FUNCTION convo_private.messages_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent  convo.messages;
    v_last    int;
    v_branch  uuid;
    v_problem text[];
    v_where   text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                             NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.parent_id IS NOT NULL THEN
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id = NEW.parent_id
                    ORDER BY s.sibling_index DESC LIMIT 1);
    ELSE
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id IS NULL
                    ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1);
    END IF;
    v_last := coalesce(v_last, 0);
    v_branch := CASE WHEN NEW.parent_id IS NOT NULL AND v_last = 0 THEN v_parent.branch_id ELSE NEW.id END;
    IF NEW.depth IS DISTINCT FROM coalesce(v_parent.depth + 1, 0) OR NEW.sibling_index IS DISTINCT FROM v_last + 1
       OR NEW.branch_id IS DISTINCT FROM v_branch OR NEW.import_id IS NOT NULL
       OR NEW.created_at > clock_timestamp() OR NEW.created_at < v_parent.created_at THEN
        RAISE EXCEPTION 'a message written outside the API must be placed as the tree places it'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s: depth %s, sibling_index %s, branch_id %s, no import_id, created_at from %s to now',
                                  v_where, coalesce(v_parent.depth + 1, 0), v_last + 1, v_branch,
                                  coalesce(v_parent.created_at::text, '-infinity')),
                  HINT = 'Write messages through convo.append_message, edit_and_resend or regenerate, which place them.';
    END IF;
    IF NEW.parts IS NULL OR jsonb_typeof(NEW.parts) <> 'array' OR jsonb_array_length(NEW.parts) = 0
       OR octet_length(NEW.parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'p_parts must be a non-empty JSON array of at most % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    SELECT p.problem INTO v_problem
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e (part, n),
           LATERAL (SELECT CASE WHEN e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment')
                                THEN ARRAY['CV008', format('a %s part is written through the API only', e.part ->> 'type'),
                                           format(', part %s', e.n - 1),
                                           'It needs its keyed row and, for a tool call, its ledger decision.']
                                ELSE convo_private.part_problem(e.part, NEW.role) END AS problem) p
     WHERE p.problem IS NOT NULL
     ORDER BY e.n LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', v_problem[2]
            USING ERRCODE = v_problem[1], DETAIL = v_where || v_problem[3], HINT = v_problem[4];
    END IF;
    RETURN NEW;
END;
$$;

-- move_live_path: keeps convo.live_path, the derived index of the live
-- path, equal to the segments of the path from the root to p_head_id: one
-- row per branch the path runs through (a branch is a run of first
-- children), from the depth where it starts to the deepest of it on the
-- path. It walks up from the head one segment at a time (two key lookups
-- each) until it meets a branch already on the live path (the fork), cuts
-- that one at the fork and drops the rows below it: a move costs the
-- segments that change, never the conversation. path reads the messages
-- of each segment as one index range scan.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branch   uuid;
    v_depth    int;
    v_start    int;
    v_parent   uuid;
    v_shared   int;
    v_branches uuid[] := '{}';
    v_mins     int[] := '{}';
    v_maxs     int[] := '{}';
BEGIN
    SELECT m.branch_id, m.depth INTO v_branch, v_depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id;
    WHILE v_branch IS NOT NULL LOOP
        SELECT l.min_depth INTO v_shared
          FROM convo.live_path l
         WHERE l.conversation_id = p_conversation_id AND l.branch_id = v_branch;
        EXIT WHEN FOUND;
        -- A branch's id is its first message's.
        SELECT m.depth, m.parent_id INTO v_start, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_branch;
        v_branches := v_branches || v_branch;
        v_mins := v_mins || v_start;
        v_maxs := v_maxs || v_depth;
        v_branch := NULL;
        IF v_parent IS NOT NULL THEN
            SELECT m.branch_id, m.depth INTO v_branch, v_depth
              FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_parent;
        END IF;
    END LOOP;
    IF v_shared IS NOT NULL THEN
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id AND l.min_depth > v_shared;
        UPDATE convo.live_path l SET max_depth = v_depth
         WHERE l.conversation_id = p_conversation_id AND l.min_depth = v_shared;
    ELSE
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    END IF;
    INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
    SELECT p_conversation_id, s.min_depth, s.branch_id, s.max_depth
      FROM unnest(v_mins, v_branches, v_maxs) AS s (min_depth, branch_id, max_depth);
END;
$$;

-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard), unless convo.notify is
-- off. begin_receipt, fill_receipt, apply_receipt, fail_receipt and
-- expire_receipts call it for each receipt they change; an erasure or a
-- repeat sends nothing. The payload holds the receipt's id, status and
-- whether it is filled: never its owner, key, request or arguments, since
-- listeners may belong to any owner.
CREATE OR REPLACE FUNCTION convo_private.notify_receipt(p_receipt_id uuid, p_status text, p_filled boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'receipt', 'receipt_id', p_receipt_id, 'state', p_status, 'filled', p_filled)::text);
    END IF;
END;
$$;

-- path_from: the path from the root to p_head_id, depth 0 first, as path
-- returns it: the segments of the live-path index when p_head_id is the
-- head (the path to a message never changes), else walked from the tree
-- (path_segments), each segment one index range scan. sibling_count comes
-- from the few siblings after the first (messages_forks_idx), read once
-- into an object by parent that each row looks up (as path does), counting,
-- when p_at is given, only those created by then: the "< 1/2 >" the
-- customer saw at that instant (sibling_index is creation order, so it holds).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branches uuid[];
    v_depths   int[];
    v_forks    jsonb;  -- parent id ('' for the roots) to its children's count, for parents of more than one
BEGIN
    IF p_head_id IS NULL THEN
        RETURN;
    END IF;
    IF p_head_id = (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id) THEN
        SELECT array_agg(l.branch_id), array_agg(l.max_depth) INTO v_branches, v_depths
          FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    ELSE
        SELECT array_agg(s.branch_id), array_agg(s.max_depth) INTO v_branches, v_depths
          FROM convo_private.path_segments(p_conversation_id, p_head_id) s;
    END IF;
    SELECT jsonb_object_agg(coalesce(f.parent_id::text, ''), f.n) INTO v_forks
      FROM (SELECT f.parent_id, max(f.sibling_index) AS n
              FROM convo.messages f
             WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
               AND (p_at IS NULL OR f.created_at <= p_at)
             GROUP BY f.parent_id) f;
    RETURN QUERY
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           CASE WHEN v_forks IS NULL THEN 1 ELSE coalesce((v_forks ->> coalesce(m.parent_id::text, ''))::int, 1) END
      FROM unnest(v_branches, v_depths) AS s (branch_id, max_depth)
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;

-- rebuild_live_path: rebuilds convo.live_path for one conversation from the
-- tree and its head, which stay the truth: the repair for self_check's
-- live_path_index check (and what the migration that made the segments ran).
CREATE OR REPLACE FUNCTION convo_private.rebuild_live_path(p_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    PERFORM convo_private.move_live_path(p_conversation_id,
        (SELECT c.head_message_id FROM convo.conversations c WHERE c.id = p_conversation_id));
END;
$$;

-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner. The owner is
-- checked first, without a lock, and the lock is taken by the receipt's key
-- (owner, id): another owner's receipt is never locked or waited for.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
    v_owner   text;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011', DETAIL = 'receipt NULL';
    END IF;
    SELECT r.owner_id INTO v_owner FROM convo.tool_receipts r
     WHERE r.id = p_receipt_id AND convo_private.writes_owner(r.owner_id);
    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.owner_id = v_owner AND r.id = p_receipt_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;

-- record_tool_call: writes one tool call's ledger decision, from
-- write_messages, in the transaction that stores its tool_use part, before
-- any request can leave, against the tool's latest version at that moment,
-- which the call's row names (so the decision can be checked against it).
-- An unregistered tool gets no row (effect_for_call answers CV007, even once
-- it is registered); write_messages calls it for no import (those calls
-- happened elsewhere). A new effect's first event is written with it
-- (effect_event).
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_ordinal         int,
    p_tool_call_id    text,
    p_tool_name       text,
    p_input           jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := p_input;
    v_now       timestamptz := clock_timestamp();
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_decision  text;
    v_money     record;
    v_id        uuid := gen_random_uuid();
BEGIN
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = p_tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_fork := convo_private.fork_point_of(p_conversation_id, p_message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := convo_private.scope_key('rejected', p_conversation_id, p_tool_call_id, NULL, NULL, NULL);
    ELSE
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, p_conversation_id, p_tool_call_id,
                                               v_fork, v_tool.name, v_input);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = p_conversation_id AND e.scope_key = v_scope_key;
        IF FOUND THEN
            v_decision := 'reuse';
        ELSE
            -- Re-run candidates come from other messages at the same fork point
            -- (the calls of this very message are on its path by definition):
            -- two ranges of tool_effect_calls_fork_idx skip this message's
            -- calls, so N calls in one message cost N lookups, not N squared.
            SELECT l.effect_id INTO v_repeats
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = p_conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < p_message_id OR l.message_id > p_message_id)
               AND e.tool_name = p_tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_path(p_conversation_id, l.message_id, p_message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, requested_at, deadline_at, settled_at, http_status, error_code)
        VALUES
            (p_conversation_id, v_id, v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input, v_money.amount_minor, v_money.currency,
             v_repeats, v_now,
             v_now + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN v_now END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.effect_event(p_conversation_id, v_effect.id, 'requested', v_effect.state, convo_private.caller(),
                                           CASE WHEN v_decision = 'rejected'
                                                THEN jsonb_build_object('errors', to_jsonb(v_errors)) ELSE '{}' END);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version)
    VALUES (p_conversation_id, p_tool_call_id, p_message_id, p_ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version);
END;
$$;

-- tool_effects_log_direct: an effect created or moved outside pgconvo's
-- code (a superuser's repair, which the state machine still checks) gets
-- its event like any transition (effect_event), by the caller, with no
-- evidence. SECURITY DEFINER: it writes the event log as pgconvo's code.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log_direct()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition
    END IF;
    PERFORM convo_private.effect_event(NEW.conversation_id, NEW.id,
                                       CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
                                       convo_private.caller(), '{}');
    RETURN NULL;
END;
$$;

-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
-- Rows are compared by their text, since jsonb's = calls 500 and 500.000 equal.
-- It guards every write outside pgconvo's code (whose entries, and
-- erasure, write only such rows).
CREATE OR REPLACE FUNCTION convo_private.tool_effects_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_from    text := CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END;
    v_changes text[];
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text THEN
            RAISE EXCEPTION 'effect % changes only by a transition of its state', OLD.id
                USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', OLD.id, OLD.state);
        END IF;
        RETURN NEW;
    END IF;
    SELECT t.changes INTO v_changes FROM convo.effect_transitions t
     WHERE t.from_state = v_from AND t.to_state = NEW.state;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an effect cannot go from % to %', v_from, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, %s to %s', NEW.id, v_from, NEW.state),
                  HINT = 'The transitions are listed in convo.effect_transitions.';
    END IF;
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - v_changes - 'state')::text <> (to_jsonb(OLD) - v_changes - 'state')::text THEN
        RAISE EXCEPTION 'the transition % to % may change only %', OLD.state, NEW.state, array_to_string(v_changes, ', ')
            USING ERRCODE = 'CV006', DETAIL = format('effect %s', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes (compared as text: jsonb's = calls 500
-- and 500.000 equal). CV006. It guards every write outside pgconvo's code
-- (whose entries, and erasure, write only such rows).
CREATE OR REPLACE FUNCTION convo_private.tool_receipts_transition()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.arguments IS NOT NULL THEN
            RAISE EXCEPTION 'a receipt is filed pending and unfilled'
                USING ERRCODE = 'CV006', DETAIL = format('receipt %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF to_jsonb(NEW)::text = to_jsonb(OLD)::text THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending'
       OR (NEW.id, NEW.owner_id, NEW.idempotency_key, NEW.tool_name, NEW.tool_version, NEW.request::text,
           NEW.request_digest, NEW.created_at, NEW.deadline_at)
          IS DISTINCT FROM
          (OLD.id, OLD.owner_id, OLD.idempotency_key, OLD.tool_name, OLD.tool_version, OLD.request::text,
           OLD.request_digest, OLD.created_at, OLD.deadline_at)
       OR (OLD.arguments IS NOT NULL
           AND (NEW.arguments::text, NEW.expected::text, NEW.arguments_valid, NEW.filled_at)
               IS DISTINCT FROM (OLD.arguments::text, OLD.expected::text, OLD.arguments_valid, OLD.filled_at)) THEN
        RAISE EXCEPTION 'receipt % is %: this change is not a transition it allows', OLD.id, OLD.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, %s to %s', OLD.id, OLD.status, NEW.status),
                  HINT = 'A receipt goes from pending to applied or failed, once; its arguments are filled once.';
    END IF;
    IF NEW.arguments_valid AND OLD.arguments IS NULL
       AND convo_private.receipt_arguments_error(NEW.tool_name, NEW.tool_version, NEW.arguments, NEW.expected) IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % arguments are marked valid but fail its tool version or the expected values', OLD.id
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, tool %s version %s', OLD.id, OLD.tool_name, OLD.tool_version);
    END IF;
    RETURN NEW;
END;
$$;

-- write_messages: the one write path of the tree. Every call that adds
-- messages writes through it (append_message, edit_and_resend and
-- regenerate, complete_generation, create_conversation, the imports), once
-- its caller has checked the owner and locked the conversation
-- (lock_conversation; p_old_head is the head it read). Everything comes in
-- as arguments, nothing through a setting or a marker:
--   the new messages as parallel arrays, parents first: each parent an
--   existing message, an earlier new one, or NULL (a root); a branch reason
--   asked for (NULL: the tree's, 'branch' for a later child); a time (NULL:
--   now); the import writing them (NULL: none), which keeps their times and
--   writes no ledger row;
--   the head to move to, why and by whom (p_head NULL: the head stays).
-- It reads each existing parent once and computes depth, sibling position
-- and branch (a first child continues its parent's branch, a later sibling
-- starts one); checks every part against its message (part_problem), each
-- tool call id unique in the conversation and each result naming a call of
-- its parent; inserts the messages and their keyed parts (keyed_parts:
-- calls, results, attachments) as sets; records each tool call's ledger
-- decision (record_tool_call); and moves the head (log_head_move: the head
-- log, the live path, the notification). The tables' triggers only guard
-- writes that do not come from pgconvo's own code. DETAILs name where a
-- refused message was going, never its own id, which is not stored.
CREATE OR REPLACE FUNCTION convo_private.write_messages(
    p_conversation_id uuid,
    p_old_head        uuid,
    p_ids             uuid[],
    p_parents         uuid[],
    p_roles           text[],
    p_parts           jsonb[],
    p_reasons         text[],
    p_times           timestamptz[],
    p_import_id       uuid,
    p_head            uuid,
    p_head_reason     text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Its statements are shaped by the arrays, not their values: a plan made
-- for one call serves every call (PostgreSQL would otherwise plan them anew
-- each time, at a cost above the statements').
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n       int := coalesce(cardinality(p_ids), 0);
    v_now     timestamptz := clock_timestamp();
    v_pidx    int[];   -- the parent's position among the new messages, 0 for none
    v_pdepth  int[];   -- an existing parent's depth
    v_pbranch uuid[];  -- an existing parent's branch
    v_sib     int[];   -- sibling position: the last under the parent, plus the rank among the new
    v_depth   int[] := '{}';
    v_branch  uuid[] := '{}';
    v_reason  text[] := '{}';
    v_missing int;     -- a new message whose parent is nowhere
    v_bad_i   int;     -- the first problem: its message, its part (0: the message itself),
    v_bad_ordinal int; -- and {SQLSTATE, message, what to add to the DETAIL, hint}
    v_problem text[];
    v_link_i  int;     -- the first problem with a call id or a result's call
    v_link_ordinal int;
    v_link_problem text[];
    v_keyed   boolean; -- the write holds calls, results or attachments
    v_linked  boolean; -- calls or results
    v_calls   boolean; -- calls
    v_call    record;
BEGIN
    IF v_n > 0 THEN
        -- Each parent, read once: among the new messages (an earlier one),
        -- or stored, with the last sibling position under it (one probe of
        -- messages_sibling_key in reverse; parent_id in the order keeps the
        -- index order for a root's IS NULL).
        SELECT array_agg(x.pidx ORDER BY x.i), array_agg(x.pdepth ORDER BY x.i),
               array_agg(x.pbranch ORDER BY x.i), array_agg((x.last + x.rank)::int ORDER BY x.i),
               (array_agg(x.i ORDER BY x.i) FILTER (WHERE x.missing))[1]
          INTO v_pidx, v_pdepth, v_pbranch, v_sib, v_missing
          FROM (SELECT n.i, coalesce(b.i, 0)::int AS pidx, p.depth AS pdepth, p.branch_id AS pbranch,
                       n.parent_id IS NOT NULL AND b.i IS NULL AND p.id IS NULL AS missing,
                       CASE WHEN b.i IS NOT NULL THEN 0
                            WHEN n.parent_id IS NULL THEN
                                 coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id IS NULL
                                            ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1), 0)
                            ELSE coalesce((SELECT s.sibling_index FROM convo.messages s
                                            WHERE s.conversation_id = p_conversation_id AND s.parent_id = n.parent_id
                                            ORDER BY s.sibling_index DESC LIMIT 1), 0) END AS last,
                       row_number() OVER (PARTITION BY n.parent_id ORDER BY n.i) AS rank
                  FROM unnest(p_ids, p_parents) WITH ORDINALITY AS n (id, parent_id, i)
                  LEFT JOIN unnest(p_ids) WITH ORDINALITY AS b (id, i) ON b.id = n.parent_id AND b.i < n.i
                  LEFT JOIN convo.messages p
                         ON b.i IS NULL AND p.conversation_id = p_conversation_id AND p.id = n.parent_id) x;
        IF v_missing IS NOT NULL THEN
            PERFORM convo_private.raise_not_found('message', p_parents[v_missing]::text, p_conversation_id,
                (SELECT m.conversation_id FROM convo.messages m WHERE m.id = p_parents[v_missing] LIMIT 1));
        END IF;
        FOR i IN 1 .. v_n LOOP
            IF v_pidx[i] > 0 THEN
                v_depth[i] := v_depth[v_pidx[i]] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_branch[v_pidx[i]] ELSE p_ids[i] END;
            ELSIF p_parents[i] IS NULL THEN
                v_depth[i] := 0;
                v_branch[i] := p_ids[i];
            ELSE
                v_depth[i] := v_pdepth[i] + 1;
                v_branch[i] := CASE WHEN v_sib[i] = 1 THEN v_pbranch[i] ELSE p_ids[i] END;
            END IF;
            v_reason[i] := CASE WHEN v_sib[i] > 1 THEN coalesce(p_reasons[i], 'branch') END;
        END LOOP;

        -- Every message and part as the contract says, the first problem by
        -- position (role and parts, then each part: part_problem), and
        -- whether the write holds parts addressed by key, in one pass over
        -- the parts.
        SELECT x.i, x.ordinal, x.problem,
               bool_or(x.type IN ('tool_use', 'tool_result', 'attachment')) OVER (),
               bool_or(x.type IN ('tool_use', 'tool_result')) OVER (),
               bool_or(x.type = 'tool_use') OVER ()
          INTO v_bad_i, v_bad_ordinal, v_problem, v_keyed, v_linked, v_calls
          FROM (SELECT m.i, 0 AS ordinal, NULL::text AS type,
                       CASE WHEN m.role IS NULL OR m.role NOT IN ('system', 'user', 'assistant', 'tool')
                                 THEN ARRAY['CV011', format('unknown role %s', coalesce(quote_literal(m.role), 'NULL')), '',
                                            'Roles are system, user, assistant and tool.']
                            WHEN m.parts IS NULL THEN ARRAY['CV011', 'p_parts is required', '', '']
                            WHEN jsonb_typeof(m.parts) <> 'array'
                                 THEN ARRAY['CV008', format('p_parts must be a JSON array, not %s', jsonb_typeof(m.parts)), '', '']
                            WHEN jsonb_array_length(m.parts) = 0 THEN ARRAY['CV008', 'p_parts must not be empty', '', '']
                            WHEN octet_length(m.parts::text) > convo.max_message_bytes()
                                 THEN ARRAY['CV010', format('a message is larger than %s bytes', convo.max_message_bytes()),
                                            format(': %s bytes', octet_length(m.parts::text)), '']
                            WHEN m.reason IS NOT NULL AND v_sib[m.i] = 1
                                 THEN ARRAY['CV011', 'a first child has no branch_reason', format(', branch_reason %s', m.reason), '']
                       END AS problem
                  FROM unnest(p_roles, p_parts, p_reasons) WITH ORDINALITY AS m (role, parts, reason, i)
                UNION ALL
                SELECT m.i, e.n::int, e.part ->> 'type', convo_private.part_problem(e.part, m.role)
                  FROM unnest(p_roles, p_parts) WITH ORDINALITY AS m (role, parts, i),
                       jsonb_array_elements(CASE WHEN jsonb_typeof(m.parts) = 'array' THEN m.parts ELSE '[]' END)
                           WITH ORDINALITY AS e (part, n)) x
         ORDER BY x.problem IS NULL, x.i, x.ordinal
         LIMIT 1;
        -- What needs other rows, only for a write with calls or results: a
        -- call id once in the conversation, a result naming a call of its
        -- parent (stored, or new in the same write). The earlier problem wins.
        IF v_linked THEN
            SELECT x.i, x.ordinal, x.problem INTO v_link_i, v_link_ordinal, v_link_problem FROM (
                SELECT c.i, c.n::int AS ordinal,
                       ARRAY['CV008', format('tool call id %s is already used in this conversation', c.id),
                             format(', tool call %s', c.id), ''] AS problem
                  FROM (SELECT m.i, e.n, e.part ->> 'id' AS id,
                               count(*) OVER (PARTITION BY e.part ->> 'id' ORDER BY m.i, e.n) AS nth
                          FROM unnest(p_parts) WITH ORDINALITY AS m (parts, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_use') c
                 WHERE c.nth > 1
                    OR EXISTS (SELECT 1 FROM convo.keyed_parts k
                                WHERE k.conversation_id = p_conversation_id AND k.type = 'tool_use' AND k.tool_call_id = c.id)
                UNION ALL
                SELECT r.i, r.n::int,
                       ARRAY['CV008', format('tool_result names tool call %s, which is not a tool_use of the parent message', r.id),
                             format(', tool call %s, parent %s', r.id, coalesce(r.parent_id::text, 'none')), '']
                  FROM (SELECT m.i, e.n, e.part ->> 'tool_use_id' AS id, m.parent_id
                          FROM unnest(p_parts, p_parents) WITH ORDINALITY AS m (parts, parent_id, i),
                               jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                         WHERE jsonb_typeof(m.parts) = 'array' AND e.part ->> 'type' = 'tool_result') r
                 WHERE NOT CASE WHEN v_pidx[r.i] > 0
                                THEN EXISTS (SELECT 1 FROM jsonb_array_elements(p_parts[v_pidx[r.i]]) u (part)
                                              WHERE u.part ->> 'type' = 'tool_use' AND u.part ->> 'id' = r.id)
                                ELSE EXISTS (SELECT 1 FROM convo.keyed_parts k
                                              WHERE k.conversation_id = p_conversation_id AND k.message_id = r.parent_id
                                                AND k.type = 'tool_use' AND k.tool_call_id = r.id) END
            ) AS x (i, ordinal, problem)
            ORDER BY x.i, x.ordinal
            LIMIT 1;
            IF v_link_problem IS NOT NULL
               AND (v_problem IS NULL OR (v_link_i, v_link_ordinal) < (v_bad_i, v_bad_ordinal)) THEN
                v_bad_i := v_link_i;
                v_bad_ordinal := v_link_ordinal;
                v_problem := v_link_problem;
            END IF;
        END IF;
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION '%', v_problem[2]
                USING ERRCODE = v_problem[1], HINT = v_problem[4],
                      DETAIL = format('a new %s message in conversation %s, parent %s', coalesce(p_roles[v_bad_i], 'NULL'),
                                      p_conversation_id, coalesce(p_parents[v_bad_i]::text, 'none (a root)'))
                               || CASE WHEN v_bad_ordinal > 0 THEN format(', part %s', v_bad_ordinal - 1) ELSE '' END
                               || v_problem[3];
        END IF;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, depth, sibling_index, branch_id,
                                    parts, created_at, import_id)
        SELECT p_conversation_id, x.id, x.parent_id, x.role, x.reason, x.depth, x.sib, x.branch, x.parts,
               coalesce(x.at, v_now), p_import_id
          FROM unnest(p_ids, p_parents, p_roles, v_reason, v_depth, v_sib, v_branch, p_parts, p_times)
               WITH ORDINALITY AS x (id, parent_id, role, reason, depth, sib, branch, parts, at, i)
         ORDER BY x.i;

        -- The parts addressed by key, one row each; the rest live only in
        -- the message's own array.
        IF v_keyed THEN
            INSERT INTO convo.keyed_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name)
            SELECT p_conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
                   CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END,
                   CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END
              FROM unnest(p_ids, p_parts) AS m (id, parts),
                   jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
             WHERE e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment');
        END IF;
        -- Each tool call's ledger decision, before any request can leave;
        -- an import's calls happened elsewhere and get none.
        IF v_calls AND p_import_id IS NULL THEN
            FOR v_call IN
                SELECT m.id, (e.n - 1)::int AS ordinal, e.part
                  FROM unnest(p_ids, p_parts) WITH ORDINALITY AS m (id, parts, i),
                       jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n)
                 WHERE e.part ->> 'type' = 'tool_use'
                 ORDER BY m.i, e.n
            LOOP
                PERFORM convo_private.record_tool_call(p_conversation_id, v_call.id, v_call.ordinal,
                                                       v_call.part ->> 'id', v_call.part ->> 'name', v_call.part -> 'input');
            END LOOP;
        END IF;
    END IF;

    IF p_head IS NOT NULL AND p_head IS DISTINCT FROM p_old_head THEN
        UPDATE convo.conversations c SET head_message_id = p_head WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_head_move(p_conversation_id, p_head, p_old_head, p_head_reason, p_moved_by, p_import_id);
    END IF;
END;
$$;

-- max_detail_bytes: the size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each);
-- larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_detail_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_detail_bytes() IS 'Size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each); larger input raises CV010.';

-- max_message_bytes: the size cap on the parts of a whole message (4 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_message_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 4194304;

COMMENT ON FUNCTION convo.max_message_bytes() IS 'Size cap in bytes on the parts of a whole message (4 MiB of JSON); larger input raises CV010.';

-- max_metadata_bytes: the size cap on conversation metadata (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_metadata_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_metadata_bytes() IS 'Size cap in bytes on conversation metadata (256 KiB of JSON); larger input raises CV010.';

-- max_part_bytes: the size cap on one message part (1 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_part_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 1048576;

COMMENT ON FUNCTION convo.max_part_bytes() IS 'Size cap in bytes on one message part (1 MiB of JSON); larger input raises CV010.';

-- max_ref_length: the size cap on an external reference, result reference or error code (characters);
-- larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_ref_length()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 1024;

COMMENT ON FUNCTION convo.max_ref_length() IS 'Size cap on an external reference, result reference or error code (characters); larger input raises CV010.';

-- max_request_bytes: the size cap on the request or arguments of a receipt (256 KiB of JSON);
-- larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_request_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_request_bytes() IS 'Size cap on the request or arguments of a receipt (256 KiB of JSON); larger input raises CV010.';

-- max_tool_input_bytes: the size cap on one tool_use input (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo.max_tool_input_bytes()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_tool_input_bytes() IS 'Size cap in bytes on one tool_use input (256 KiB of JSON); larger input raises CV010.';

-- max_id_length: the cap on an id a caller names as text (an owner id, a
-- tool call id), in characters: 255, so that every index on them holds
-- (PostgreSQL's btree refuses entries over about 2.7 kB) and a longer id
-- is the contract's CV011 or CV010, never a raw 54000.
-- STABLE, not IMMUTABLE: the planner inlines a STABLE constant into the
-- query, where it would call an IMMUTABLE one at every planning.
CREATE OR REPLACE FUNCTION convo_private.max_id_length()
RETURNS int
LANGUAGE sql
STABLE PARALLEL SAFE
RETURN 255;

-- package_triggers: every trigger pgconvo puts on its tables (and on its
-- view message_parts), by what it guards: append_only (refuse_change,
-- refuse_forgery), head_log (the conversation's guard and the logging of
-- direct head updates) and rule (the tree's and the ledger's guards, the
-- state machines). Each table's triggers are numbered in the order they fire
-- (PostgreSQL fires them by name): 10 who may write, 20 what a row must be,
-- 30 what follows, 90 append-only. self_check requires each present and
-- ENABLE ALWAYS (a view's are enabled as views allow), and no other trigger
-- on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversations', 'conversations_10_guard', 'head_log'),
        ('conversations', 'conversations_20_log_direct', 'head_log'),
        ('conversations', 'conversations_90_no_delete', 'append_only'),
        ('messages', 'messages_20_guard', 'rule'),
        ('messages', 'messages_30_no_update', 'append_only'),
        ('messages', 'messages_90_append_only', 'append_only'),
        ('keyed_parts', 'keyed_parts_10_no_forgery', 'append_only'),
        ('keyed_parts', 'keyed_parts_20_guard', 'rule'),
        ('keyed_parts', 'keyed_parts_90_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_10_no_forgery', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_90_append_only', 'append_only'),
        ('live_path', 'live_path_10_no_forgery', 'append_only'),
        ('generations', 'generations_20_transition', 'rule'),
        ('generations', 'generations_90_no_delete', 'append_only'),
        ('tools', 'tools_10_no_forgery', 'append_only'),
        ('tools', 'tools_90_append_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_90_fixed', 'append_only'),
        ('tool_effects', 'tool_effects_10_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_20_transition', 'rule'),
        ('tool_effects', 'tool_effects_30_log_direct', 'rule'),
        ('tool_effects', 'tool_effects_90_no_delete', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_10_no_forgery', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_90_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_10_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_30_no_update', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_90_append_only', 'append_only'),
        ('tool_receipts', 'tool_receipts_10_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_20_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_90_no_delete', 'append_only'),
        ('erasures', 'erasures_10_no_forgery', 'append_only'),
        ('erasures', 'erasures_90_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_10_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_90_append_only', 'append_only'),
        ('import_origins', 'import_origins_10_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_30_no_update', 'append_only'),
        ('import_origins', 'import_origins_90_append_only', 'append_only'),
        ('imports', 'imports_10_no_forgery', 'append_only'),
        ('imports', 'imports_30_no_update', 'append_only'),
        ('imports', 'imports_90_append_only', 'append_only'),
        ('message_parts', 'message_parts_10_refuse', 'append_only')) AS t (table_name, trigger_name, guards);
END;

-- part_problem: what is wrong with one message part for a message of
-- p_role, as {SQLSTATE, message, what to add to the DETAIL, hint}, or NULL: the
-- one rule of a well-formed part (the contract's four types, their keys,
-- the caps, which roles carry tool calls and results). write_messages
-- checks every part of a write with it, set-based; messages_guard checks a
-- direct insert with it. What needs other rows (a tool call id unique in
-- the conversation, a result naming its parent's call) is write_messages'.
-- SQL with no SET clause and STABLE (format() is), so it is inlined into
-- those queries.
CREATE OR REPLACE FUNCTION convo_private.part_problem(p_part jsonb, p_role text)
RETURNS text[]
LANGUAGE sql
STABLE
RETURN CASE
    WHEN octet_length(p_part::text) > convo.max_part_bytes()
        THEN ARRAY['CV010', format('a message part is larger than %s bytes', convo.max_part_bytes()),
                   format(': %s bytes', octet_length(p_part::text)), '']
    WHEN jsonb_typeof(p_part) IS DISTINCT FROM 'object' OR jsonb_typeof(p_part -> 'type') IS DISTINCT FROM 'string'
        THEN ARRAY['CV008', 'a message part must be a JSON object with a string "type"', '', '']
    WHEN p_part ->> 'type' = 'text' THEN
        CASE WHEN jsonb_typeof(p_part -> 'text') IS DISTINCT FROM 'string'
             THEN ARRAY['CV008', 'a text part needs a string "text"', '', ''] END
    WHEN p_part ->> 'type' = 'tool_use' THEN CASE
        WHEN jsonb_typeof(p_part -> 'id') IS DISTINCT FROM 'string' OR p_part ->> 'id' = ''
             OR jsonb_typeof(p_part -> 'name') IS DISTINCT FROM 'string' OR p_part ->> 'name' = ''
             OR jsonb_typeof(p_part -> 'input') IS DISTINCT FROM 'object'
            THEN ARRAY['CV008', 'a tool_use part needs a non-empty string "id" and "name" and an object "input"', '', '']
        -- A tool call id is unique through a btree index, whose entries are
        -- capped at about 2.7 kB: 255 characters (1020 bytes at most) fit.
        WHEN length(p_part ->> 'id') > convo_private.max_id_length()
            THEN ARRAY['CV010', format('a tool call id is at most %s characters', convo_private.max_id_length()),
                       format(', a tool call id of %s characters', length(p_part ->> 'id')), '']
        WHEN p_role IS DISTINCT FROM 'assistant'
            THEN ARRAY['CV004', format('tool_use belongs in an assistant message, not a %s message', p_role),
                       format(', tool call %s', p_part ->> 'id'), '']
        WHEN octet_length((p_part -> 'input')::text) > convo.max_tool_input_bytes()
            THEN ARRAY['CV010', format('a tool input is larger than %s bytes', convo.max_tool_input_bytes()),
                       format(', tool call %s', p_part ->> 'id'), '']
        END
    WHEN p_part ->> 'type' = 'tool_result' THEN CASE
        WHEN jsonb_typeof(p_part -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT p_part ? 'content'
             OR (p_part ? 'is_error' AND jsonb_typeof(p_part -> 'is_error') <> 'boolean')
            THEN ARRAY['CV008', 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"', '', '']
        WHEN length(p_part ->> 'tool_use_id') > convo_private.max_id_length()
            THEN ARRAY['CV010', format('a tool call id is at most %s characters', convo_private.max_id_length()),
                       format(', a tool_use_id of %s characters', length(p_part ->> 'tool_use_id')), '']
        WHEN p_role IS NULL OR p_role NOT IN ('user', 'tool')
            THEN ARRAY['CV004', format('tool_result belongs in a user or tool message, not a %s message', p_role), '', '']
        END
    WHEN p_part ->> 'type' = 'attachment' THEN
        CASE WHEN jsonb_typeof(p_part -> 'uri') IS DISTINCT FROM 'string' OR p_part ->> 'uri' = ''
                  OR jsonb_typeof(p_part -> 'media_type') IS DISTINCT FROM 'string' OR p_part ->> 'media_type' = ''
             THEN ARRAY['CV008', 'an attachment part needs a non-empty string "uri" and "media_type"', '', ''] END
    ELSE ARRAY['CV008', format('unknown message part type "%s"', p_part ->> 'type'), '',
                'Part types are text, tool_use, tool_result and attachment.']
END;

-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (their one copy, the message's array), conversation metadata,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, an imported message's source node, an
-- import's source key and digest, a receipt's request, arguments and expected values. Idempotent. erase_content,
-- the one place that updates content, writes it.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'conversations' THEN '{"metadata": {}}'::jsonb
    WHEN 'generations' THEN jsonb_build_object('params', '{}'::jsonb, 'request_digest', NULL,
        'usage', CASE WHEN jsonb_typeof(p_row -> 'usage') <> 'null' THEN '{}'::jsonb END,
        'error', CASE WHEN jsonb_typeof(p_row -> 'error') <> 'null' THEN '{}'::jsonb END)
    WHEN 'tool_effects' THEN '{"arguments": {}}'::jsonb
    WHEN 'tool_effect_events' THEN '{"evidence": {}}'::jsonb
    WHEN 'import_origins' THEN '{"node": {"erased": true}}'::jsonb
    WHEN 'imports' THEN '{"source_key": null, "digest": null}'::jsonb
    WHEN 'tool_receipts' THEN jsonb_build_object('request', '{}'::jsonb,
        'arguments', CASE WHEN jsonb_typeof(p_row -> 'arguments') <> 'null' THEN '{}'::jsonb END,
        'expected', CASE WHEN jsonb_typeof(p_row -> 'expected') <> 'null' THEN '{}'::jsonb END)
END;

-- message_parts: the parts of each message, one row a part (the contract's
-- table, as DBAs query it), read from the message's own array: a part is
-- stored once. The parts addressed by key (tool calls and results,
-- attachments) also have their keyed row (convo.keyed_parts), which the
-- ledger references. security_invoker: the reader's own rights and
-- row-level security apply (convo_reader reads every row; convo_app,
-- which reads no table, reads none of it). Written never
-- (message_parts_10_refuse).
CREATE OR REPLACE VIEW convo.message_parts WITH (security_invoker = true) AS
SELECT m.conversation_id,
       m.id AS message_id,
       (e.n - 1)::int AS ordinal,
       e.part ->> 'type' AS type,
       CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END
           AS tool_call_id,
       CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END AS tool_name,
       e.part AS body
  FROM convo.messages m
 CROSS JOIN LATERAL jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n);

COMMENT ON VIEW convo.message_parts IS
    'The parts of each message, one row a part, read from the message''s array (stored once); never written.';

-- conversation_head_log_10_no_forgery: only pgconvo's code (or a superuser)
-- writes head-log rows, so a reason or mover reaches the log only through the
-- API (a direct head UPDATE is logged as direct_update).
CREATE OR REPLACE TRIGGER conversation_head_log_10_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_10_no_forgery;

-- conversation_head_log_90_append_only: the head log is append-only, for
-- every role, the owner role included.
CREATE OR REPLACE TRIGGER conversation_head_log_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_90_append_only;

-- conversations_10_guard: id, owner and creation time never change, a head
-- once set is never unset, and outside pgconvo's code metadata never changes
-- (erasure is pgconvo's). pgconvo's own head moves skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_10_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR (OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL) OR current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_10_guard;

-- conversations_20_log_direct: a head moved outside pgconvo's code (a direct
-- UPDATE) writes exactly one head-log row, direct_update by the caller, in
-- the same transaction; pgconvo's own moves log themselves (log_head_move).
CREATE OR REPLACE TRIGGER conversations_20_log_direct
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner'))
    EXECUTE FUNCTION convo_private.log_direct_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_20_log_direct;

-- conversations_90_no_delete: conversations are never deleted, by any role.
CREATE OR REPLACE TRIGGER conversations_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_90_no_delete;

-- effect_transitions_90_fixed: the effect state machine is data, and fixed.
CREATE OR REPLACE TRIGGER effect_transitions_90_fixed
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.effect_transitions
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change('the fixed effect state machine');
ALTER TABLE convo.effect_transitions ENABLE ALWAYS TRIGGER effect_transitions_90_fixed;

-- erasure_places_10_no_forgery: only erasure (or a superuser) records where
-- it redacted.
CREATE OR REPLACE TRIGGER erasure_places_10_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_10_no_forgery;

-- erasure_places_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER erasure_places_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasure_places
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_90_append_only;

-- erasures_10_no_forgery: only erase_conversation and erase_owner (or a
-- superuser) record an erasure.
CREATE OR REPLACE TRIGGER erasures_10_no_forgery
    BEFORE INSERT ON convo.erasures
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_10_no_forgery;

-- erasures_90_append_only: the record of erasures is append-only.
CREATE OR REPLACE TRIGGER erasures_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasures
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_90_append_only;

-- generations_20_transition: outside pgconvo's code a generation starts
-- streaming and ends once, and its identity never changes.
CREATE OR REPLACE TRIGGER generations_20_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_20_transition;

-- generations_90_no_delete: generations are never deleted, by any role.
CREATE OR REPLACE TRIGGER generations_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_90_no_delete;

-- import_origins_10_no_forgery: only the import functions (or a superuser)
-- write origin records, the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_10_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_10_no_forgery;

-- import_origins_30_no_update: outside pgconvo's code an origin record is
-- never updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER import_origins_30_no_update
    BEFORE UPDATE ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (a source node changes only by erasure)');
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_30_no_update;

-- import_origins_90_append_only: origin records are never deleted.
CREATE OR REPLACE TRIGGER import_origins_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.import_origins
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_90_append_only;

-- imports_10_no_forgery: only the import functions (or a superuser) record
-- an import (who, when, the document's digest), so a record names the role
-- that really imported.
CREATE OR REPLACE TRIGGER imports_10_no_forgery
    BEFORE INSERT ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_10_no_forgery;

-- imports_30_no_update: outside pgconvo's code an import's record is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER imports_30_no_update
    BEFORE UPDATE ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (its source key and digest change only by erasure)');
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_30_no_update;

-- imports_90_append_only: the record of imports is never deleted.
CREATE OR REPLACE TRIGGER imports_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.imports
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_90_append_only;

-- keyed_parts_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- keyed parts, with their messages.
CREATE OR REPLACE TRIGGER keyed_parts_10_no_forgery
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_10_no_forgery;

-- keyed_parts_20_guard: a keyed part written outside pgconvo's code must be
-- its message's part at that ordinal (keyed_parts_guard).
CREATE OR REPLACE TRIGGER keyed_parts_20_guard
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.keyed_parts_guard();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_20_guard;

-- keyed_parts_90_append_only: a keyed part holds ids only, which erasure
-- keeps: it is never updated or deleted, by any role.
CREATE OR REPLACE TRIGGER keyed_parts_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.keyed_parts
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_90_append_only;

-- live_path_10_no_forgery: the derived index of the live paths is written
-- only by pgconvo's code (log_head_move, move_live_path), or a superuser.
CREATE OR REPLACE TRIGGER live_path_10_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE ON convo.live_path
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_10_no_forgery;

-- message_parts_10_refuse: convo.message_parts is a view of the parts of the
-- messages (their array, one row a part): it is never written.
CREATE OR REPLACE TRIGGER message_parts_10_refuse
    INSTEAD OF INSERT OR UPDATE OR DELETE ON convo.message_parts
    FOR EACH ROW
    EXECUTE FUNCTION convo_private.refuse_change('a view of the messages'' parts (append-only)');

-- messages_20_guard: a message inserted outside pgconvo's code must be placed
-- as the tree places it, with well-formed parts (messages_guard); pgconvo's
-- own writes (write_messages) skip it in its WHEN.
CREATE OR REPLACE TRIGGER messages_20_guard
    BEFORE INSERT ON convo.messages
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.messages_guard();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_20_guard;

-- messages_30_no_update: outside pgconvo's code a message is never updated;
-- pgconvo's only update of one is erasure's redaction (erase_content).
CREATE OR REPLACE TRIGGER messages_30_no_update
    BEFORE UPDATE ON convo.messages
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (content changes only by erasure)');
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_30_no_update;

-- messages_90_append_only: messages are never deleted, by any role.
CREATE OR REPLACE TRIGGER messages_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_90_append_only;

-- tool_effect_calls_10_no_forgery: only pgconvo's code (or a superuser) links
-- a call to its decision.
CREATE OR REPLACE TRIGGER tool_effect_calls_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_10_no_forgery;

-- tool_effect_calls_90_append_only: a call's decision never changes.
CREATE OR REPLACE TRIGGER tool_effect_calls_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only;

-- tool_effect_events_10_no_forgery: only pgconvo's code (or a superuser)
-- writes the event log.
CREATE OR REPLACE TRIGGER tool_effect_events_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_10_no_forgery;

-- tool_effect_events_30_no_update: outside pgconvo's code an event is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER tool_effect_events_30_no_update
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (evidence changes only by erasure)');
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_30_no_update;

-- tool_effect_events_90_append_only: events are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_effect_events_90_append_only
    BEFORE DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_90_append_only;

-- tool_effects_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- ledger.
CREATE OR REPLACE TRIGGER tool_effects_10_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_10_no_forgery;

-- tool_effects_20_transition: outside pgconvo's code an effect changes only
-- by a transition of the state machine (effect_transitions), CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_effects_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_20_transition;

-- tool_effects_30_log_direct: a transition made outside pgconvo's code gets
-- its event, by the caller; pgconvo's own transitions log themselves.
CREATE OR REPLACE TRIGGER tool_effects_30_log_direct
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_log_direct();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_30_log_direct;

-- tool_effects_90_no_delete: effects are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_effects_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_90_no_delete;

-- tool_receipts_10_no_forgery: only pgconvo's code (or a superuser) writes
-- receipts.
CREATE OR REPLACE TRIGGER tool_receipts_10_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_10_no_forgery;

-- tool_receipts_20_transition: outside pgconvo's code a receipt is filed
-- pending and ends once, CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_receipts_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_20_transition;

-- tool_receipts_90_no_delete: receipts are never deleted, by any role.
CREATE OR REPLACE TRIGGER tool_receipts_90_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_receipts
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_90_no_delete;

-- tools_10_no_forgery: only register_tool (or a superuser) adds to the
-- allowlist.
CREATE OR REPLACE TRIGGER tools_10_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_10_no_forgery;

-- tools_90_append_only: a registered tool version is frozen, for every role.
CREATE OR REPLACE TRIGGER tools_90_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT
    EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_90_append_only;

-- Every live path, from the tree and its head.
SELECT convo_private.rebuild_live_path(c.id) FROM convo.conversations c WHERE c.head_message_id IS NOT NULL;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
