-- stale_generations: generations still streaming after
-- generation_stale_after() (10 minutes): a worker died mid-stream.
CREATE OR REPLACE VIEW convo.stale_generations AS
SELECT g.conversation_id,
       g.id AS generation_id,
       g.model,
       g.prompt_message_id,
       g.started_at
  FROM convo.generations g
 WHERE g.state = 'streaming'
   AND g.started_at < clock_timestamp() - convo.generation_stale_after();

COMMENT ON VIEW convo.stale_generations IS 'Generations still streaming after generation_stale_after() (10 minutes).';
