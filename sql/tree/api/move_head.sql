-- move_head: a branch switch: the head names any message of the conversation,
-- moved through write_messages (no new message). p_reason is free text in
-- lower snake case; 'create', 'import' and 'direct_update' are kept for the
-- database's own log rows (each begins a log, or marks a change outside the
-- API, and a restore reads them so). Moving to where the head is writes nothing.
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
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_head uuid;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,62}$' OR p_reason IN ('create', 'import', 'direct_update') THEN
        RAISE EXCEPTION 'invalid head-move reason %', coalesce(quote_literal(p_reason), 'NULL')
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, message %s', p_conversation_id, p_message_id),
                  HINT = 'A reason is 1 to 63 characters of a-z, 0-9 and _, starting with a letter; create, import and direct_update are reserved.';
    END IF;
    v_head := convo_private.lock_conversation(p_conversation_id);
    PERFORM convo_private.message_ref(p_conversation_id, p_message_id);
    IF p_expected_head IS NOT NULL THEN
        PERFORM convo_private.check_expected_head(p_conversation_id, p_expected_head, v_head);
    END IF;
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_head => p_message_id, p_head_reason => p_reason, p_moved_by => p_moved_by);
END;
$$;

COMMENT ON FUNCTION convo.move_head(uuid, uuid, text, uuid, text) IS
    'Switch branch: move the head to any message of the conversation (logged with p_reason); a no-op if it is already there.';
