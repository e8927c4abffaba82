-- effect_ref: the effect a call names, locked for its transition. CV003 if
-- it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo.effect_ref(p_conversation_id uuid, p_effect_id uuid)
RETURNS convo.tool_effects
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
DECLARE
    v_effect convo.tool_effects;
    v_other  uuid;
BEGIN
    IF p_effect_id IS NULL THEN
        RAISE EXCEPTION 'p_effect_id is required' USING ERRCODE = 'CV011';
    END IF;
    SELECT * INTO v_effect FROM convo.tool_effects e
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_effect;
    END IF;
    SELECT e.conversation_id INTO v_other FROM convo.tool_effects e WHERE e.id = p_effect_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'effect % belongs to another conversation', p_effect_id
            USING ERRCODE = 'CV003',
                  DETAIL = format('effect %s, conversation %s, named in conversation %s', p_effect_id, v_other, p_conversation_id);
    END IF;
    RAISE EXCEPTION 'effect % does not exist', p_effect_id
        USING ERRCODE = 'CV002', DETAIL = format('effect %s, conversation %s', p_effect_id, p_conversation_id);
END;
$$;
