-- path_parts: the parts of every message on the path from the root to
-- p_head_id, one row a part, with its message's depth, id and role: the
-- path read once (path_segments, one index range scan per branch point)
-- and each message's stored parts unnested, for the request renderings.
CREATE OR REPLACE FUNCTION convo_private.path_parts(p_conversation_id uuid, p_head_id uuid)
RETURNS TABLE (depth int, message_id uuid, role text, part_ordinal bigint, part jsonb)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT m.depth, m.id, m.role, e.part_ordinal, e.part
      FROM convo_private.path_segments(p_conversation_id, p_head_id) s
      JOIN convo.messages m
        ON m.conversation_id = p_conversation_id AND m.branch_id = s.branch_id AND m.depth <= s.max_depth
     CROSS JOIN LATERAL jsonb_array_elements(m.parts) WITH ORDINALITY AS e (part, part_ordinal);
END;
$$;
