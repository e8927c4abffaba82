-- notify_effect_event: sends every transition of an effect (each row of
-- tool_effect_events, its creation included) to channel convo_effect, from
-- the transaction that made it (a rolled-back transition is never heard).
-- The payload holds ids, seq and states only, for listeners of any owner:
-- never arguments, evidence, references, error codes or the actor.
CREATE OR REPLACE FUNCTION convo_private.notify_effect_event()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('convo_effect', json_build_object(
        'kind', 'effect', 'conversation_id', NEW.conversation_id, 'effect_id', NEW.effect_id,
        'seq', NEW.seq, 'from_state', NEW.from_state, 'state', NEW.to_state)::text);
    RETURN NULL;
END;
$$;
