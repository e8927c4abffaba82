-- 0023_one_write_path down: reverses 0023_one_write_path.up.sql.

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

-- append_message: a child of the current head (a root if there is none), and
-- the head moves to it. A repeat with the same p_message_id is recognised
-- before any other check and returns the first result, writing nothing.
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
    IF convo_private.is_retry(p_conversation_id, p_message_id, p_role, p_parts, NULL, false) THEN
        RETURN p_message_id;
    END IF;
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts)
    VALUES (p_conversation_id, v_id, v_head, p_role, p_parts);
    PERFORM convo_private.move_head_to(p_conversation_id, v_id, 'append', p_moved_by);
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
    UPDATE convo.tool_receipts r
       SET status = 'applied', result_ref = p_result_ref, http_status = p_http_status, settled_at = clock_timestamp()
     WHERE r.id = p_receipt_id;
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
        INSERT INTO convo.tool_receipts (id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest, deadline_at)
        VALUES (gen_random_uuid(), p_owner_id, p_idempotency_key, v_tool.name, v_tool.version, p_request, v_digest,
                clock_timestamp() + v_tool.deadline)
        ON CONFLICT (owner_id, idempotency_key) DO NOTHING
        RETURNING * INTO v_receipt;
        IF FOUND THEN
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
    UPDATE convo.generations g
       SET state = 'cancelled', finished_at = clock_timestamp()
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
    PERFORM convo_private.set_effect_context(convo_private.caller(), p_evidence);
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
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
    -- 'regenerate' when the prompt already has an answer; messages_fill_tree
    -- makes any other later child a 'branch'.
    v_reason := CASE WHEN EXISTS (SELECT 1 FROM convo.messages c
                                   WHERE c.conversation_id = p_conversation_id
                                     AND c.parent_id = v_generation.prompt_message_id
                                     AND c.role = 'assistant') THEN 'regenerate' END;
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, v_message, v_generation.prompt_message_id, 'assistant', v_reason, p_parts);
    UPDATE convo.generations g
       SET state = 'completed', message_id = v_message, usage = p_usage, finish_reason = p_finish_reason,
           finished_at = clock_timestamp()
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id;
    -- A head moved away and back again counts as unmoved: the user is looking
    -- at the prompt the answer is for.
    IF v_head IS NOT DISTINCT FROM v_generation.head_at_begin THEN
        PERFORM convo_private.move_head_to(p_conversation_id, v_message,
                                   CASE WHEN v_reason = 'regenerate' THEN 'regenerate' ELSE 'append' END, NULL);
    END IF;
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
    v_effect convo.tool_effects;
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
    PERFORM convo_private.set_effect_context(p_confirmed_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'pending',
           idempotency_key = 'rerun:' || e.id || ':of:' || e.repeats_effect_id,
           confirmed_by = p_confirmed_by,
           confirmed_at = clock_timestamp(),
           deadline_at = clock_timestamp() + (SELECT t.deadline FROM convo.tools t
                                               WHERE t.name = e.tool_name AND t.version = e.tool_version)
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
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
        INSERT INTO convo.messages (conversation_id, id, role, parts) VALUES (v_id, v_root, 'system', v_parts);
        PERFORM convo_private.move_head_to(v_id, v_root, 'create', NULL);
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
    PERFORM convo_private.set_effect_context(p_declined_by, '{}');
    UPDATE convo.tool_effects e
       SET state = 'failed', error_code = 'declined', settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
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
    SELECT p.tool_name INTO v_tool_name FROM convo.message_parts p
     WHERE p.conversation_id = p_conversation_id AND p.type = 'tool_use' AND p.tool_call_id = p_tool_call_id;
    IF NOT FOUND THEN
        PERFORM convo_private.raise_not_found('tool call', p_tool_call_id, p_conversation_id,
            (SELECT p.conversation_id FROM convo.message_parts p
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
    -- Lock the owner's conversations in one order, as every writer would.
    PERFORM 1 FROM convo.conversations c WHERE c.owner_id = p_owner_id ORDER BY c.id FOR NO KEY UPDATE;
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
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'p_now is required' USING ERRCODE = 'CV011', DETAIL = 'p_now NULL';
    END IF;
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = 504, error_code = 'deadline_exceeded', settled_at = clock_timestamp()
     WHERE r.status = 'pending' AND r.deadline_at < p_now;
    GET DIAGNOSTICS v_count = ROW_COUNT;
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
    UPDATE convo.generations g
       SET state = 'failed', error_code = p_error_code, error = p_error, finished_at = clock_timestamp()
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
    UPDATE convo.tool_receipts r
       SET status = 'failed', http_status = p_http_status, error_code = p_error_code, settled_at = clock_timestamp()
     WHERE r.id = p_receipt_id;
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

    v_code := CASE
        WHEN clock_timestamp() > v_receipt.deadline_at THEN 'deadline_exceeded'
        ELSE convo_private.receipt_arguments_error(v_receipt.tool_name, v_receipt.tool_version, p_arguments, p_expected)
    END;
    UPDATE convo.tool_receipts r
       SET arguments = p_arguments, expected = p_expected, arguments_valid = (v_code IS NULL),
           filled_at = clock_timestamp(),
           status = CASE WHEN v_code IS NULL THEN 'pending' ELSE 'failed' END,
           http_status = CASE WHEN v_code IS NULL THEN NULL WHEN v_code = 'deadline_exceeded' THEN 504 ELSE 422 END,
           error_code = v_code,
           settled_at = CASE WHEN v_code IS NOT NULL THEN clock_timestamp() END
     WHERE r.id = p_receipt_id
    RETURNING r.status, r.http_status, r.error_code INTO v_receipt.status, v_receipt.http_status, v_receipt.error_code;
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
-- written here. The rows go in through the tables' own triggers, in an
-- order they accept (parents first, effects through their transitions).
-- A repeat is a no-op returning the id; the id with other content is CV009.
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
    v_steps     int;
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

        -- From here the triggers keep the exported stamps (is_import).
        INSERT INTO convo_private.importing (conversation_id) VALUES (v_id);
        PERFORM set_config('convo.importing', v_id::text, true);

        -- Origins first, as the imports write them (the foreign key to the
        -- message is deferred).
        INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
        SELECT v_id, o.message_id, o.source, o.node_key, o.node
          FROM jsonb_populate_recordset(NULL::convo.import_origins, p_export -> 'origins') o;

        INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at, import_id)
        SELECT v_id, m.id, m.parent_id, m.role, m.branch_reason, m.parts, m.created_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.messages, p_export -> 'messages') m
         ORDER BY m.depth, m.sibling_index;

        -- The head log, numbered here in the document's order.
        INSERT INTO convo.conversation_head_log
            (conversation_id, head_message_id, previous_head_id, moved_at, moved_by, reason, source_seq, import_id)
        SELECT v_id, l.head_message_id, l.previous_head_id, l.moved_at, l.moved_by, l.reason, l.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.conversation_head_log, p_export -> 'head_log') l
         ORDER BY l.seq;
        UPDATE convo.conversations c SET head_message_id = (v_conv ->> 'head_message_id')::uuid
         WHERE c.id = v_id AND v_conv ->> 'head_message_id' IS NOT NULL;

        -- Generations begin streaming, then end as they did.
        INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, params,
                                       request_digest, state, started_at, import_id)
        SELECT v_id, g.id, g.prompt_message_id, g.head_at_begin, g.model, g.params, g.request_digest, 'streaming', g.started_at,
               v_import
          FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations') g;
        UPDATE convo.generations x
           SET state = g.state, message_id = g.message_id, usage = g.usage, finish_reason = g.finish_reason,
               error_code = g.error_code, error = g.error, finished_at = g.finished_at
          FROM jsonb_populate_recordset(NULL::convo.generations, p_export -> 'generations') g
         WHERE x.conversation_id = v_id AND x.id = g.id AND g.state IS DISTINCT FROM 'streaming';

        -- Effects enter at their first event's state, each column a later
        -- transition sets still unset (a confirmed re-run under its scope
        -- key), then take each later event as an UPDATE that the state
        -- machine checks (tool_effects_transition), in the order of
        -- requested_at, so that a re-run follows the effect it repeats. The
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
          LEFT JOIN (SELECT v.effect_id,
                            (array_agg(v.to_state ORDER BY v.seq))[1] AS first_state,
                            array_agg(c.col) FILTER (WHERE c.col IS NOT NULL) AS later
                       FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v
                       LEFT JOIN convo.effect_transitions tr ON tr.from_state = v.from_state AND tr.to_state = v.to_state
                                                             AND v.from_state <> 'requested'
                       LEFT JOIN LATERAL unnest(tr.changes) c (col) ON true
                      GROUP BY v.effect_id) s ON s.effect_id::text = j.elem ->> 'id'
          CROSS JOIN LATERAL jsonb_populate_record(NULL::convo.tool_effects,
              j.elem || jsonb_build_object('conversation_id', v_id, 'state', s.first_state, 'import_id', v_import,
                                           'scope_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                    || CASE WHEN s.first_state = 'awaiting_confirmation' OR q.decision = 'rejected'
                            THEN jsonb_build_object('idempotency_key', coalesce(to_jsonb(q.scope_key), j.elem -> 'scope_key'))
                            ELSE '{}' END
                    || coalesce((SELECT jsonb_object_agg(u.col, CASE WHEN u.col = 'deadline_at' THEN j.elem -> 'deadline_at'
                                                                     ELSE 'null' END)
                                   FROM unnest(s.later) u (col) WHERE u.col <> 'idempotency_key'), '{}')) r
         ORDER BY r.requested_at, r.id;
        SELECT max(n) INTO v_steps
          FROM (SELECT count(*) AS n FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v
                 GROUP BY v.effect_id) x;
        FOR v_step IN 2 .. coalesce(v_steps, 1) LOOP
            UPDATE convo.tool_effects x
               SET state = s.to_state,
                   idempotency_key = CASE WHEN 'idempotency_key' = ANY (s.changes) THEN f.idempotency_key ELSE x.idempotency_key END,
                   deadline_at = CASE WHEN 'deadline_at' = ANY (s.changes) THEN f.deadline_at ELSE x.deadline_at END,
                   confirmed_by = CASE WHEN 'confirmed_by' = ANY (s.changes) THEN f.confirmed_by ELSE x.confirmed_by END,
                   confirmed_at = CASE WHEN 'confirmed_at' = ANY (s.changes) THEN f.confirmed_at ELSE x.confirmed_at END,
                   settled_at = CASE WHEN 'settled_at' = ANY (s.changes) THEN f.settled_at ELSE x.settled_at END,
                   external_ref = CASE WHEN 'external_ref' = ANY (s.changes) THEN f.external_ref ELSE x.external_ref END,
                   http_status = CASE WHEN 'http_status' = ANY (s.changes) THEN f.http_status ELSE x.http_status END,
                   error_code = CASE WHEN 'error_code' = ANY (s.changes) THEN f.error_code ELSE x.error_code END,
                   compensated_by = CASE WHEN 'compensated_by' = ANY (s.changes) THEN f.compensated_by ELSE x.compensated_by END,
                   compensated_at = CASE WHEN 'compensated_at' = ANY (s.changes) THEN f.compensated_at ELSE x.compensated_at END
              FROM (SELECT v.effect_id, v.to_state, tr.changes
                      FROM (SELECT v.*, row_number() OVER (PARTITION BY v.effect_id ORDER BY v.seq) AS n
                              FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v) v
                      JOIN convo.effect_transitions tr ON tr.from_state = v.from_state AND tr.to_state = v.to_state
                     WHERE v.n = v_step) s,
                   jsonb_populate_recordset(NULL::convo.tool_effects, p_export -> 'effects') f
             WHERE x.conversation_id = v_id AND x.id = s.effect_id AND f.id = s.effect_id;
        END LOOP;

        INSERT INTO convo.tool_effect_calls
        SELECT r.* FROM jsonb_array_elements(p_export -> 'tool_calls') j (elem),
               LATERAL jsonb_populate_record(NULL::convo.tool_effect_calls,
                                             j.elem || jsonb_build_object('conversation_id', v_id, 'import_id', v_import)) r;
        -- The event log, numbered here in the document's order.
        INSERT INTO convo.tool_effect_events
            (conversation_id, effect_id, from_state, to_state, actor, evidence, at, source_seq, import_id)
        SELECT v_id, v.effect_id, v.from_state, v.to_state, v.actor, v.evidence, v.at, v.seq, v_import
          FROM jsonb_populate_recordset(NULL::convo.tool_effect_events, p_export -> 'effect_events') v
         ORDER BY v.seq;

        -- The record of earlier erasures, recorded by this transaction.
        INSERT INTO convo.erasures (owner_id, id, conversation_id, reason, erased_by, erased_at, import_id)
        SELECT r.owner_id, r.id, v_id, r.reason, r.erased_by, r.erased_at, v_import
          FROM jsonb_populate_recordset(NULL::convo.erasures, p_export -> 'erasures') r;
        INSERT INTO convo.erasure_places (owner_id, erasure_id, place, rows_redacted)
        SELECT j.elem ->> 'owner_id', (j.elem ->> 'id')::uuid, p.place, p.rows_redacted
          FROM jsonb_array_elements(p_export -> 'erasures') j (elem),
               LATERAL jsonb_to_recordset(j.elem -> 'places') p (place text, rows_redacted bigint);

        DELETE FROM convo_private.importing i WHERE i.conversation_id = v_id AND i.xact = pg_current_xact_id();
        PERFORM set_config('convo.importing', '', true);

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

-- move_head: a branch switch: the head names any message of the conversation.
-- p_reason is free text in lower snake case; 'create' and 'direct_update'
-- are kept for the database's own log rows.
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
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    PERFORM convo_private.move_head_to(p_conversation_id, p_message_id, p_reason, p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';

-- path: the live conversation, root to head: what a chat UI reads on every
-- page load. One index range scan of convo.live_path (the derived index of
-- the live path, kept by every head move) joined to the messages
-- (live_path_rows), so it costs close to reading a flat list however often
-- the conversation was edited.
-- CV002 for an unknown conversation; empty before the first message.
CREATE OR REPLACE FUNCTION convo.path(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN QUERY SELECT * FROM convo_private.live_path_rows(p_conversation_id);
END;
$$;

COMMENT ON FUNCTION convo.path(uuid) IS
    'The live path, root to head (depth 0 first), with parts and sibling position ("< 2/3 >").';

-- path_at: the path that was live at an instant ("which conversation did the
-- customer see at 14:03"), with sibling counts as they were then; empty if
-- there was no head yet. When nothing on the live path changed after p_at
-- (the head then is the head now, and no live_path row is newer), that path
-- is the live-path index, read as path reads it; otherwise it is walked from
-- the tree (path_from).
CREATE OR REPLACE FUNCTION convo.path_at(p_conversation_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head uuid := convo.head_at(p_conversation_id, p_at);
BEGIN
    IF v_head IS NOT DISTINCT FROM (convo_private.conversation_ref(p_conversation_id)).head_message_id
       AND NOT EXISTS (SELECT 1 FROM convo.live_path l
                        WHERE l.conversation_id = p_conversation_id AND l.since > p_at) THEN
        RETURN QUERY SELECT * FROM convo_private.live_path_rows(p_conversation_id);
    ELSE
        RETURN QUERY SELECT * FROM convo_private.path_from(p_conversation_id, v_head, p_at);
    END IF;
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
    -- session_replication_role nor a plain ENABLE skips it), by what it guards.
    FOR check_name, v_bad IN
        SELECT g.guards, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR tg.tgenabled <> 'A')
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name
               AND tg.tgrelid = to_regclass('convo.' || g.table_name)
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
    -- the path from the root to each head, with its sibling counts, walked
    -- from the tree here. Repair: convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM convo_private.path_from(c.id, c.head_message_id, NULL) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.depth = p.depth
                WHERE p.message_id IS DISTINCT FROM l.message_id OR p.sibling_count IS DISTINCT FROM l.sibling_count) d
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
          JOIN convo.message_parts p
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
      FROM unnest(ARRAY['conversations', 'messages', 'message_parts', 'conversation_head_log', 'generations',
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
    PERFORM convo_private.set_effect_context(convo_private.caller(), p_evidence);
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- add_sibling: the shared write path of edit_and_resend and regenerate: a new
-- message beside an existing one (same parent), the head moved to it. No
-- existing row changes; the old subtree simply stops being on the path.
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
    IF convo_private.is_retry(p_conversation_id, p_new_message_id, p_role, p_parts, v_original.parent_id, true) THEN
        RETURN p_new_message_id;
    END IF;
    PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    IF v_original.role <> p_role THEN
        RAISE EXCEPTION '% takes a message of role %; message % has role %',
                CASE p_branch_reason WHEN 'user_edit' THEN 'edit_and_resend' ELSE 'regenerate' END,
                p_role, p_message_id, v_original.role
            USING ERRCODE = 'CV004', DETAIL = format('message %s, conversation %s', p_message_id, p_conversation_id);
    END IF;
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, v_id, v_original.parent_id, p_role, p_branch_reason, p_parts);
    PERFORM convo_private.move_head_to(p_conversation_id, v_id, p_branch_reason, p_moved_by);
    RETURN v_id;
END;
$$;

-- conversations_guard: of a conversation only the head may change (and its
-- metadata by an erasure: conversations_erasure_only); its id, owner and
-- creation time are fixed, and a head once set is never unset (the head
-- always names a message).
-- It runs as the role that issued the UPDATE (not SECURITY DEFINER), so it
-- can tell pgconvo's own move (current_user convo_owner, reason and mover
-- named by move_head_to) from any other: that one is marked direct_update by
-- the caller here (the role SET ROLE set, else the login role: the
-- expression of convo_private.caller, written out because the updating role
-- may not reach convo_private), whatever settings the session holds, for log_head_move.
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
    IF NEW.head_message_id IS DISTINCT FROM OLD.head_message_id AND current_user <> 'convo_owner' THEN
        PERFORM set_config('convo.head_reason', 'direct_update', true);
        PERFORM set_config('convo.head_moved_by', coalesce(nullif(current_setting('role'), 'none'), session_user::text), true);
    END IF;
    RETURN NEW;
END;
$$;

-- erase_content: one erasure, recorded first in convo.erasures (which is
-- what lets the redaction past the append-only and state-machine triggers:
-- is_erasure), then written: every row of the conversation that holds
-- content becomes its redact_row, or, with no conversation, every receipt of
-- the owner. Rows already redacted are left alone, so a repeat changes
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
            ('message_parts', 'body', 'conversation_id'),
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
-- the same rows give the same text in any session and any database. The
-- tools are the versions the ledger's calls and effects were checked
-- against; the imports are the conversation's record of imports.
CREATE OR REPLACE FUNCTION convo_private.export_of(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'
SET IntervalStyle = 'iso_8601'
BEGIN ATOMIC
    SELECT jsonb_build_object(
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
        'erasures', coalesce((SELECT jsonb_agg(to_jsonb(r) - 'conversation_id' - 'xact'
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
     WHERE c.id = p_conversation_id;
END;

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
BEGIN
    WHILE v_id IS NOT NULL LOOP
        SELECT m.parent_id, m.role INTO v_parent, v_role
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF v_role = 'user' AND EXISTS (SELECT 1 FROM convo.message_parts pp
                                        WHERE pp.conversation_id = p_conversation_id AND pp.message_id = v_id
                                          AND pp.type <> 'tool_result') THEN
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
-- at all, and its answer is an assistant child of its prompt. CV006. An
-- erasure (is_erasure) empties its params, digest, usage and error detail.
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
    IF NEW.state = OLD.state AND convo_private.is_erasure('generations', to_jsonb(OLD), to_jsonb(NEW)) THEN
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

    -- While the import's marker row names the conversation (is_import, as
    -- for import_conversation), messages_fill_tree keeps the messages' times
    -- and record_tool_call writes no ledger row. Origins (their foreign key
    -- is deferred), then the messages, parents before children, siblings in
    -- order, then the head.
    INSERT INTO convo_private.importing (conversation_id) VALUES (p_conversation_id);
    PERFORM set_config('convo.importing', p_conversation_id::text, true);
    INSERT INTO convo.import_origins (conversation_id, message_id, source, node_key, node)
    SELECT p_conversation_id, x.id, p_source, x.key, x.node
      FROM unnest(m_id, m_key, m_node) AS x (id, key, node);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts, created_at, import_id)
    SELECT p_conversation_id, x.id, x.parent, x.role, x.reason, x.parts, x.at, v_import
      FROM unnest(m_id, m_parent, m_role, m_reason, m_parts, m_at) WITH ORDINALITY AS x (id, parent, role, reason, parts, at, n)
     ORDER BY x.n;
    -- The head's one move, 'import', written here as the import's own row;
    -- the head moves while the marker is there, so only the live path follows.
    IF v_head IS NOT NULL THEN
        INSERT INTO convo.conversation_head_log (conversation_id, head_message_id, reason, import_id)
        VALUES (p_conversation_id, v_head, 'import', v_import);
        UPDATE convo.conversations c SET head_message_id = v_head WHERE c.id = p_conversation_id;
    END IF;
    DELETE FROM convo_private.importing i WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id();
    PERFORM set_config('convo.importing', '', true);
    RETURN p_conversation_id;
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
               l.tool_name, l.tool_version, p.tool_name AS part_tool, p.body -> 'input' AS input,
               p.body::text = convo_private.redact_part(p.body)::text AS erased,
               t.effectful, t.idempotency_scope AS scope
          FROM convo.tool_effect_calls l
          JOIN convo.message_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
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

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by the caller); it clears them after use.
-- An import (is_import) writes the exported log rows instead. Every move,
-- an import's too, moves the live-path index (move_live_path) with the head.
CREATE OR REPLACE FUNCTION convo_private.log_head_move()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason   text := nullif(current_setting('convo.head_reason', true), '');
    v_moved_by text := nullif(current_setting('convo.head_moved_by', true), '');
BEGIN
    PERFORM convo_private.move_live_path(NEW.id, NEW.head_message_id, OLD.head_message_id);
    -- An import writes the exported head log itself, the move to its head included.
    IF convo_private.is_import(NEW.id) THEN
        RETURN NULL;
    END IF;
    IF v_reason IS NULL THEN
        v_reason := 'direct_update';
        v_moved_by := convo_private.caller();
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- move_live_path: keeps convo.live_path, the derived index of the live path,
-- equal to the path from the root to p_head_id. An append (the new head a
-- child of the old one, the last row) is one INSERT. Any other move walks up
-- from the new head only until it meets a message already on the live path
-- (the fork), writes the walked rows over those at their depths (an upsert:
-- the same key, so a HOT update, no index churn) and drops the rows below
-- the new head: a switch costs the messages that change, never the whole
-- conversation. Its statements are key lookups, so their generic plans are
-- right; without force_generic_plan PostgreSQL kept planning them anew on
-- every call (the arrays and the range look worth it), about 150 µs a move.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid, p_old_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_id         uuid := p_head_id;
    v_depth      int;
    v_parent     uuid;
    v_head_depth int;
    v_old_depth  int;
    v_ids        uuid[] := '{}';
    v_depths     int[] := '{}';
    v_parents    uuid[] := '{}';
BEGIN
    SELECT m.depth, m.parent_id INTO v_head_depth, v_parent
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id;
    IF p_head_id IS NOT NULL AND v_parent IS NOT DISTINCT FROM p_old_head_id AND p_old_head_id IS NOT NULL THEN
        INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
        VALUES (p_conversation_id, v_head_depth, p_head_id,
                (SELECT max(s.sibling_index) FROM convo.messages s
                  WHERE s.conversation_id = p_conversation_id AND s.parent_id = v_parent));
        RETURN;
    END IF;
    v_depth := v_head_depth;
    WHILE v_id IS NOT NULL LOOP
        IF EXISTS (SELECT 1 FROM convo.live_path l
                    WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth AND l.message_id = v_id) THEN
            EXIT;
        END IF;
        v_ids := array_append(v_ids, v_id);
        v_depths := array_append(v_depths, v_depth);
        v_parents := array_append(v_parents, v_parent);
        IF v_parent IS NULL OR EXISTS (
               SELECT 1 FROM convo.live_path l
                WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth - 1 AND l.message_id = v_parent) THEN
            EXIT;
        END IF;
        v_id := v_parent;
        SELECT m.depth, m.parent_id INTO v_depth, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        INSERT INTO convo.live_path AS l (conversation_id, depth, message_id, sibling_count)
        SELECT p_conversation_id, w.depth, w.id,
               coalesce((SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE s.conversation_id = p_conversation_id AND s.parent_id = w.parent_id),
                        (SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE w.parent_id IS NULL AND s.conversation_id = p_conversation_id AND s.parent_id IS NULL))
          FROM unnest(v_ids, v_depths, v_parents) AS w (id, depth, parent_id)
            ON CONFLICT (conversation_id, depth) DO UPDATE
           SET message_id = excluded.message_id, sibling_count = excluded.sibling_count, since = clock_timestamp();
    END IF;
    -- The rows below the new head, if the old path went deeper.
    SELECT m.depth INTO v_old_depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_old_head_id;
    IF p_head_id IS NULL OR v_old_depth > v_head_depth THEN
        DELETE FROM convo.live_path l
         WHERE l.conversation_id = p_conversation_id AND l.depth > coalesce(v_head_depth, -1);
    END IF;
END;
$$;

SELECT convo_private.apply_grants();

-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard). Any other UPDATE (an
-- erasure, an identical row) sends nothing. The payload holds the receipt's
-- id, status and whether it is filled: never its owner, key, request or
-- arguments, since listeners may belong to any owner.
CREATE OR REPLACE FUNCTION convo_private.notify_receipt()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status
       AND (NEW.arguments IS NULL) = (OLD.arguments IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'receipt', 'receipt_id', NEW.id, 'state', NEW.status,
        'filled', NEW.arguments IS NOT NULL)::text);
    RETURN NULL;
END;
$$;

-- path_from: the path from the root to p_head_id, depth 0 first: one index
-- range scan (branch_id, depth) per segment from path_segments, reading the
-- stored parts of each message, so it costs close to reading a flat list.
-- sibling_count comes from the few siblings after the first (messages_forks_idx),
-- counting, when p_at is given, only those created by then: the "< 1/2 >" the
-- customer saw at that instant (sibling_index is creation order, so it holds).
CREATE OR REPLACE FUNCTION convo_private.path_from(p_conversation_id uuid, p_head_id uuid, p_at timestamptz)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH forks AS MATERIALIZED (
        SELECT f.parent_id, max(f.sibling_index) AS sibling_count
          FROM convo.messages f
         WHERE f.conversation_id = p_conversation_id AND f.sibling_index > 1
           AND (p_at IS NULL OR f.created_at <= p_at)
         GROUP BY f.parent_id
    )
    SELECT m.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           coalesce((SELECT f.sibling_count FROM forks f WHERE f.parent_id IS NOT DISTINCT FROM m.parent_id), 1)::int
      FROM convo_private.path_segments(p_conversation_id, p_head_id) s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     ORDER BY m.depth;
END;
$$;

-- rebuild_live_path: rebuilds convo.live_path for one conversation from the
-- tree and its head, which stay the truth (path_from, one index range scan
-- per branch point). The migration that made the index fills it with this,
-- and it is the repair for self_check's live_path check.
CREATE OR REPLACE FUNCTION convo_private.rebuild_live_path(p_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
    SELECT p_conversation_id, p.depth, p.message_id, p.sibling_count
      FROM convo.conversations c,
           convo_private.path_from(c.id, c.head_message_id, NULL) p
     WHERE c.id = p_conversation_id;
END;
$$;

-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner. The owner
-- check is a condition of the locking statement: another owner's receipt is
-- never locked or waited for.
CREATE OR REPLACE FUNCTION convo_private.receipt_ref(p_receipt_id uuid)
RETURNS convo.tool_receipts
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_receipt convo.tool_receipts;
BEGIN
    IF p_receipt_id IS NULL THEN
        RAISE EXCEPTION 'p_receipt_id is required' USING ERRCODE = 'CV011', DETAIL = 'receipt NULL';
    END IF;
    SELECT * INTO v_receipt FROM convo.tool_receipts r
     WHERE r.id = p_receipt_id AND convo_private.writes_owner(r.owner_id)
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;

-- record_tool_call: writes a tool call's ledger decision in the transaction
-- that stores its tool_use part, before any request can leave, whatever
-- function (or statement) appended the assistant message, against the
-- tool's latest version at that moment, which the call's row names (so the
-- decision can be checked against it). An unregistered tool gets no row
-- (effect_for_call answers CV007, even once it is registered), and neither
-- does a call an import is writing (is_import): the imports from other
-- products write none, that history happened elsewhere; import_conversation
-- writes its exported ledger rows itself.
--   replay:   a registered tool without effects: free to run again, no effect.
--   rejected: the input fails the tool's frozen schema: a failed effect, 422.
--   reuse:    an effect already has this call's scope key: the call is linked to it.
--   confirm:  a re-run (same tool, same fork point, an earlier call on another
--             branch) under a new key: held in awaiting_confirmation.
--   execute:  a new pending effect under the scope key.
CREATE OR REPLACE FUNCTION convo_private.record_tool_call()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned afresh for each call: a message of N calls grows the ledger
-- within one statement, and a plan cached while the tables were nearly
-- empty (a sequential scan) would make each call cost the calls before it.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_tool      convo.tools;
    v_input     jsonb := NEW.body -> 'input';
    v_errors    text[];
    v_fork      uuid;
    v_scope_key text;
    v_effect    convo.tool_effects;
    v_repeats   uuid;
    v_decision  text;
    v_money     record;
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_tool FROM convo.tools t WHERE t.name = NEW.tool_name ORDER BY t.version DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_fork := convo_private.fork_point_of(NEW.conversation_id, NEW.message_id);
    v_errors := CASE WHEN v_tool.effectful THEN convo.args_errors(v_tool.args_schema, v_input) END;
    IF NOT v_tool.effectful THEN
        v_decision := 'replay';
    ELSIF cardinality(v_errors) > 0 THEN
        -- Rejected calls never deduplicate: the key is the call's own.
        v_decision := 'rejected';
        v_scope_key := convo_private.scope_key('rejected', NEW.conversation_id, NEW.tool_call_id, NULL, NULL, NULL);
    ELSE
        v_scope_key := convo_private.scope_key(v_tool.idempotency_scope, NEW.conversation_id, NEW.tool_call_id,
                                               v_fork, v_tool.name, v_input);
        SELECT * INTO v_effect FROM convo.tool_effects e
         WHERE e.conversation_id = NEW.conversation_id AND e.scope_key = v_scope_key;
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
             WHERE l.conversation_id = NEW.conversation_id
               AND (l.fork_point_id = v_fork OR (v_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < NEW.message_id OR l.message_id > NEW.message_id)
               AND e.tool_name = NEW.tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_path(NEW.conversation_id, l.message_id, NEW.message_id)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1;
            v_decision := CASE WHEN v_repeats IS NULL THEN 'execute' ELSE 'confirm' END;
        END IF;
    END IF;

    IF v_decision NOT IN ('reuse', 'replay') THEN
        SELECT * INTO v_money FROM convo_private.effect_money(v_input, v_tool.amount_arg, v_tool.currency_arg);
        PERFORM convo_private.set_effect_context(NULL, CASE WHEN v_decision = 'rejected'
                                                    THEN jsonb_build_object('errors', to_jsonb(v_errors)) END);
        INSERT INTO convo.tool_effects
            (conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
             amount_minor, currency, repeats_effect_id, deadline_at, settled_at, http_status, error_code)
        VALUES
            (NEW.conversation_id, gen_random_uuid(), v_tool.name, v_tool.version, v_scope_key, v_scope_key,
             CASE v_decision WHEN 'execute' THEN 'pending' WHEN 'confirm' THEN 'awaiting_confirmation' ELSE 'failed' END,
             v_input, v_money.amount_minor, v_money.currency,
             v_repeats,
             clock_timestamp() + v_tool.deadline,
             CASE WHEN v_decision = 'rejected' THEN clock_timestamp() END,
             CASE WHEN v_decision = 'rejected' THEN 422 END,
             CASE WHEN v_decision = 'rejected' THEN 'invalid_arguments' END)
        RETURNING * INTO v_effect;
        PERFORM convo_private.set_effect_context(NULL, NULL);
    END IF;
    INSERT INTO convo.tool_effect_calls
        (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision, fork_point_id, tool_name, tool_version)
    VALUES (NEW.conversation_id, NEW.tool_call_id, NEW.message_id, NEW.ordinal, v_effect.id, v_decision, v_fork,
            v_tool.name, v_tool.version);
    RETURN NULL;
END;
$$;

-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
-- Rows are compared by their text, since jsonb's = calls 500 and 500.000 equal.
-- An erasure (is_erasure) empties the arguments and changes nothing else.
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
        IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text
           AND NOT convo_private.is_erasure('tool_effects', to_jsonb(OLD), to_jsonb(NEW)) THEN
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
-- and 500.000 equal). CV006. An erasure of its owner (is_erasure) empties
-- its request, arguments and expected values.
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
    IF to_jsonb(NEW)::text = to_jsonb(OLD)::text
       OR (NEW.status = OLD.status AND convo_private.is_erasure('tool_receipts', to_jsonb(OLD), to_jsonb(NEW))) THEN
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

-- max_detail_bytes: the size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_detail_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_detail_bytes() IS 'Size cap on generation params, usage and errors, and effect evidence (256 KiB of JSON each); larger input raises CV010.';

-- max_message_bytes: the size cap on the parts of a whole message (4 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_message_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 4194304;

COMMENT ON FUNCTION convo.max_message_bytes() IS 'Size cap in bytes on the parts of a whole message (4 MiB of JSON); larger input raises CV010.';

-- max_metadata_bytes: the size cap on conversation metadata (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_metadata_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_metadata_bytes() IS 'Size cap in bytes on conversation metadata (256 KiB of JSON); larger input raises CV010.';

-- max_part_bytes: the size cap on one message part (1 MiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_part_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 1048576;

COMMENT ON FUNCTION convo.max_part_bytes() IS 'Size cap in bytes on one message part (1 MiB of JSON); larger input raises CV010.';

-- max_ref_length: the size cap on an external reference, result reference or error code (characters);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_ref_length()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 1024;

COMMENT ON FUNCTION convo.max_ref_length() IS 'Size cap on an external reference, result reference or error code (characters); larger input raises CV010.';

-- max_request_bytes: the size cap on the request or arguments of a receipt (256 KiB of JSON);
-- larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_request_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_request_bytes() IS 'Size cap on the request or arguments of a receipt (256 KiB of JSON); larger input raises CV010.';

-- max_tool_input_bytes: the size cap on one tool_use input (256 KiB of JSON), in bytes of
-- jsonb's text form; larger input raises CV010. A function so clients can read it.
CREATE OR REPLACE FUNCTION convo.max_tool_input_bytes()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 262144;

COMMENT ON FUNCTION convo.max_tool_input_bytes() IS 'Size cap in bytes on one tool_use input (256 KiB of JSON); larger input raises CV010.';

-- max_id_length: the cap on an id a caller names as text (an owner id, a
-- tool call id), in characters: 255, so that every index on them holds
-- (PostgreSQL's btree refuses entries over about 2.7 kB) and a longer id
-- is the contract's CV011 or CV010, never a raw 54000.
CREATE OR REPLACE FUNCTION convo_private.max_id_length()
RETURNS int
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN 255;

-- package_triggers: every trigger pgconvo puts on its tables, by what it
-- guards: append_only (refuse_change, refuse_forgery), head_log (the head
-- log's writer and the guard that names direct updates) and rule (the tree,
-- the state machines, the ledger, the notifications of convo_head and
-- convo_effect). self_check requires each present and
-- ENABLE ALWAYS, and no other trigger on the package's tables.
CREATE OR REPLACE FUNCTION convo_private.package_triggers()
RETURNS TABLE (table_name text, trigger_name text, guards text)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT t.table_name, t.trigger_name, t.guards
      FROM (VALUES
        ('conversation_head_log', 'conversation_head_log_append_only', 'append_only'),
        ('conversation_head_log', 'conversation_head_log_no_forgery', 'append_only'),
        ('conversations', 'conversations_no_delete', 'append_only'),
        ('conversations', 'conversations_erasure_only', 'append_only'),
        ('effect_transitions', 'effect_transitions_fixed', 'append_only'),
        ('live_path', 'live_path_no_forgery', 'append_only'),
        ('generations', 'generations_no_delete', 'append_only'),
        ('message_parts', 'message_parts_append_only', 'append_only'),
        ('message_parts', 'message_parts_no_forgery', 'append_only'),
        ('message_parts', 'message_parts_erasure_only', 'append_only'),
        ('messages', 'messages_append_only', 'append_only'),
        ('messages', 'messages_erasure_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_append_only', 'append_only'),
        ('tool_effect_calls', 'tool_effect_calls_no_forgery', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_append_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_erasure_only', 'append_only'),
        ('tool_effect_events', 'tool_effect_events_no_forgery', 'append_only'),
        ('tool_effects', 'tool_effects_no_delete', 'append_only'),
        ('tool_effects', 'tool_effects_no_forgery', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_delete', 'append_only'),
        ('tool_receipts', 'tool_receipts_no_forgery', 'append_only'),
        ('erasures', 'erasures_append_only', 'append_only'),
        ('erasures', 'erasures_no_forgery', 'append_only'),
        ('erasure_places', 'erasure_places_append_only', 'append_only'),
        ('erasure_places', 'erasure_places_no_forgery', 'append_only'),
        ('tools', 'tools_append_only', 'append_only'),
        ('tools', 'tools_no_forgery', 'append_only'),
        ('import_origins', 'import_origins_append_only', 'append_only'),
        ('import_origins', 'import_origins_erasure_only', 'append_only'),
        ('import_origins', 'import_origins_no_forgery', 'append_only'),
        ('imports', 'imports_append_only', 'append_only'),
        ('imports', 'imports_erasure_only', 'append_only'),
        ('imports', 'imports_no_forgery', 'append_only'),
        ('conversations', 'conversations_guard', 'head_log'),
        ('conversations', 'conversations_head_log', 'head_log'),
        ('generations', 'generations_transition', 'rule'),
        ('message_parts', 'message_parts_check', 'rule'),
        ('message_parts', 'message_parts_record_tool_call', 'rule'),
        ('messages', 'messages_fill_tree', 'rule'),
        ('messages', 'messages_split_parts', 'rule'),
        ('tool_effects', 'tool_effects_log', 'rule'),
        ('tool_effects', 'tool_effects_transition', 'rule'),
        ('tool_receipts', 'tool_receipts_transition', 'rule'),
        ('conversation_head_log', 'conversation_head_log_notify', 'rule'),
        ('tool_effect_events', 'tool_effect_events_notify', 'rule'),
        ('tool_receipts', 'tool_receipts_notify', 'rule')) AS t (table_name, trigger_name, guards);
END;

-- redact_row: what erasure leaves of a row of a table that holds content,
-- the row given and returned as jsonb: the one place that says what erasure
-- redacts. It keeps the shape (ids, times, states, amounts, currencies,
-- external references, who did what) and empties the content: message parts
-- (the array on the message and each per-part row), conversation metadata,
-- generation params, request digest, usage and error detail, effect
-- arguments, event evidence, an imported message's source node, an
-- import's source key and digest, a receipt's request, arguments and expected values. Idempotent. erase_content writes it; is_erasure lets only it through.
CREATE OR REPLACE FUNCTION convo_private.redact_row(p_table text, p_row jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
RETURN p_row || CASE p_table
    WHEN 'messages' THEN jsonb_build_object('parts',
        (SELECT jsonb_agg(convo_private.redact_part(e.part) ORDER BY e.n)
           FROM jsonb_array_elements(p_row -> 'parts') WITH ORDINALITY AS e (part, n)))
    WHEN 'message_parts' THEN jsonb_build_object('body', convo_private.redact_part(p_row -> 'body'))
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

DROP TRIGGER tools_90_append_only ON convo.tools;

DROP TRIGGER tools_10_no_forgery ON convo.tools;

DROP TRIGGER tool_receipts_90_no_delete ON convo.tool_receipts;

DROP TRIGGER tool_receipts_20_transition ON convo.tool_receipts;

DROP TRIGGER tool_receipts_10_no_forgery ON convo.tool_receipts;

DROP TRIGGER tool_effects_90_no_delete ON convo.tool_effects;

DROP TRIGGER tool_effects_30_log_direct ON convo.tool_effects;

DROP TRIGGER tool_effects_20_transition ON convo.tool_effects;

DROP TRIGGER tool_effects_10_no_forgery ON convo.tool_effects;

DROP TRIGGER tool_effect_events_90_append_only ON convo.tool_effect_events;

DROP TRIGGER tool_effect_events_30_no_update ON convo.tool_effect_events;

DROP TRIGGER tool_effect_events_10_no_forgery ON convo.tool_effect_events;

DROP TRIGGER tool_effect_calls_90_append_only ON convo.tool_effect_calls;

DROP TRIGGER tool_effect_calls_10_no_forgery ON convo.tool_effect_calls;

DROP TRIGGER messages_90_append_only ON convo.messages;

DROP TRIGGER messages_30_no_update ON convo.messages;

DROP TRIGGER messages_20_guard ON convo.messages;

DROP TRIGGER message_parts_10_refuse ON convo.message_parts;

DROP TRIGGER live_path_10_no_forgery ON convo.live_path;

DROP TRIGGER keyed_parts_90_append_only ON convo.keyed_parts;

DROP TRIGGER keyed_parts_20_guard ON convo.keyed_parts;

DROP TRIGGER keyed_parts_10_no_forgery ON convo.keyed_parts;

DROP TRIGGER imports_90_append_only ON convo.imports;

DROP TRIGGER imports_30_no_update ON convo.imports;

DROP TRIGGER imports_10_no_forgery ON convo.imports;

DROP TRIGGER import_origins_90_append_only ON convo.import_origins;

DROP TRIGGER import_origins_30_no_update ON convo.import_origins;

DROP TRIGGER import_origins_10_no_forgery ON convo.import_origins;

DROP TRIGGER generations_90_no_delete ON convo.generations;

DROP TRIGGER generations_20_transition ON convo.generations;

DROP TRIGGER erasures_90_append_only ON convo.erasures;

DROP TRIGGER erasures_10_no_forgery ON convo.erasures;

DROP TRIGGER erasure_places_90_append_only ON convo.erasure_places;

DROP TRIGGER erasure_places_10_no_forgery ON convo.erasure_places;

DROP TRIGGER effect_transitions_90_fixed ON convo.effect_transitions;

DROP TRIGGER conversations_90_no_delete ON convo.conversations;

DROP TRIGGER conversations_20_log_direct ON convo.conversations;

DROP TRIGGER conversations_10_guard ON convo.conversations;

DROP TRIGGER conversation_head_log_90_append_only ON convo.conversation_head_log;

DROP TRIGGER conversation_head_log_10_no_forgery ON convo.conversation_head_log;

DROP VIEW convo.message_parts;

DROP FUNCTION convo_private.part_problem;

DROP FUNCTION convo_private.write_messages;

DROP FUNCTION convo_private.tool_effects_log_direct;

DROP FUNCTION convo_private.messages_guard;

DROP FUNCTION convo_private.log_direct_head_move;

DROP FUNCTION convo_private.keyed_parts_guard;

DROP FUNCTION convo_private.effect_event;

-- Reverse the table changes here, below the objects.

DROP FUNCTION convo_private.record_tool_call(uuid, uuid, int, text, text, jsonb);
DROP FUNCTION convo_private.log_head_move(uuid, uuid, uuid, text, text, uuid);
DROP FUNCTION convo_private.notify_receipt(uuid, text, boolean);
DROP FUNCTION convo_private.move_live_path(uuid, uuid);

COMMENT ON TABLE convo.conversation_head_log IS NULL;
COMMENT ON TABLE convo.conversations IS NULL;
COMMENT ON TABLE convo.effect_transitions IS NULL;
COMMENT ON TABLE convo.generations IS NULL;
COMMENT ON TABLE convo.messages IS NULL;
COMMENT ON TABLE convo.tool_effect_calls IS NULL;
COMMENT ON TABLE convo.tool_effect_events IS NULL;
COMMENT ON TABLE convo.tool_effects IS NULL;
COMMENT ON TABLE convo.tool_receipts IS NULL;
COMMENT ON TABLE convo.tools IS NULL;

DROP TABLE convo.live_path;
CREATE TABLE convo.live_path (
    conversation_id uuid        NOT NULL,
    depth           int         NOT NULL,
    message_id      uuid        NOT NULL,
    sibling_count   int         NOT NULL,
    since           timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, depth)
);
ALTER TABLE convo.live_path ENABLE ROW LEVEL SECURITY;
CREATE POLICY live_path_reader_reads_all ON convo.live_path FOR SELECT TO convo_reader USING (true);
COMMENT ON TABLE convo.live_path IS
    'Derived index of each live path (root to head), kept by every head move; verified by self_check.';

CREATE TABLE convo.message_parts (
    conversation_id uuid  NOT NULL,
    message_id      uuid  NOT NULL,
    ordinal         int   NOT NULL CHECK (ordinal >= 0),
    type            text  NOT NULL CHECK (type IN ('text', 'tool_use', 'tool_result', 'attachment')),
    tool_call_id    text,
    tool_name       text,
    body            jsonb NOT NULL,
    PRIMARY KEY (conversation_id, message_id, ordinal),
    FOREIGN KEY (conversation_id, message_id) REFERENCES convo.messages (conversation_id, id),
    CHECK (body ->> 'type' = type),
    CHECK (tool_call_id IS NOT DISTINCT FROM CASE type WHEN 'tool_use' THEN body ->> 'id'
                                                     WHEN 'tool_result' THEN body ->> 'tool_use_id' END),
    CHECK (tool_name IS NOT DISTINCT FROM CASE type WHEN 'tool_use' THEN body ->> 'name' END),
    CONSTRAINT message_parts_tool_call_id_length CHECK (length(tool_call_id) <= 255)
);
CREATE UNIQUE INDEX message_parts_tool_use_key ON convo.message_parts (conversation_id, tool_call_id) WHERE type = 'tool_use';
CREATE INDEX message_parts_tool_call_idx ON convo.message_parts (tool_call_id) WHERE type = 'tool_use';
ALTER TABLE convo.message_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY message_parts_reader_reads_all ON convo.message_parts FOR SELECT TO convo_reader USING (true);
DO $$
BEGIN
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, type, tool_call_id, tool_name, body)
    SELECT m.conversation_id, m.id, (e.n - 1)::int, e.part ->> 'type',
           CASE e.part ->> 'type' WHEN 'tool_use' THEN e.part ->> 'id' WHEN 'tool_result' THEN e.part ->> 'tool_use_id' END,
           CASE WHEN e.part ->> 'type' = 'tool_use' THEN e.part ->> 'name' END, e.part
      FROM convo.messages m, jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, n);
END;
$$;
ALTER TABLE convo.tool_effect_calls DROP CONSTRAINT tool_effect_calls_part_fkey,
    ADD CONSTRAINT tool_effect_calls_conversation_id_message_id_ordinal_fkey FOREIGN KEY (conversation_id, message_id, ordinal)
        REFERENCES convo.message_parts (conversation_id, message_id, ordinal);
DROP TABLE convo.keyed_parts;

ALTER TABLE convo.conversation_head_log ADD CONSTRAINT conversation_head_log_conversation_id_fkey
    FOREIGN KEY (conversation_id) REFERENCES convo.conversations (id);
DROP INDEX convo.tool_effect_events_effect_idx;
ALTER TABLE convo.tool_effect_events DROP CONSTRAINT tool_effect_events_pkey, ADD PRIMARY KEY (conversation_id, effect_id, seq);
DO $$
BEGIN
    EXECUTE format('ALTER TABLE convo.conversation_head_log ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)',
                   (SELECT coalesce(max(seq), 0) + 1 FROM convo.conversation_head_log));
    EXECUTE format('ALTER TABLE convo.tool_effect_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)',
                   (SELECT coalesce(max(seq), 0) + 1 FROM convo.tool_effect_events));
END;
$$;
ALTER TABLE convo.erasures ADD COLUMN xact xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX erasures_xact_idx ON convo.erasures (xact);
CREATE TABLE convo_private.importing (
    conversation_id uuid NOT NULL,
    xact            xid8 NOT NULL DEFAULT pg_current_xact_id(),
    PRIMARY KEY (conversation_id, xact)
);

-- messages_fill_tree: checks a new message's role and parts and computes its
-- place in the tree (depth, sibling_index, branch_id, created_at) from its
-- parent, whoever inserts it, under the conversation's row lock so that
-- concurrent writers serialize. Its time is the insert's, except for a
-- message an import is writing (is_import), which keeps its original time.
-- The last sibling is read as the first row of messages_sibling_key in
-- reverse (ORDER BY ... LIMIT 1, parent_id in the order too, so that IS
-- NULL for a root keeps the index order): one probe whatever the number of
-- siblings or roots, even on statistics from when the table was empty.
-- A new sibling of a message on the live path raises that message's
-- sibling_count in convo.live_path.
CREATE OR REPLACE FUNCTION convo_private.messages_fill_tree()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_parent convo.messages;
    -- Where the message was going: a refused message's own id is not named.
    v_where  text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                            NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.role IS NULL OR NEW.role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(quote_literal(NEW.role), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = v_where, HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo_private.check_parts(NEW.parts, v_where);
    IF NEW.parent_id IS NULL THEN
        NEW.depth := 0;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id IS NULL
                                        ORDER BY m.parent_id DESC, m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := NEW.id;
    ELSE
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        NEW.depth := v_parent.depth + 1;
        NEW.sibling_index := coalesce((SELECT m.sibling_index FROM convo.messages m
                                        WHERE m.conversation_id = NEW.conversation_id AND m.parent_id = NEW.parent_id
                                        ORDER BY m.sibling_index DESC LIMIT 1), 0) + 1;
        NEW.branch_id := CASE WHEN NEW.sibling_index = 1 THEN v_parent.branch_id ELSE NEW.id END;
    END IF;
    IF NEW.sibling_index = 1 AND NEW.branch_reason IS NOT NULL THEN
        RAISE EXCEPTION 'a first child has no branch_reason'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s, branch_reason %s', v_where, NEW.branch_reason);
    END IF;
    IF NEW.sibling_index > 1 AND NEW.branch_reason IS NULL THEN
        NEW.branch_reason := 'branch';
    END IF;
    IF NEW.sibling_index > 1 THEN
        UPDATE convo.live_path l
           SET sibling_count = NEW.sibling_index, since = clock_timestamp()
         WHERE l.conversation_id = NEW.conversation_id AND l.depth = NEW.depth
           AND (NEW.parent_id IS NULL
                OR EXISTS (SELECT 1 FROM convo.live_path p
                            WHERE p.conversation_id = NEW.conversation_id AND p.depth = NEW.depth - 1
                              AND p.message_id = NEW.parent_id));
    END IF;
    IF NEW.created_at IS NULL OR NOT convo_private.is_import(NEW.conversation_id) THEN
        NEW.created_at := clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$;

-- messages_split_parts: writes one message_parts row per element of a new
-- message's parts, in the same statement, so each part is checked on its
-- own and tool calls get their unique index.
CREATE OR REPLACE FUNCTION convo_private.messages_split_parts()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, body)
    SELECT NEW.conversation_id, NEW.id, e.ordinality - 1, e.part
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e(part, ordinality);
    RETURN NULL;
END;
$$;

-- message_parts_check: every part is well formed for its type and fits its
-- message's role; derives type, tool_call_id and tool_name from the body
-- (CHECK constraints tie them together). That each part is exactly its
-- element of messages.parts holds because only messages_split_parts writes
-- them (message_parts_no_forgery). It reads the message's role and parent,
-- never its parts: a message of N parts costs N small lookups, not N copies
-- of the whole message.
CREATE OR REPLACE FUNCTION convo_private.message_parts_check()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_msg  record;
    v_body jsonb := NEW.body;
    v_type text;
    v_where text;
BEGIN
    SELECT m.role, m.parent_id INTO v_msg
      FROM convo.messages m WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id;
    -- The part and where its message was going, not the message's own id:
    -- a refused part means the message is not stored either.
    v_where := format('part %s of a new %s message in conversation %s, parent %s', NEW.ordinal, v_msg.role,
                      NEW.conversation_id, coalesce(v_msg.parent_id::text, 'none (a root)'));
    IF octet_length(v_body::text) > convo.max_part_bytes() THEN
        RAISE EXCEPTION 'a message part is larger than % bytes', convo.max_part_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', v_where, octet_length(v_body::text));
    END IF;
    IF jsonb_typeof(v_body) IS DISTINCT FROM 'object' OR jsonb_typeof(v_body -> 'type') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'a message part must be a JSON object with a string "type"'
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    v_type := v_body ->> 'type';
    IF v_type = 'text' THEN
        IF jsonb_typeof(v_body -> 'text') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'a text part needs a string "text"' USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSIF v_type = 'tool_use' THEN
        IF jsonb_typeof(v_body -> 'id') IS DISTINCT FROM 'string' OR v_body ->> 'id' = ''
           OR jsonb_typeof(v_body -> 'name') IS DISTINCT FROM 'string' OR v_body ->> 'name' = ''
           OR jsonb_typeof(v_body -> 'input') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'a tool_use part needs a non-empty string "id" and "name" and an object "input"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        -- A tool call id is unique within its conversation through a btree
        -- index, whose entries are capped at about 2.7 kB: max_id_length's
        -- 255 characters (1020 bytes at most) stay well under it.
        IF length(v_body ->> 'id') > convo_private.max_id_length() THEN
            RAISE EXCEPTION 'a tool call id is at most % characters', convo_private.max_id_length()
                USING ERRCODE = 'CV010', DETAIL = format('%s, a tool call id of %s characters', v_where, length(v_body ->> 'id'));
        END IF;
        IF v_msg.role <> 'assistant' THEN
            RAISE EXCEPTION 'tool_use belongs in an assistant message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF octet_length((v_body -> 'input')::text) > convo.max_tool_input_bytes() THEN
            RAISE EXCEPTION 'a tool input is larger than % bytes', convo.max_tool_input_bytes()
                USING ERRCODE = 'CV010', DETAIL = format('%s, tool call %s', v_where, v_body ->> 'id');
        END IF;
        IF EXISTS (SELECT 1 FROM convo.message_parts p
                    WHERE p.conversation_id = NEW.conversation_id
                      AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'id') THEN
            RAISE EXCEPTION 'tool call id % is already used in this conversation', v_body ->> 'id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, conversation %s', v_where, v_body ->> 'id', NEW.conversation_id);
        END IF;
    ELSIF v_type = 'tool_result' THEN
        IF jsonb_typeof(v_body -> 'tool_use_id') IS DISTINCT FROM 'string' OR NOT v_body ? 'content'
           OR (v_body ? 'is_error' AND jsonb_typeof(v_body -> 'is_error') <> 'boolean') THEN
            RAISE EXCEPTION 'a tool_result part needs a string "tool_use_id", a "content" and, if given, a boolean "is_error"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
        IF length(v_body ->> 'tool_use_id') > convo_private.max_id_length() THEN
            RAISE EXCEPTION 'a tool call id is at most % characters', convo_private.max_id_length()
                USING ERRCODE = 'CV010', DETAIL = format('%s, a tool_use_id of %s characters', v_where, length(v_body ->> 'tool_use_id'));
        END IF;
        IF v_msg.role NOT IN ('user', 'tool') THEN
            RAISE EXCEPTION 'tool_result belongs in a user or tool message, not a % message', v_msg.role
                USING ERRCODE = 'CV004', DETAIL = v_where;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM convo.message_parts p
                        WHERE p.conversation_id = NEW.conversation_id AND p.message_id = v_msg.parent_id
                          AND p.type = 'tool_use' AND p.tool_call_id = v_body ->> 'tool_use_id') THEN
            RAISE EXCEPTION 'tool_result names tool call %, which is not a tool_use of the parent message', v_body ->> 'tool_use_id'
                USING ERRCODE = 'CV008', DETAIL = format('%s, tool call %s, parent %s', v_where, v_body ->> 'tool_use_id', v_msg.parent_id);
        END IF;
    ELSIF v_type = 'attachment' THEN
        IF jsonb_typeof(v_body -> 'uri') IS DISTINCT FROM 'string' OR v_body ->> 'uri' = ''
           OR jsonb_typeof(v_body -> 'media_type') IS DISTINCT FROM 'string' OR v_body ->> 'media_type' = '' THEN
            RAISE EXCEPTION 'an attachment part needs a non-empty string "uri" and "media_type"'
                USING ERRCODE = 'CV008', DETAIL = v_where;
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown message part type "%"', v_type
            USING ERRCODE = 'CV008', DETAIL = v_where,
                  HINT = 'Part types are text, tool_use, tool_result and attachment.';
    END IF;
    NEW.type := v_type;
    NEW.tool_call_id := CASE v_type WHEN 'tool_use' THEN v_body ->> 'id' WHEN 'tool_result' THEN v_body ->> 'tool_use_id' END;
    NEW.tool_name := CASE v_type WHEN 'tool_use' THEN v_body ->> 'name' END;
    RETURN NEW;
END;
$$;

-- move_head_to: moves the head and lets log_head_move record why and by whom
-- (through transaction-local settings, cleared again at once so a later
-- direct UPDATE in the same transaction is logged as 'direct_update').
-- Moving the head to where it already is writes nothing.
CREATE OR REPLACE FUNCTION convo_private.move_head_to(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_reason          text,
    p_moved_by        text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('convo.head_reason', p_reason, true);
    PERFORM set_config('convo.head_moved_by', coalesce(p_moved_by, ''), true);
    UPDATE convo.conversations c
       SET head_message_id = p_message_id
     WHERE c.id = p_conversation_id
       AND c.head_message_id IS DISTINCT FROM p_message_id;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
END;
$$;

-- is_import: whether an import (import_conversation, or import_tree for the
-- imports from other products) is writing this conversation right now, in
-- this transaction: its marker row (convo_private.importing, which only the
-- imports write and delete again before they return) names the conversation
-- and this transaction. Only then do the triggers that stamp the present
-- (messages_fill_tree, log_head_move, tool_effects_log) or decide anew
-- (record_tool_call) keep the given rows instead. The setting is a
-- cheap hint that spares every other write the lookup; setting it proves nothing.
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and
-- calling one costs tens of microseconds on every write; this returns at the
-- setting for all but an import.
CREATE OR REPLACE FUNCTION convo_private.is_import(p_conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo_private.importing i
                    WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id());
END;
$$;

-- set_effect_context: names the actor and evidence that tool_effects_log
-- writes with the next transition; called with NULLs right after, so a later
-- UPDATE in the same transaction is logged with the caller and no evidence.
CREATE OR REPLACE FUNCTION convo_private.set_effect_context(p_actor text, p_evidence jsonb)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT set_config('convo.effect_actor', coalesce(p_actor, ''), true),
           set_config('convo.effect_evidence', coalesce(p_evidence::text, ''), true);
END;

-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or the caller and none (the role
-- SET ROLE set, else the login role: convo_private.caller's expression,
-- written out because this trigger runs as the writing role, which may
-- not reach convo_private). The
-- settings are honoured only for pgconvo's own transitions (current_user
-- convo_owner): any session can set them, so they never name who did a
-- transition made by anyone else (a superuser's direct UPDATE). An import
-- (is_import) writes the exported events instead.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL; -- an import writes the exported events itself
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_actor', true), ''), coalesce(nullif(current_setting('role'), 'none'), session_user::text))
                 ELSE coalesce(nullif(current_setting('role'), 'none'), session_user::text) END,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}')
                 ELSE '{}' END);
    RETURN NULL;
END;
$$;

-- live_path_rows: the live path of a conversation as path returns it, read
-- from the live-path index (one range scan of convo.live_path joined to the
-- messages), without an owner check: path and path_at check first. SQL, no
-- SET clause, so the planner inlines it into their queries.
CREATE OR REPLACE FUNCTION convo_private.live_path_rows(p_conversation_id uuid)
RETURNS TABLE (depth int, message_id uuid, parent_id uuid, role text, parts jsonb,
               branch_reason text, created_at timestamptz, sibling_index int, sibling_count int)
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT l.depth, m.id, m.parent_id, m.role, m.parts, m.branch_reason, m.created_at, m.sibling_index,
           l.sibling_count
      FROM convo.live_path l
      JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
     WHERE l.conversation_id = p_conversation_id
     ORDER BY l.depth;
END;

-- notify_head_move: sends every head-log row, whoever wrote it (the API or a
-- direct UPDATE logged as direct_update), to channel convo_head, from the
-- transaction that moved the head: pg_notify is transactional, so a move
-- that rolls back is never heard. LISTEN is not owner-scoped (any role that
-- may connect to the database may listen), so the payload holds ids, seq and
-- reason only: never content, the owner or who moved it.
CREATE OR REPLACE FUNCTION convo_private.notify_head_move()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_head', json_build_object(
        'conversation_id', NEW.conversation_id, 'seq', NEW.seq, 'head_message_id', NEW.head_message_id,
        'previous_head_id', NEW.previous_head_id, 'reason', NEW.reason)::text);
    RETURN NULL;
END;
$$;

-- notify_effect_event: sends every transition of an effect (each row of
-- tool_effect_events, its creation included) to channel convo_effect, from
-- the transaction that made it (a rolled-back transition is never heard).
-- The payload holds ids, seq and states only, for listeners of any owner:
-- never arguments, evidence, references, error codes or the actor.
CREATE OR REPLACE FUNCTION convo_private.notify_effect_event()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'effect', 'conversation_id', NEW.conversation_id, 'effect_id', NEW.effect_id,
        'seq', NEW.seq, 'from_state', NEW.from_state, 'state', NEW.to_state)::text);
    RETURN NULL;
END;
$$;

-- is_erasure: whether an UPDATE of a row is an erasure: the new row is
-- exactly redact_row of the old one, and this very transaction recorded an
-- erasure of the row's conversation (or, for a receipt, of its owner) in
-- convo.erasures, which only erase_conversation and erase_owner write. No
-- setting or argument can make it true: it is the one way past the
-- append-only and state-machine triggers.
CREATE OR REPLACE FUNCTION convo_private.is_erasure(p_table text, p_old jsonb, p_new jsonb)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN p_new::text = convo_private.redact_row(p_table, p_old)::text
   AND EXISTS (SELECT 1 FROM convo.erasures e
                WHERE e.xact = pg_current_xact_id()
                  AND CASE WHEN p_table = 'tool_receipts'
                           THEN e.conversation_id IS NULL AND e.owner_id = p_old ->> 'owner_id'
                           ELSE e.conversation_id = (CASE p_table WHEN 'conversations' THEN p_old ->> 'id'
                                                                  ELSE p_old ->> 'conversation_id' END)::uuid
                      END);

-- refuse_all_but_erasure: the row-level UPDATE guard of the append-only
-- tables that hold content (messages, message_parts, tool_effect_events,
-- and the metadata of conversations): every UPDATE raises CV005, for every
-- role, unless it is an erasure (is_erasure: exactly the redaction, in a
-- transaction that recorded it).
CREATE OR REPLACE FUNCTION convo_private.refuse_all_but_erasure()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_erasure(TG_TABLE_NAME, to_jsonb(OLD), to_jsonb(NEW)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'convo.% is append-only: UPDATE is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, conversation %s, role %s', TG_TABLE_NAME,
                              coalesce(to_jsonb(OLD) ->> 'conversation_id', to_jsonb(OLD) ->> 'id'), current_user),
              HINT = 'Nothing in the conversation tree is updated: insert a sibling or move the head instead; '
                     'content is removed only by convo.erase_conversation or convo.erase_owner.';
END;
$$;

-- check_parts: the checks on a message's parts as a whole (present, a
-- non-empty array, under the message cap), with the contract's SQLSTATEs;
-- each part is checked by message_parts_check. p_where names where the
-- message was going (its conversation and parent), never the new message's
-- own id, which is not stored when its parts are refused.
CREATE OR REPLACE FUNCTION convo_private.check_parts(p_parts jsonb, p_where text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_parts IS NULL THEN
        RAISE EXCEPTION 'p_parts is required' USING ERRCODE = 'CV011', DETAIL = p_where;
    END IF;
    IF jsonb_typeof(p_parts) <> 'array' THEN
        RAISE EXCEPTION 'p_parts must be a JSON array, not %', jsonb_typeof(p_parts) USING ERRCODE = 'CV008', DETAIL = p_where;
    END IF;
    IF jsonb_array_length(p_parts) = 0 THEN
        RAISE EXCEPTION 'p_parts must not be empty' USING ERRCODE = 'CV008', DETAIL = p_where;
    END IF;
    IF octet_length(p_parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'a message is larger than % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV010', DETAIL = format('%s: %s bytes', p_where, octet_length(p_parts::text));
    END IF;
END;
$$;

-- conversation_head_log_append_only: convo.conversation_head_log is append-only. UPDATE, DELETE and TRUNCATE
-- raise CV005 for every role but a superuser who disables triggers; ENABLE
-- ALWAYS keeps it firing under session_replication_role = replica.
CREATE OR REPLACE TRIGGER conversation_head_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_append_only;
-- conversation_head_log_no_forgery: rows of convo.conversation_head_log are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER conversation_head_log_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_no_forgery;
-- conversation_head_log_notify: every head-log row is sent to channel convo_head (ids, seq, reason).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER conversation_head_log_notify
    AFTER INSERT ON convo.conversation_head_log
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_head_move();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_notify;
-- conversations_erasure_only: a conversation's metadata changes only by an
-- erasure (refuse_all_but_erasure), for every role. UPDATE OF metadata, so
-- that moving the head, the hot write, never pays for the comparison.
CREATE OR REPLACE TRIGGER conversations_erasure_only
    BEFORE UPDATE OF metadata ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_erasure_only;
-- conversations_guard: id, owner and creation time never change, and a head
-- once set is never unset.
CREATE OR REPLACE TRIGGER conversations_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_guard;
-- conversations_head_log: every change of a head, by any statement (the API
-- or a direct UPDATE by the owner), writes exactly one head-log row in the
-- same transaction. An UPDATE that leaves the head where it is writes none.
CREATE OR REPLACE TRIGGER conversations_head_log
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id)
    EXECUTE FUNCTION convo_private.log_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_head_log;
-- conversations_no_delete: a conversation is never deleted (erasure redacts
-- content and keeps the shape), so DELETE and TRUNCATE raise CV005.
CREATE OR REPLACE TRIGGER conversations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.conversations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_no_delete;
-- effect_transitions_fixed: the effect state machine is fixed by the migrations (CV005).
CREATE OR REPLACE TRIGGER effect_transitions_fixed
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON convo.effect_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change('the fixed effect state machine');
ALTER TABLE convo.effect_transitions ENABLE ALWAYS TRIGGER effect_transitions_fixed;
-- erasure_places_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasure_places_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_append_only;
-- erasure_places_no_forgery: only erase_conversation and erase_owner record an
-- erasure (refuse_forgery), and a recorded erasure is what lets the
-- redaction past the append-only triggers; any other role gets CV005.
CREATE OR REPLACE TRIGGER erasure_places_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_no_forgery;
-- erasures_append_only: the record of erasures is itself append-only: UPDATE,
-- DELETE and TRUNCATE raise CV005 for every role but a superuser.
CREATE OR REPLACE TRIGGER erasures_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.erasures
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_append_only;
-- erasures_no_forgery: only erase_conversation and erase_owner record an
-- erasure (refuse_forgery), and a recorded erasure is what lets the
-- redaction past the append-only triggers; any other role gets CV005.
CREATE OR REPLACE TRIGGER erasures_no_forgery
    BEFORE INSERT ON convo.erasures
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_no_forgery;
-- generations_no_delete: generations are records of work done; never deleted (CV005).
CREATE OR REPLACE TRIGGER generations_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.generations
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_no_delete;
-- generations_transition: a generation starts streaming and ends once (CV006).
CREATE OR REPLACE TRIGGER generations_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_transition;
-- import_origins_append_only: an import's origin records are never deleted:
-- DELETE and TRUNCATE are refused for every role (UPDATE: import_origins_erasure_only).
CREATE OR REPLACE TRIGGER import_origins_append_only
    BEFORE DELETE OR TRUNCATE ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_append_only;
-- import_origins_erasure_only: an origin record changes only by erasure
-- (exactly its redaction, in a transaction that recorded it).
CREATE OR REPLACE TRIGGER import_origins_erasure_only
    BEFORE UPDATE ON convo.import_origins
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_erasure_only;
-- import_origins_no_forgery: only the import functions write origin records,
-- the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_no_forgery;
-- imports_append_only: the record of imports is never deleted: DELETE and
-- TRUNCATE are refused for every role (UPDATE: imports_erasure_only).
CREATE OR REPLACE TRIGGER imports_append_only
    BEFORE DELETE OR TRUNCATE ON convo.imports
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_append_only;
-- imports_erasure_only: an import's record changes only by erasure (its
-- source key and digest emptied, in a transaction that recorded it).
CREATE OR REPLACE TRIGGER imports_erasure_only
    BEFORE UPDATE ON convo.imports
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_erasure_only;
-- imports_no_forgery: only the import functions record an import (who, when,
-- the document's digest), so a record names the role that really imported.
CREATE OR REPLACE TRIGGER imports_no_forgery
    BEFORE INSERT ON convo.imports
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_no_forgery;
-- live_path_no_forgery: the live-path index is written only by the package's
-- own head moves and message inserts (refuse_forgery): a role given table
-- privileges cannot make path show another branch than the head's.
CREATE OR REPLACE TRIGGER live_path_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE ON convo.live_path
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_no_forgery;
-- message_parts_append_only: rows of convo.message_parts are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is message_parts_erasure_only's.
CREATE OR REPLACE TRIGGER message_parts_append_only
    BEFORE DELETE OR TRUNCATE ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_append_only;
-- message_parts_check: each part is checked (shape, role, tool pairing,
-- size) on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER message_parts_check
    BEFORE INSERT ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.message_parts_check();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_check;
-- message_parts_erasure_only: no row of convo.message_parts is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER message_parts_erasure_only
    BEFORE UPDATE ON convo.message_parts
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_erasure_only;
-- message_parts_no_forgery: the per-part rows are written only with their
-- message, by messages_split_parts from convo.messages.parts (refuse_forgery),
-- so the two copies never disagree; any other role gets CV005.
CREATE OR REPLACE TRIGGER message_parts_no_forgery
    BEFORE INSERT ON convo.message_parts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_no_forgery;
-- message_parts_record_tool_call: a tool call's ledger decision is written
-- in the statement that stores its tool_use part, before any request leaves.
CREATE OR REPLACE TRIGGER message_parts_record_tool_call
    AFTER INSERT ON convo.message_parts
    FOR EACH ROW
    WHEN (NEW.type = 'tool_use')
    EXECUTE FUNCTION convo_private.record_tool_call();
ALTER TABLE convo.message_parts ENABLE ALWAYS TRIGGER message_parts_record_tool_call;
-- messages_append_only: rows of convo.messages are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is messages_erasure_only's.
CREATE OR REPLACE TRIGGER messages_append_only
    BEFORE DELETE OR TRUNCATE ON convo.messages
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_append_only;
-- messages_erasure_only: no row of convo.messages is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER messages_erasure_only
    BEFORE UPDATE ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_erasure_only;
-- messages_fill_tree: a message's depth, sibling_index and branch_id are
-- computed from its parent on insert, whoever inserts it.
CREATE OR REPLACE TRIGGER messages_fill_tree
    BEFORE INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_fill_tree();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_fill_tree;
-- messages_split_parts: a message's parts become message_parts rows in the
-- statement that inserts the message.
CREATE OR REPLACE TRIGGER messages_split_parts
    AFTER INSERT ON convo.messages
    FOR EACH ROW EXECUTE FUNCTION convo_private.messages_split_parts();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_split_parts;
-- tool_effect_calls_append_only: a tool call's ledger decision is written once (CV005).
CREATE OR REPLACE TRIGGER tool_effect_calls_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_append_only;
-- tool_effect_calls_no_forgery: rows of convo.tool_effect_calls are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effect_calls_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_no_forgery;
-- tool_effect_events_append_only: rows of convo.tool_effect_events are never deleted: DELETE and
-- TRUNCATE raise CV005 for every role but a superuser who disables triggers;
-- ENABLE ALWAYS keeps it firing under session_replication_role = replica.
-- UPDATE is tool_effect_events_erasure_only's.
CREATE OR REPLACE TRIGGER tool_effect_events_append_only
    BEFORE DELETE OR TRUNCATE ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_append_only;
-- tool_effect_events_erasure_only: no row of convo.tool_effect_events is ever updated, by any role,
-- except by an erasure (refuse_all_but_erasure): exactly the redaction, in
-- the transaction that recorded it. Row-level, to compare each row.
CREATE OR REPLACE TRIGGER tool_effect_events_erasure_only
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH ROW EXECUTE FUNCTION convo_private.refuse_all_but_erasure();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_erasure_only;
-- tool_effect_events_no_forgery: rows of convo.tool_effect_events are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effect_events_no_forgery
    BEFORE INSERT ON convo.tool_effect_events
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_no_forgery;
-- tool_effect_events_notify: every effect transition is sent to channel convo_effect (ids, seq, states).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_effect_events_notify
    AFTER INSERT ON convo.tool_effect_events
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_effect_event();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_notify;
-- tool_effects_log: every transition of an effect is appended to tool_effect_events.
CREATE OR REPLACE TRIGGER tool_effects_log
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_log();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_log;
-- tool_effects_no_delete: an effect is never deleted (CV005); abandoning a branch is not a transition.
CREATE OR REPLACE TRIGGER tool_effects_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_delete;
-- tool_effects_no_forgery: rows of convo.tool_effects are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_effects_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_no_forgery;
-- tool_effects_transition: every change of an effect is a transition of its state machine (CV006).
CREATE OR REPLACE TRIGGER tool_effects_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_transition;
-- tool_receipts_no_delete: a receipt is never deleted (CV005).
CREATE OR REPLACE TRIGGER tool_receipts_no_delete
    BEFORE DELETE OR TRUNCATE ON convo.tool_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_no_delete;
-- tool_receipts_no_forgery: rows of convo.tool_receipts are written only by pgconvo's own
-- code (refuse_forgery); any other role, whatever its privileges, gets CV005.
CREATE OR REPLACE TRIGGER tool_receipts_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_no_forgery;
-- tool_receipts_notify: a receipt's filing, fill and settlement are sent to channel convo_effect (id, status).
-- Unless convo.notify is off (ALTER DATABASE ... SET convo.notify = off):
-- PostgreSQL serializes the commits of notifying transactions, so a
-- database nobody listens to need not pay for it.
CREATE OR REPLACE TRIGGER tool_receipts_notify
    AFTER INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_setting('convo.notify', true) IS DISTINCT FROM 'off')
    EXECUTE FUNCTION convo_private.notify_receipt();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_notify;
-- tool_receipts_transition: a receipt goes from pending to applied or failed, once (CV006).
CREATE OR REPLACE TRIGGER tool_receipts_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_transition;
-- tools_append_only: a registered tool version is frozen (CV005); other settings make the next version.
CREATE OR REPLACE TRIGGER tools_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_change();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_append_only;
-- tools_no_forgery: the allowlist is written only through register_tool
-- (refuse_forgery), which checks each schema; any other role, whatever its
-- privileges, gets CV005.
CREATE OR REPLACE TRIGGER tools_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_no_forgery;

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
