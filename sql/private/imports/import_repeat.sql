-- import_repeat: the conversation an import from another product made
-- before for this owner from the same source (by owner, format and source
-- key in convo.imports, so ids given under an earlier rule are found too,
-- and no other owner's row is read or locked; a record a restore carried
-- (import_id set) is history, not an import here), or NULL for a new one. The
-- same source text (its keyed digest) is a repeat, which writes nothing;
-- other content is CV009, naming the source key and the way out.
CREATE OR REPLACE FUNCTION convo_private.import_repeat(
    p_owner_id   text,
    p_format     text,
    p_source_key text,
    p_digest     text,
    p_where      text)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_import convo.imports;
BEGIN
    SELECT * INTO v_import FROM convo.imports i
     WHERE i.owner_id = p_owner_id AND i.format = p_format AND i.source_key = p_source_key AND i.import_id IS NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF v_import.digest = p_digest THEN
        RETURN v_import.conversation_id;
    END IF;
    RAISE EXCEPTION 'source % was imported before for owner % with other content', p_source_key, p_owner_id
        USING ERRCODE = 'CV009',
              DETAIL = format('%s; imported before as conversation %s', p_where, v_import.conversation_id),
              HINT = 'The file is a later export of the same chat, which is not merged into the earlier import; '
                     'import it under another owner to keep both.';
END;
$$;
