-- tool_effects_log: appends every transition of an effect (its creation
-- from 'requested' included) to tool_effect_events, with the actor and
-- evidence named by set_effect_context, or the caller and none (the role
-- SET ROLE set, else the login role: convo_private.caller's expression,
-- written out because this trigger runs as the writing role, which may
-- not reach convo_private). The
-- settings are honoured only for pgconvo's own transitions (current_user
-- convo_owner): any session can set them, so they never name who did a
-- transition made by anyone else (a superuser's direct UPDATE). An import
-- (is_import) writes the exported events instead.
CREATE OR REPLACE FUNCTION convo_private.tool_effects_log()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_import(NEW.conversation_id) THEN
        RETURN NULL; -- an import writes the exported events itself
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        RETURN NULL; -- no transition (tool_effects_transition let only an identical row through)
    END IF;
    INSERT INTO convo.tool_effect_events (conversation_id, effect_id, from_state, to_state, actor, evidence)
    VALUES (NEW.conversation_id, NEW.id, CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END, NEW.state,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_actor', true), ''), coalesce(nullif(current_setting('role'), 'none'), session_user::text))
                 ELSE coalesce(nullif(current_setting('role'), 'none'), session_user::text) END,
            CASE WHEN current_user = 'convo_owner'
                 THEN coalesce(nullif(current_setting('convo.effect_evidence', true), '')::jsonb, '{}')
                 ELSE '{}' END);
    RETURN NULL;
END;
$$;
