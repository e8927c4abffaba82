-- insert_message: writes one message with its parts. The triggers check the
-- parts, place the message in the tree and write one message_parts row a
-- part; a failure anywhere aborts the whole call.
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
    INSERT INTO convo.messages (conversation_id, id, parent_id, role, branch_reason, parts)
    VALUES (p_conversation_id, p_message_id, p_parent_id, p_role, p_branch_reason, p_parts);
END;
$$;
