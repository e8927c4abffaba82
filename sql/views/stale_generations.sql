-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Filtered
-- by owner like orphaned_applied_effects, and a security_barrier like it:
-- the caller's conditions run only on the rows it returns.
CREATE OR REPLACE VIEW convo.stale_generations WITH (security_barrier = true) AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
  JOIN convo.conversations c ON c.id = g.conversation_id
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';
