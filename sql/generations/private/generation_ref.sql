-- generation_ref: the generation a call names, locked for its transition.
-- CV003 if it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.generation_ref(p_conversation_id uuid, p_generation_id uuid)
RETURNS convo.generations
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_generation convo.generations;
BEGIN
    IF p_generation_id IS NULL THEN
        RAISE EXCEPTION 'p_generation_id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_generation FROM convo.generations g
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_generation;
    END IF;
    PERFORM convo_private.raise_not_found('generation', p_generation_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.generations', 'id', p_generation_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;
