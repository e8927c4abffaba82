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
    PERFORM convo_private.write_messages(p_conversation_id, v_head,
        p_messages => ARRAY[(v_id, v_head, p_role, p_parts, NULL, NULL, false)::convo_private.new_message],
        p_head => v_id, p_head_reason => 'append', p_moved_by => p_moved_by);
    RETURN v_id;
END;
$$;

COMMENT ON FUNCTION convo.append_message(uuid, text, jsonb, uuid, uuid, text) IS
    'Append a message under the current head and move the head to it; compare-and-set with p_expected_head, retry-safe by p_message_id.';
