-- move_live_path: keeps convo.live_path, the derived index of the live
-- path, equal to the segments of the path from the root to p_head_id: one
-- row per branch the path runs through (a branch is a run of first
-- children), from the depth where it starts to the deepest of it on the
-- path. It walks up from the head one segment at a time (three key lookups
-- each: the live path, the branch's start, its parent) until it meets a branch already on the live path (the fork), cuts
-- that one at the fork and drops the rows below it: a move costs the
-- segments that change, never the conversation. path reads the messages
-- of each segment as one index range scan.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_branch   uuid;
    v_depth    int;
    v_start    int;
    v_parent   uuid;
    v_shared   int;
    v_branches uuid[] := '{}';
    v_mins     int[] := '{}';
    v_maxs     int[] := '{}';
BEGIN
    SELECT m.branch_id, m.depth INTO v_branch, v_depth
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id;
    WHILE v_branch IS NOT NULL LOOP
        SELECT l.min_depth INTO v_shared
          FROM convo.live_path l
         WHERE l.conversation_id = p_conversation_id AND l.branch_id = v_branch;
        EXIT WHEN FOUND;
        -- A branch's id is its first message's.
        SELECT m.depth, m.parent_id INTO v_start, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_branch;
        v_branches := v_branches || v_branch;
        v_mins := v_mins || v_start;
        v_maxs := v_maxs || v_depth;
        v_branch := NULL;
        IF v_parent IS NOT NULL THEN
            SELECT m.branch_id, m.depth INTO v_branch, v_depth
              FROM convo.messages m
             WHERE m.conversation_id = p_conversation_id AND m.id = v_parent;
        END IF;
    END LOOP;
    IF v_shared IS NOT NULL THEN
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id AND l.min_depth > v_shared;
        UPDATE convo.live_path l SET max_depth = v_depth
         WHERE l.conversation_id = p_conversation_id AND l.min_depth = v_shared;
    ELSE
        DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id;
    END IF;
    INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
    SELECT p_conversation_id, s.min_depth, s.branch_id, s.max_depth
      FROM unnest(v_mins, v_branches, v_maxs) AS s (min_depth, branch_id, max_depth);
END;
$$;
