-- 0046_live_updates_switch: a database switch for live-update notifications
-- (set_live_updates, convo_admin's): off, no commit queues on PostgreSQL's NOTIFY lock.

-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;

-- Table changes, written by hand, go here, above the objects that use them.
ALTER TABLE convo_private.settings ADD COLUMN live_updates boolean DEFAULT true NOT NULL;
COMMENT ON TABLE convo_private.settings IS 'The settings a DBA sets (one row, none until set): the retention period of deleted conversations, the text search configuration, whether live-update notifications are sent, who set them last and when.';

-- live_updates: whether this database sends live-update notifications
-- (convo_head, convo_effect): the database's setting (set_live_updates),
-- on until a DBA sets it. A listener that reads false polls head_history
-- by seq instead of waiting; a session's convo.notify = off is not
-- reflected here (it silences that session only).
CREATE OR REPLACE FUNCTION convo.live_updates()
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
    SELECT coalesce((SELECT s.live_updates FROM convo_private.settings s), true)
$$;

COMMENT ON FUNCTION convo.live_updates() IS
    'Whether the database sends live-update notifications on convo_head and convo_effect (on until set_live_updates).';

-- set_live_updates: whether this database sends live-update notifications
-- (convo_head, convo_effect), convo_admin's: off, no writer sends one, so
-- no commit takes PostgreSQL's NOTIFY lock (every notifying commit of the
-- cluster takes turns on it: docs/performance.md#notifications), and
-- listeners poll head_history by seq instead. It reaches every session at
-- its next change, pooled ones included (ALTER DATABASE ... SET
-- convo.notify, which needs the database's owner, reaches only new
-- sessions); a session's convo.notify = off still silences that session
-- when it is on. NULL is CV011, writing nothing. Who set it, and when, is
-- kept beside it.
CREATE OR REPLACE FUNCTION convo.set_live_updates(p_on boolean)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    IF p_on IS NULL THEN
        RAISE EXCEPTION 'live updates are on (true) or off (false), not NULL'
            USING ERRCODE = 'CV011', DETAIL = 'p_on NULL';
    END IF;
    INSERT INTO convo_private.settings (live_updates, set_by) VALUES (p_on, convo_private.caller())
    ON CONFLICT (singleton) DO UPDATE
       SET live_updates = excluded.live_updates, set_by = excluded.set_by, set_at = excluded.set_at;
END;
$$;

COMMENT ON FUNCTION convo.set_live_updates(boolean) IS
    'Turn the database''s live-update notifications (convo_head, convo_effect) on or off for every session; convo_admin''s.';

-- effect_event: one transition of an effect, in the transaction that made
-- it: its row of tool_effect_events (seq numbered per conversation, under
-- the conversation's lock; the actor and evidence the caller names) and
-- the convo_effect notification (when notifies says so; the payload
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
    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'effect', 'conversation_id', p_conversation_id, 'effect_id', p_effect_id,
            'seq', v_seq, 'from_state', p_from, 'state', p_to)::text);
    END IF;
END;
$$;

-- log_head_move: what follows a head's move, in the transaction that made
-- it: one conversation_head_log row (seq numbered per conversation, under
-- the conversation's lock), the live path moved with it, and the convo_head
-- notification (when notifies says so; the payload holds ids, seq and reason
-- only, never content, the owner or the mover: LISTEN is not owner-scoped).
-- write_messages calls it for pgconvo's own moves, with the reason, mover
-- and import they were given; log_direct_head_move (trigger
-- conversations_20_log_direct) for an UPDATE outside the API
-- (direct_update, by the caller). An append (the new head a child of the
-- old one) extends the live path by one UPDATE or INSERT; any other move
-- goes to move_live_path.
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

    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_head', json_build_object(
            'conversation_id', p_conversation_id, 'seq', v_seq, 'head_message_id', p_head,
            'previous_head_id', p_old_head, 'reason', p_reason)::text);
    END IF;
END;
$$;

-- notify_receipt: sends a receipt's filing, its fill and its settlement
-- (applied or failed) to channel convo_effect, from the transaction that
-- made them (a rolled-back change is never heard), when notifies says so.
-- begin_receipt, fill_receipt, apply_receipt, fail_receipt and
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
    IF convo_private.notifies() THEN
        PERFORM pg_notify('convo_effect', json_build_object(
            'kind', 'receipt', 'receipt_id', p_receipt_id, 'state', p_status, 'filled', p_filled)::text);
    END IF;
END;
$$;

-- notifies: whether the changes of this transaction are sent as live-update
-- notifications (pg_notify): the database's switch (set_live_updates, on
-- until a DBA sets it) and the session's convo.notify (off silences that
-- session alone). The one test of every place that notifies: log_head_move,
-- effect_event and notify_receipt, each running as the owner role. A quoted
-- body: Citus cannot send a SQL-standard one that holds a subquery to its
-- workers.
CREATE OR REPLACE FUNCTION convo_private.notifies()
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT current_setting('convo.notify', true) IS DISTINCT FROM 'off'
       AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true)
$$;

-- documented_grants: every privilege pgconvo grants, as data (docs/security.md,
-- "The roles" and "Granting", in rows): USAGE on schema convo for the three roles;
-- EXECUTE on the application's functions for convo_app, on the read-only
-- ones and self_check for convo_reader, on the DBA's (the allowlist, the
-- sweeps, erasure, restoring an export) for convo_admin, a member of both; SELECT on the views
-- for convo_app, on every table and view for convo_reader, with EXECUTE on
-- the convo_private functions those views read their rows from (a view's
-- functions are called with the reader's rights; without USAGE on the
-- schema nobody can name them, and they return what the view does).
-- Nothing for PUBLIC, nothing else on convo_private. A function added later is nobody's until it is listed here.
-- apply_grants makes the catalog say exactly this; self_check compares.
CREATE OR REPLACE FUNCTION convo_private.documented_grants()
RETURNS TABLE (object_kind text, object_name text, grantee text, privilege text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT 'SCHEMA', 'convo', r.grantee, 'USAGE'
      FROM unnest(ARRAY['convo_app', 'convo_reader', 'convo_admin']) AS r (grantee)
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, g.grantee, 'EXECUTE'
      FROM pg_proc p
      JOIN (VALUES ('convo_app', ARRAY['create_conversation', 'append_message', 'edit_and_resend', 'regenerate',
                                       'move_head', 'path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                       'begin_generation', 'complete_generation', 'fail_generation',
                                       'cancel_generation', 'effect_for_call', 'settle_effect', 'compensate_effect',
                                       'confirm_effect', 'decline_effect', 'begin_receipt', 'fill_receipt',
                                       'apply_receipt', 'fail_receipt', 'args_errors', 'generation_stale_after',
                                       'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                       'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                       'max_ref_length', 'request_messages', 'request_digest',
                                       'import_chatgpt', 'import_openwebui', 'import_librechat', 'import_history',
                                       'export_conversation', 'conversations', 'set_title', 'archive_conversation',
                                       'unarchive_conversation', 'delete_conversation', 'deletion_retention',
                                       'search_conversations', 'search_config', 'live_updates']),
                   ('convo_reader', ARRAY['path', 'path_at', 'head_at', 'head_history', 'alternatives',
                                          'effect_for_call', 'args_errors', 'generation_stale_after', 'self_check',
                                          'max_message_bytes', 'max_part_bytes', 'max_tool_input_bytes',
                                          'max_metadata_bytes', 'max_request_bytes', 'max_detail_bytes',
                                          'max_ref_length', 'request_messages', 'request_digest',
                                          'export_conversation', 'conversations', 'deletion_retention',
                                          'search_conversations', 'search_config', 'live_updates']),
                   ('convo_admin', ARRAY['register_tool', 'expire_receipts', 'erase_conversation', 'erase_owner',
                                         'import_conversation', 'restore_deleted_conversation', 'erase_due',
                                         'set_deletion_retention', 'set_search_config', 'set_live_updates'])) AS g (grantee, names)
        ON p.proname = ANY (g.names)
     WHERE p.pronamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'TABLE', c.oid::regclass::text, r.grantee, 'SELECT'
      FROM pg_class c
      JOIN (VALUES ('convo_reader', ARRAY['r', 'p', 'v']), ('convo_app', ARRAY['v'])) AS r (grantee, kinds)
        ON c.relkind::text = ANY (r.kinds)
     WHERE c.relnamespace = 'convo'::regnamespace
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text, r.grantee, 'EXECUTE'
      FROM pg_proc p
     CROSS JOIN unnest(ARRAY['convo_app', 'convo_reader']) AS r (grantee)
     WHERE p.pronamespace = 'convo_private'::regnamespace
       AND p.proname IN ('orphaned_applied_effects_rows', 'stale_pending_effects_rows', 'stale_generations_rows');
END;

-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

-- Give back a membership taken above.
-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
