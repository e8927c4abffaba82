-- receipt_arguments_error: why a receipt's arguments cannot be applied, or
-- NULL: 'invalid_arguments' when they fail the tool version's frozen
-- schema, else 'arg_mismatch' when a top-level key of the route's expected
-- values differs. Shared by fill_receipt and tool_receipts_transition, so a
-- direct UPDATE cannot mark bad arguments valid either; no arguments at all
-- (SQL NULL, which args_errors refuses with CV011) are invalid too.
CREATE OR REPLACE FUNCTION convo_private.receipt_arguments_error(
    p_tool_name    text,
    p_tool_version int,
    p_arguments    jsonb,
    p_expected     jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_arguments IS NULL THEN
        RETURN 'invalid_arguments';
    END IF;
    IF cardinality(convo.args_errors((SELECT t.args_schema FROM convo.tools t
                                       WHERE t.name = p_tool_name AND t.version = p_tool_version),
                                     p_arguments)) > 0 THEN
        RETURN 'invalid_arguments';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each(p_expected) e WHERE p_arguments -> e.key IS DISTINCT FROM e.value) THEN
        RETURN 'arg_mismatch';
    END IF;
    RETURN NULL;
END;
$$;
