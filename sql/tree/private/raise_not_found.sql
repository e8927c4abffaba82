-- raise_not_found: the error for an id that names nothing in the
-- conversation a call names: CV003 when it names a row of another
-- conversation (p_other_conversation_id) that the caller may see, CV002 when
-- it names none, or only rows of an owner the caller may not see. The
-- other conversation is one stored beside the first (other_conversation).
CREATE OR REPLACE FUNCTION convo_private.raise_not_found(
    p_what                  text,
    p_id                    text,
    p_conversation_id       uuid,
    p_other_conversation_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_other_conversation_id IS NOT NULL
       AND convo_private.sees_owner(convo_private.owner_beside(p_conversation_id, p_other_conversation_id)) THEN
        RAISE EXCEPTION '% % belongs to another conversation', p_what, p_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('%s %s, conversation %s, named in conversation %s',
                                  p_what, p_id, p_other_conversation_id, p_conversation_id);
    END IF;
    RAISE EXCEPTION '% % does not exist', p_what, p_id
        USING ERRCODE = 'CV002', DETAIL = format('%s %s, conversation %s', p_what, p_id, p_conversation_id);
END;
$$;
