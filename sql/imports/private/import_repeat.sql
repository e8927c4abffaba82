-- import_repeat: the conversation an import from another product made
-- before for this owner from the same source with the same content (by
-- owner, format, source key and the keyed digest of the source text in
-- convo.imports, so ids given under an earlier rule are found too, and no
-- other owner's row is read or locked; a record a restore carried
-- (import_id set) is history, not an import here), or NULL. A repeat
-- writes nothing; the same source with other content is merged into that
-- conversation by import_tree. A deleted conversation is no repeat to a
-- caller that writes for its owner alone (sees_conversation): the import goes on
-- to import_tree's merge, whose lock answers CV002 for it, as for every call
-- of the owner's. (p_where is unused: a repeat refuses nothing.)
CREATE OR REPLACE FUNCTION convo_private.import_repeat(
    p_owner_id   text,
    p_format     text,
    p_source_key text,
    p_digest     text,
    p_where      text)
RETURNS uuid
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT i.conversation_id FROM convo.imports i
     WHERE i.owner_id = p_owner_id AND i.format = p_format AND i.source_key = p_source_key
       AND i.digest = p_digest AND i.import_id IS NULL
       AND EXISTS (SELECT 1 FROM convo.conversations c
                    WHERE c.id = i.conversation_id AND convo_private.sees_conversation(c.owner_id, c.deleted_at, true))
     LIMIT 1;
END;
