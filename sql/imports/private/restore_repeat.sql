-- restore_repeat: whether conversation p_conversation_id, as it stands, is
-- what restoring p_export for p_owner_id made or would make: the owner's,
-- and restored here before from the same document (its digest on the
-- restore's record) or exporting to exactly it. import_conversation asks
-- before it writes and again when its insert waited for another session's
-- restore under the id: either way a repeat returns the id, and anything
-- else under that id is CV009.
CREATE OR REPLACE FUNCTION convo_private.restore_repeat(
    p_owner_id        text,
    p_conversation_id uuid,
    p_digest          text,
    p_export          jsonb)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = p_conversation_id AND c.owner_id = p_owner_id)
       AND (EXISTS (SELECT 1 FROM convo.imports i
                     WHERE i.conversation_id = p_conversation_id AND i.format = 'pgconvo' AND i.import_id IS NULL
                       AND i.digest = p_digest)
            OR convo_private.export_of(p_conversation_id)::text = p_export::text);
END;
$$;
