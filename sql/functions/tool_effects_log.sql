-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or session_user and none.
CREATE OR REPLACE FUNCTION convo.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, convo
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            coalesce(nullif(current_setting('convo.effect_actor', true), ''), session_user),
            coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}'));
    RETURN NULL;
END;
$$;
