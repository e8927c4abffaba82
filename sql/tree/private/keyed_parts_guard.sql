-- keyed_parts_guard: a keyed part inserted outside pgconvo's code must be
-- its message's part at that ordinal, of a type addressed by key (tool_use,
-- tool_result, attachment), with its type, call id and tool name as the
-- part says; it computes nothing (CV008 otherwise).
CREATE OR REPLACE FUNCTION convo_private.keyed_parts_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_part jsonb;
BEGIN
    SELECT m.parts -> NEW.ordinal INTO v_part
      FROM convo.messages m WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id;
    IF v_part IS NULL OR v_part ->> 'type' NOT IN ('tool_use', 'tool_result', 'attachment')
       OR NEW.type IS DISTINCT FROM v_part ->> 'type'
       OR NEW.tool_call_id IS DISTINCT FROM (CASE v_part ->> 'type' WHEN 'tool_use' THEN v_part ->> 'id'
                                                                   WHEN 'tool_result' THEN v_part ->> 'tool_use_id' END)
       OR NEW.tool_name IS DISTINCT FROM (CASE WHEN v_part ->> 'type' = 'tool_use' THEN v_part ->> 'name' END) THEN
        RAISE EXCEPTION 'a keyed part must be its message''s part at that ordinal'
            USING ERRCODE = 'CV008',
                  DETAIL = format('conversation %s, message %s, ordinal %s', NEW.conversation_id, NEW.message_id, NEW.ordinal);
    END IF;
    RETURN NEW;
END;
$$;
