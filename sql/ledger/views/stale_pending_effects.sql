-- stale_pending_effects: effects still pending or awaiting confirmation past
-- their deadline, with the key a sweeper re-sends (or looks up) under. A
-- pending effect is "unknown", never "not done": it is not failed
-- automatically, only settled on evidence. Read through
-- convo_private.stale_pending_effects_rows, filtered by owner (the
-- caller's, or every owner for convo_reader), and a security_barrier, like
-- orphaned_applied_effects: no condition of the caller's reaches a table
-- scan, and its own run only on the rows it returns.
CREATE OR REPLACE VIEW convo.stale_pending_effects WITH (security_barrier = true) AS
SELECT r.conversation_id, r.effect_id, r.tool_name, r.state, r.idempotency_key, r.requested_at, r.deadline_at
  FROM convo_private.stale_pending_effects_rows() r;

COMMENT ON VIEW convo.stale_pending_effects IS
    'Effects pending or awaiting confirmation past their deadline, with the key to re-send or look up under.';
