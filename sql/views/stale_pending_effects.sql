-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Filtered by owner like
-- orphaned_applied_effects: the caller's, or every owner for convo_reader;
-- a security_barrier like it, so the caller's conditions run only on the
-- rows it returns.
CREATE OR REPLACE VIEW convo.stale_pending_effects WITH (security_barrier = true) AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.state,
       e.idempotency_key,
       e.requested_at,
       e.deadline_at
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state IN ('pending', 'awaiting_confirmation')
   AND e.deadline_at < clock_timestamp()
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')));

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';
