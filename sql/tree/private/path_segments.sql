-- path_segments: the branches that the path from the root to p_head_id runs
-- through, each with the deepest message of it on the path. A branch is a run
-- of first children, so there is one row per branch point on the path (one
-- row for a conversation that never branched): the walk up costs the number
-- of branch points, not the number of messages. PL/pgSQL, so its plan is cached.
CREATE OR REPLACE FUNCTION convo_private.path_segments(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (branch_id uuid, max_depth int)
LANGUAGE plpgsql
STABLE
ROWS 4
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE segments (branch_id, max_depth) AS (
        SELECT h.branch_id, h.depth
          FROM convo.messages h
         WHERE h.conversation_id = p_conversation_id AND h.id = p_head_id
        UNION ALL
        SELECT fork.branch_id, fork.depth
          FROM segments s
          JOIN convo.messages start ON start.conversation_id = p_conversation_id AND start.id = s.branch_id
          JOIN convo.messages fork ON fork.conversation_id = p_conversation_id AND fork.id = start.parent_id
    )
    SELECT s.branch_id, s.max_depth FROM segments s;
END;
$$;
