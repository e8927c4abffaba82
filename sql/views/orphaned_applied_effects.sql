-- orphaned_applied_effects: applied effects none of whose tool calls sits on
-- the path from the root to its conversation's current head: charges that
-- nobody is looking at any more. Reachability is computed, never stored, so
-- a later branch switch cannot make it wrong. What to do (refund, ticket,
-- nothing) is a business decision: the view only surfaces the set.
CREATE OR REPLACE VIEW convo.orphaned_applied_effects AS
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
   AND NOT EXISTS (SELECT 1 FROM convo.tool_effect_calls l
                    WHERE l.conversation_id = e.conversation_id AND l.effect_id = e.id
                      AND convo.is_on_path(l.conversation_id, l.message_id, c.head_message_id));

COMMENT ON VIEW convo.orphaned_applied_effects IS
    'Applied effects none of whose tool calls is on the path from the root to the current head.';
