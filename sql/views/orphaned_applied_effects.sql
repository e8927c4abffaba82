-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
-- The view runs as its owner, so it filters by owner itself (the caller's
-- convo.owner_id, or every owner when the caller, the role SET ROLE set or
-- else the login role, as convo_private.caller says, is a member of
-- convo_reader), and walks the path in
-- plain SQL (as path_segments does): a caller may use only pg_catalog's
-- functions through it, not the private schema's. security_barrier: the
-- caller's own conditions run only on the rows the view returns, never
-- below its owner filter (a cheap function of the caller's in a WHERE
-- clause would otherwise be shown every owner's rows).
CREATE OR REPLACE VIEW convo.orphaned_applied_effects WITH (security_barrier = true) AS
SELECT e.conversation_id,
       e.id AS effect_id,
       e.tool_name,
       e.external_ref,
       e.amount_minor,
       e.currency,
       e.settled_at,
       ARRAY(SELECT l.tool_call_id FROM convo.tool_effect_calls l
              WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
              ORDER BY l.decided_at) AS tool_call_ids
  FROM convo.tool_effects e
  JOIN convo.conversations c ON c.id = e.conversation_id
 WHERE e.state = 'applied'
   AND (c.owner_id = current_setting('convo.owner_id', true)
        OR (SELECT pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user::text)::name, 'convo_reader', 'USAGE')))
   AND NOT EXISTS (
        WITH RECURSIVE segments (branch_id, max_depth) AS (
            SELECT h.branch_id, h.depth
              FROM convo.messages h
             WHERE h.conversation_id = c.id AND h.id = c.head_message_id
            UNION ALL
            SELECT fork.branch_id, fork.depth
              FROM segments s
              JOIN convo.messages start ON start.conversation_id = c.id AND start.id = s.branch_id
              JOIN convo.messages fork ON fork.conversation_id = c.id AND fork.id = start.parent_id
        )
        SELECT 1
          FROM convo.tool_effect_calls l
          JOIN convo.messages m ON m.conversation_id = l.conversation_id AND m.id = l.message_id
          JOIN segments s ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
         WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id);

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head (the caller''s owner, or all for convo_reader).';
