-- is_on_segments: whether a message sits on a path given as its segments
-- (path_segments: each branch and the deepest of it on the path), by one
-- key lookup. A caller that checks many messages against one path reads
-- the segments once and asks this for each (record_tool_call's re-run
-- candidates); a function, so the lookup is by key whatever the planner
-- would make of a join.
CREATE OR REPLACE FUNCTION convo_private.is_on_segments(p_conversation_id uuid, p_message_id uuid,
                                                        p_branches uuid[], p_depths int[])
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
-- One plan for every call: a key lookup whatever the arrays hold (planned
-- anew for each call, it cost ten times the lookup).
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1
          FROM convo.messages m
          JOIN unnest(p_branches, p_depths) AS s (branch_id, max_depth)
            ON s.branch_id = m.branch_id AND m.depth <= s.max_depth
         WHERE m.conversation_id = p_conversation_id AND m.id = p_message_id);
END;
$$;
