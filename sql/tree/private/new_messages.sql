-- new_messages: write_messages' new messages from arrays of their fields,
-- position for position (the imports build a tree's messages that way);
-- none of them incomplete.
CREATE OR REPLACE FUNCTION convo_private.new_messages(
    p_ids     uuid[],
    p_parents uuid[],
    p_roles   text[],
    p_parts   jsonb[],
    p_reasons text[],
    p_times   timestamptz[])
RETURNS convo_private.new_message[]
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT coalesce(array_agg((m.id, m.parent_id, m.role, m.parts, m.reason, m.created_at, false)::convo_private.new_message
                              ORDER BY m.n), '{}')
      FROM unnest(p_ids, p_parents, p_roles, p_parts, p_reasons, p_times) WITH ORDINALITY
           AS m (id, parent_id, role, parts, reason, created_at, n);
END;
