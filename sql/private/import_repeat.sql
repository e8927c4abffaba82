-- import_repeat: whether an import's conversation id is already taken:
-- false if not; true if by this very import (same owner, and the same
-- source text, by its digest in metadata.import): a repeat, which writes
-- nothing; CV009 if by anything else (the same source with other content,
-- a later export of a conversation that went on, or an erased one). Locks
-- the row as every writer does.
CREATE OR REPLACE FUNCTION convo_private.import_repeat(p_conversation_id uuid, p_owner_id text, p_digest text, p_where text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_existing convo.conversations;
BEGIN
    SELECT * INTO v_existing FROM convo.conversations c WHERE c.id = p_conversation_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_existing.owner_id = p_owner_id AND v_existing.metadata -> 'import' ->> 'digest' = p_digest THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'conversation % was imported before from the same source with other content', p_conversation_id
        USING ERRCODE = 'CV009', DETAIL = p_where,
              HINT = 'An import is not merged into an earlier one: the source changed since it was imported.';
END;
$$;
