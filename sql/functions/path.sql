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
