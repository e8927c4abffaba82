-- move_live_path: keeps convo.live_path, the derived index of the live path,
-- equal to the path from the root to p_head_id. An append (the new head a
-- child of the old one, the last row) is one INSERT. Any other move walks up
-- from the new head only until it meets a message already on the live path
-- (the fork), drops the rows below the fork and inserts the walked ones: a
-- switch costs the messages that change, never the whole conversation.
-- Called by log_head_move, so every head move, the API's or a direct UPDATE,
-- moves the index in the same transaction.
CREATE OR REPLACE FUNCTION convo_private.move_live_path(p_conversation_id uuid, p_head_id uuid, p_old_head_id uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id      uuid := p_head_id;
    v_depth   int;
    v_parent  uuid;
    v_fork    int := -1;
    v_ids     uuid[] := '{}';
    v_depths  int[] := '{}';
    v_parents uuid[] := '{}';
BEGIN
    INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
    SELECT p_conversation_id, m.depth, m.id,
           (SELECT max(s.sibling_index) FROM convo.messages s
             WHERE s.conversation_id = p_conversation_id AND s.parent_id = m.parent_id)
      FROM convo.messages m
     WHERE m.conversation_id = p_conversation_id AND m.id = p_head_id AND m.parent_id = p_old_head_id
        ON CONFLICT (conversation_id, depth) DO UPDATE
       SET message_id = excluded.message_id, sibling_count = excluded.sibling_count, since = clock_timestamp();
    IF FOUND THEN
        RETURN;
    END IF;
    WHILE v_id IS NOT NULL LOOP
        SELECT m.depth, m.parent_id INTO v_depth, v_parent
          FROM convo.messages m
         WHERE m.conversation_id = p_conversation_id AND m.id = v_id;
        IF EXISTS (SELECT 1 FROM convo.live_path l
                    WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth AND l.message_id = v_id) THEN
            v_fork := v_depth;
            EXIT;
        END IF;
        v_ids := array_append(v_ids, v_id);
        v_depths := array_append(v_depths, v_depth);
        v_parents := array_append(v_parents, v_parent);
        IF v_parent IS NOT NULL AND EXISTS (
               SELECT 1 FROM convo.live_path l
                WHERE l.conversation_id = p_conversation_id AND l.depth = v_depth - 1 AND l.message_id = v_parent) THEN
            v_fork := v_depth - 1;
            EXIT;
        END IF;
        v_id := v_parent;
    END LOOP;
    DELETE FROM convo.live_path l WHERE l.conversation_id = p_conversation_id AND l.depth > v_fork;
    IF cardinality(v_ids) > 0 THEN
        INSERT INTO convo.live_path (conversation_id, depth, message_id, sibling_count)
        SELECT p_conversation_id, w.depth, w.id,
               coalesce((SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE s.conversation_id = p_conversation_id AND s.parent_id = w.parent_id),
                        (SELECT max(s.sibling_index) FROM convo.messages s
                          WHERE w.parent_id IS NULL AND s.conversation_id = p_conversation_id AND s.parent_id IS NULL))
          FROM unnest(v_ids, v_depths, v_parents) AS w (id, depth, parent_id);
    END IF;
END;
$$;
