-- rerun_candidate: the effect that a new call of p_tool_name on
-- p_message_id would run again, for record_tool_call: the latest effect of
-- the same tool called at the same fork point by another message that is
-- not on this message's path (given as its segments, path_segments). The
-- calls of this very message are on its path by definition: two ranges of
-- tool_effect_calls_fork_idx skip them, so N calls in one message cost N
-- lookups, not N squared; a candidate on the path (an earlier call of the
-- same agent turn) is looked up against the segments (is_on_segments), not
-- walked again.
CREATE OR REPLACE FUNCTION convo_private.rerun_candidate(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_fork            uuid,
    p_tool_name       text,
    p_branches        uuid[],
    p_depths          int[])
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
-- Planned for each call: the one statement of record_tool_call whose plan
-- depends on the fork point and the ledger's size. Its generic plan (even
-- with the fork point as an equality), made on a nearly empty ledger, read
-- every effect of the conversation and the candidates for each: an agent
-- turn of 400 calls in one transaction on a new database took 170 s, not
-- 2.3 s.
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN (SELECT l.effect_id
              FROM convo.tool_effect_calls l
              JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
             WHERE l.conversation_id = p_conversation_id
               AND (l.fork_point_id = p_fork OR (p_fork IS NULL AND l.fork_point_id IS NULL))
               AND (l.message_id < p_message_id OR l.message_id > p_message_id)
               AND e.tool_name = p_tool_name
               AND l.decision IN ('execute', 'reuse', 'confirm')
               AND NOT convo_private.is_on_segments(p_conversation_id, l.message_id, p_branches, p_depths)
             ORDER BY l.decided_at DESC, l.tool_call_id DESC
             LIMIT 1);
END;
$$;
