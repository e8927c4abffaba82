-- insert_message: writes one message and its parts. The triggers place it in
-- the tree and check each part; a failure anywhere aborts the whole call.
CREATE OR REPLACE FUNCTION convo.insert_message(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parent_id       uuid,
    p_role            text,
    p_parts           jsonb,
    p_branch_reason   text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('system', 'user', 'assistant', 'tool') THEN
        RAISE EXCEPTION 'unknown role %', coalesce(p_role, 'NULL')
            USING ERRCODE = 'CV011', HINT = 'Roles are system, user, assistant and tool.';
    END IF;
    PERFORM convo.check_parts(p_parts);
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason)
    VALUES (p_conversation_id, p_message_id, p_parent_id, p_role, p_branch_reason);
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, body)
    SELECT p_conversation_id, p_message_id, e.ordinality - 1, e.part
      FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e(part, ordinality);
END;
$$;
