-- log_change: one row of a conversation's change log (its title or its
-- archive state, before and after, who and when), numbered per
-- conversation under the conversation's lock, in the transaction that made
-- the change. set_title, set_archived and import_tree call it for
-- pgconvo's own changes, log_direct_change for an UPDATE outside the API.
CREATE OR REPLACE FUNCTION convo_private.log_change(
    p_conversation_id uuid,
    p_field           text,
    p_old             text,
    p_new             text,
    p_changed_by      text,
    p_import_id       uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO convo.conversation_changes (conversation_id, seq, field, old_value, new_value, changed_by, import_id)
    SELECT p_conversation_id, coalesce(max(l.seq), 0) + 1, p_field, p_old, p_new, p_changed_by, p_import_id
      FROM convo.conversation_changes l
     WHERE l.conversation_id = p_conversation_id;
END;
$$;
