-- rerun_candidate: the effect that a new call of p_tool_name would run
-- again, for record_tool_call: the latest effect of the same tool called
-- at the same fork point by a message off the new call's path (given as
-- its segments, path_segments: each branch and the deepest of it on the
-- path). A branch is a chain written top down, so what is off the path is
-- found by position, not by walking the calls: every call on a branch that
-- is no segment of the path, and the calls on a segment's branch below the
-- segment's end. Each branch with calls of the tool at the fork point is
-- visited once (tool_effect_calls_rerun_idx, one descent each), and on
-- each the deepest call off the path is its latest (ledger_problems holds
-- a branch's calls to that order; the index ends in it); the latest of those
-- across branches is the answer. The calls of an agent turn on the path
-- are never read, so the next call of a turn of N calls costs the same
-- whatever N (before, each call read every earlier call of the turn). A
-- call without a place (one written on a distributed database before calls
-- kept theirs: its upgrade could not fill them) is checked against the path
-- as before; only such calls are read that way.
CREATE OR REPLACE FUNCTION convo_private.rerun_candidate(
    p_conversation_id uuid,
    p_fork            uuid,
    p_tool_name       text,
    p_branches        uuid[],
    p_depths          int[])
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
-- The fork point is compared as the index keeps it, with the conversation
-- standing for NULL (the conversation itself), so that it is an equality
-- and the index's order by branch serves each step (IS NULL would not);
-- the calls of a branch are then checked for the fork point itself. With
-- every step an equality on the index's leading columns, the plan that is
-- cached is the index's whatever the ledger held when it was made (an agent
-- turn of 400 calls in one transaction on a new database: 1.3 s), so a
-- call no longer plans it afresh (it did, under force_custom_plan, while
-- the lookup read every earlier call at the fork point).
AS $$
BEGIN
    RETURN (
        WITH RECURSIVE branches (branch_id) AS (
            (SELECT l.branch_id
               FROM convo.tool_effect_calls l
              WHERE l.conversation_id = p_conversation_id
                AND coalesce(l.fork_point_id, l.conversation_id) = coalesce(p_fork, p_conversation_id)
                AND l.tool_name = p_tool_name
              ORDER BY l.branch_id
              LIMIT 1)
            UNION ALL
            SELECT (SELECT l.branch_id
                      FROM convo.tool_effect_calls l
                     WHERE l.conversation_id = p_conversation_id
                       AND coalesce(l.fork_point_id, l.conversation_id) = coalesce(p_fork, p_conversation_id)
                       AND l.tool_name = p_tool_name
                       AND l.branch_id > b.branch_id
                     ORDER BY l.branch_id
                     LIMIT 1)
              FROM branches b
             WHERE b.branch_id IS NOT NULL)
        SELECT c.effect_id
          FROM (SELECT c.effect_id, c.decided_at, c.tool_call_id
                  FROM branches b
                  LEFT JOIN unnest(p_branches, p_depths) AS s (branch_id, max_depth) ON s.branch_id = b.branch_id
                 CROSS JOIN LATERAL (
                        SELECT l.effect_id, l.decided_at, l.tool_call_id
                          FROM convo.tool_effect_calls l
                         WHERE l.conversation_id = p_conversation_id
                           AND coalesce(l.fork_point_id, l.conversation_id) = coalesce(p_fork, p_conversation_id)
                           AND l.fork_point_id IS NOT DISTINCT FROM p_fork
                           AND l.tool_name = p_tool_name
                           AND l.branch_id = b.branch_id
                           AND l.depth > coalesce(s.max_depth, -1)
                           AND l.decision IN ('execute', 'reuse', 'confirm')
                         ORDER BY l.depth DESC, l.decided_at DESC, l.tool_call_id DESC
                         LIMIT 1) c
                 WHERE b.branch_id IS NOT NULL
                UNION ALL
                -- Calls without a place (written on a distributed database
                -- before calls kept one): each checked against the path.
                (SELECT l.effect_id, l.decided_at, l.tool_call_id
                   FROM convo.tool_effect_calls l
                  WHERE l.conversation_id = p_conversation_id
                    AND coalesce(l.fork_point_id, l.conversation_id) = coalesce(p_fork, p_conversation_id)
                    AND l.fork_point_id IS NOT DISTINCT FROM p_fork
                    AND l.tool_name = p_tool_name
                    AND l.branch_id IS NULL
                    AND l.decision IN ('execute', 'reuse', 'confirm')
                    AND NOT convo_private.is_on_segments(p_conversation_id, l.message_id, p_branches, p_depths)
                  ORDER BY l.decided_at DESC, l.tool_call_id DESC
                  LIMIT 1)) c
         ORDER BY c.decided_at DESC, c.tool_call_id DESC
         LIMIT 1);
END;
$$;
