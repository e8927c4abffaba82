-- generation_ref: the generation a call names, locked for its transition.
-- CV003 if it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo.generation_ref(p_conversation_id uuid, p_generation_id uuid)
RETURNS convo.generations
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_generation convo.generations;
    v_other      uuid;
BEGIN
    IF p_generation_id IS NULL THEN
        RAISE EXCEPTION 'p_generation_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_generation FROM convo.generations g
     WHERE g.conversation_id = p_conversation_id AND g.id = p_generation_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_generation;
    END IF;
    SELECT g.conversation_id INTO v_other FROM convo.generations g WHERE g.id = p_generation_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'generation % belongs to another conversation', p_generation_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('generation %s, conversation %s, named in conversation %s', p_generation_id, v_other, p_conversation_id);
    END IF;
    RAISE EXCEPTION 'generation % does not exist', p_generation_id
        USING ERRCODE = 'CV002', DETAIL = format('generation %s, conversation %s', p_generation_id, p_conversation_id);
END;
$$;
