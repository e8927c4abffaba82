-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- It reads its rows through convo_private.orphaned_applied_effects_rows,
-- which filters by owner (the caller's convo.owner_id, or every owner for a
-- member of convo_reader) and, a PL/pgSQL function, takes no condition of
-- the caller's: a leakproof condition pushed down to a table scan below the
-- owner filter would have its every-owner row count shown by EXPLAIN
-- ANALYZE. security_barrier besides: the caller's own conditions run only
-- on the rows the view returns. Its readers need EXECUTE on that function
-- (a view's functions are called with the reader's rights); granted with
-- the view.
CREATE OR REPLACE VIEW convo.orphaned_applied_effects WITH (security_barrier = true) AS
SELECT r.conversation_id, r.effect_id, r.tool_name, r.external_ref, r.amount_minor,
       r.currency::char(3) AS currency, r.settled_at, r.tool_call_ids
  FROM convo_private.orphaned_applied_effects_rows() r;

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';
