-- 0020_caller_identity down: reverses 0020_caller_identity.up.sql.

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
    PERFORM convo_private.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = 'compensated', compensated_by = p_compensated_by, compensated_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.compensate_effect(uuid, uuid, text, jsonb) IS
    'An applied effect answered by a second movement (refund, reversal) named in p_compensated_by.';

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

    INSERT INTO convo.conversations (id, owner_id, metadata)
    VALUES (v_id, p_owner_id, p_metadata)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- A retry: the same owner, metadata and system prompt return the first result.
        -- Locked without lock_conversation's owner check: another owner's id is CV009, not CV002.
        SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = v_id FOR NO KEY UPDATE;
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
    PERFORM convo_private.set_effect_context(session_user, p_evidence);
    UPDATE convo.tool_effects e
       SET state = p_state, external_ref = p_external_ref, http_status = p_http_status,
           error_code = p_error_code, settled_at = clock_timestamp()
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id;
    PERFORM convo_private.set_effect_context(NULL, NULL);
END;
$$;

COMMENT ON FUNCTION convo.settle_effect(uuid, uuid, text, text, int, text, jsonb) IS
    'Settle a pending effect: applied (with the external reference) or failed (with an error code); evidence is logged.';

-- conversations_guard: of a conversation only the head may change (and its
-- metadata by an erasure: conversations_erasure_only); its id, owner and
-- creation time are fixed, and a head once set is never unset (the head
-- always names a message).
-- It runs as the role that issued the UPDATE (not SECURITY DEFINER), so it
-- can tell pgconvo's own move (current_user convo_owner, reason and mover
-- named by move_head_to) from any other: that one is marked direct_update by
-- session_user here, whatever settings the session holds, for log_head_move.
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
        PERFORM set_config('convo.head_moved_by', session_user, true);
    END IF;
    RETURN NEW;
END;
$$;

-- lock_conversation: takes the conversation's row lock (FOR NO KEY UPDATE),
-- which every write to a conversation takes first, so writes to one
-- conversation serialize; returns the current head. CV002 if it does not
-- exist or the caller may not write for its owner (writes_owner: the one
-- owner check of a write).
CREATE OR REPLACE FUNCTION convo_private.lock_conversation(p_conversation_id uuid)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head  uuid;
    v_owner text;
BEGIN
    IF p_conversation_id IS NULL THEN
        RAISE EXCEPTION 'p_conversation_id is required' USING ERRCODE = 'CV011', DETAIL = 'conversation NULL';
    END IF;
    SELECT c.head_message_id, c.owner_id INTO v_head, v_owner
      FROM convo.conversations c
     WHERE c.id = p_conversation_id
       FOR NO KEY UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_owner) THEN
        RAISE EXCEPTION 'conversation % does not exist', p_conversation_id
            USING ERRCODE = 'CV002', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    RETURN v_head;
END;
$$;

-- log_head_move: writes one conversation_head_log row for every change of a
-- head, by any statement, in the same transaction. SECURITY DEFINER: it is
-- the one writer of the head log besides a superuser. The reason and mover
-- come from move_head_to (pgconvo's own moves) or conversations_guard (any
-- other UPDATE: direct_update by session_user); it clears them after use.
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
        v_moved_by := session_user;
    END IF;
    PERFORM set_config('convo.head_reason', '', true);
    PERFORM set_config('convo.head_moved_by', '', true);
    INSERT INTO convo.conversation_head_log
        (conversation_id, head_message_id, previous_head_id, moved_by, reason)
    VALUES (NEW.id, NEW.head_message_id, OLD.head_message_id, v_moved_by, v_reason);
    RETURN NULL;
END;
$$;

-- receipt_ref: the receipt a call names, locked for its transition; CV002
-- if there is none or the caller may not write for its owner.
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
    SELECT * INTO v_receipt FROM convo.tool_receipts r WHERE r.id = p_receipt_id FOR UPDATE;
    IF NOT FOUND OR NOT convo_private.writes_owner(v_receipt.owner_id) THEN
        RAISE EXCEPTION 'receipt % does not exist', p_receipt_id
            USING ERRCODE = 'CV002', DETAIL = format('receipt %s', p_receipt_id);
    END IF;
    RETURN v_receipt;
END;
$$;

-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or session_user and none. The
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
                 THEN coalesce(nullif(current_setting('convo.effect_actor', true), ''), session_user)
                 ELSE session_user END,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}')
                 ELSE '{}' END);
    RETURN NULL;
END;
$$;

-- sees_owner: whether the caller may read an owner's rows. A convo_app
-- session sees only the owner named by SET LOCAL convo.owner_id: unset
-- (NULL in a session that never set it, '' after a SET LOCAL ended) it sees
-- no one. A login member of convo_reader (or convo_admin, or a superuser)
-- sees every owner. The API functions run as the owner role, so they ask
-- once per call, about session_user: the login role that connected. No SET
-- clause: the body is bound when it is created, and the planner inlines it.
CREATE OR REPLACE FUNCTION convo_private.sees_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(session_user, 'convo_reader', 'USAGE');

-- set_effect_context: names the actor and evidence that tool_effects_log
-- writes with the next transition; called with NULLs right after, so a later
-- UPDATE in the same transaction is logged with session_user and no evidence.
CREATE OR REPLACE FUNCTION convo_private.set_effect_context(p_actor text, p_evidence jsonb)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT set_config('convo.effect_actor', coalesce(p_actor, ''), true),
           set_config('convo.effect_evidence', coalesce(p_evidence::text, ''), true);
END;

-- writes_owner: whether the caller may change an owner's rows: the owner
-- named by SET LOCAL convo.owner_id, or every owner for a login member of
-- convo_admin (or a superuser). convo_reader reads across owners but writes
-- nothing.
CREATE OR REPLACE FUNCTION convo_private.writes_owner(p_owner_id text)
RETURNS boolean
LANGUAGE sql
STABLE
RETURN coalesce(p_owner_id = current_setting('convo.owner_id', true), false)
    OR pg_has_role(session_user, 'convo_admin', 'USAGE');

-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- The view runs as its owner, so it filters by owner itself (the caller's
-- convo.owner_id, or every owner for convo_reader), and walks the path in
-- plain SQL (as path_segments does): a caller may use only pg_catalog's
-- functions through it, not the private schema's.
CREATE OR REPLACE VIEW convo.orphaned_applied_effects AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.external_ref,
       e.amount_minor,
       e.currency,
       e.settled_at,
       ARRAY(SELECT l.tool_call_id FROM convo.tool_effect_calls l
              WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
              ORDER BY l.decided_at) AS tool_call_ids
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state = 'applied'
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')))
   AND NOT EXISTS (
        WITH RECURSIVE segments (branch_id, max_depth) AS (
            SELECT h.branch_id, h.depth
              FROM convo.messages h
             WHERE h.conversation_id = c.id AND h.id = c.head_message_id
            UNION ALL
            SELECT fork.branch_id, fork.depth
              FROM segments s
              JOIN convo.messages start ON start.conversation_id = c.id AND start.id = s.branch_id
              JOIN convo.messages fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
        )
        SELECT 1
          FROM convo.tool_effect_calls l
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
         WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id);

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';

-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Filtered
-- by owner like orphaned_applied_effects.
CREATE OR REPLACE VIEW convo.stale_generations AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
  JOIN convo.conversations c ON c.id = g.conversation_id
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';

-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Filtered by owner like
-- orphaned_applied_effects: the caller's, or every owner for convo_reader.
CREATE OR REPLACE VIEW convo.stale_pending_effects AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.state,
       e.idempotency_key,
       e.requested_at,
       e.deadline_at
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state IN ('pending', 'awaiting_confirmation')
   AND e.deadline_at < clock_timestamp()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(session_user, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';

ALTER TABLE convo.tools ALTER COLUMN registered_by SET DEFAULT session_user;
ALTER TABLE convo.erasures ALTER COLUMN erased_by SET DEFAULT session_user;
DROP FUNCTION convo_private.caller;

-- Reverse the table changes here, below the objects.

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
