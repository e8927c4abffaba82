-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream. Read
-- through convo_private.stale_generations_rows, filtered by owner, and a
-- security_barrier, like orphaned_applied_effects: no condition of the
-- caller's reaches a table scan, and its own run only on the rows it
-- returns.
CREATE OR REPLACE VIEW convo.stale_generations WITH (security_barrier = true) AS
SELECT r.conversation_id, r.generation_id, r.model, r.prompt_message_id, r.started_at
  FROM convo_private.stale_generations_rows() r;

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';
