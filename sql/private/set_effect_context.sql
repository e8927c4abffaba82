-- set_effect_context: names the actor and evidence that tool_effects_log
-- writes with the next transition; called with NULLs right after, so a later
-- UPDATE in the same transaction is logged with the caller and no evidence.
CREATE OR REPLACE FUNCTION convo_private.set_effect_context(p_actor text, p_evidence jsonb)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT set_config('convo.effect_actor', coalesce(p_actor, ''), true),
           set_config('convo.effect_evidence', coalesce(p_evidence::text, ''), true);
END;
