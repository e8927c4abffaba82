-- effect_ref: the effect a call names, locked for its transition. CV003 if
-- it belongs to another conversation, CV002 if there is none.
CREATE OR REPLACE FUNCTION convo_private.effect_ref(p_conversation_id uuid, p_effect_id uuid)
RETURNS convo.tool_effects
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_effect convo.tool_effects;
BEGIN
    IF p_effect_id IS NULL THEN
        RAISE EXCEPTION 'p_effect_id is required' USING ERRCODE = 'CV011',
            DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT * INTO v_effect FROM convo.tool_effects e
     WHERE e.conversation_id = p_conversation_id AND e.id = p_effect_id
       FOR UPDATE;
    IF FOUND THEN
        RETURN v_effect;
    END IF;
    PERFORM convo_private.raise_not_found('effect', p_effect_id::text, p_conversation_id,
        convo_private.other_conversation(p_conversation_id, 'convo.tool_effects', 'id', p_effect_id::text));
    RETURN NULL; -- not reached: raise_not_found always raises
END;
$$;
