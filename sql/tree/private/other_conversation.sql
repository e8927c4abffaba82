-- other_conversation: the conversation of a row of p_table whose p_column
-- is p_value (and that meets p_where, a condition written in pgconvo's
-- code, when given), among the rows stored beside p_conversation_id's
-- (beside): which conversation an id of the wrong one belongs to, for
-- raise_not_found's CV003. On one server that is every conversation; on a
-- distributed database, those of the same shard, and an id of another
-- shard's is not found (CV002). One index probe: p_value is cast to the
-- column's type.
CREATE OR REPLACE FUNCTION convo_private.other_conversation(
    p_conversation_id uuid,
    p_table           regclass,
    p_column          text,
    p_value           text,
    p_where           text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_other uuid;
BEGIN
    IF p_value IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT t.conversation_id FROM %s t WHERE t.%I = $1::%s%s LIMIT 1',
                   convo_private.beside(p_table, p_conversation_id), p_column,
                   (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                     WHERE a.attrelid = p_table AND a.attname = p_column),
                   CASE WHEN p_where IS NOT NULL THEN ' AND ' || p_where ELSE '' END)
       INTO v_other USING p_value;
    RETURN v_other;
END;
$$;
