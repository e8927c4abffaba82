-- is_import: whether import_conversation is writing this conversation right
-- now, in this transaction: its marker row (convo_private.importing, which
-- only import_conversation writes and deletes again before it returns) names
-- the conversation and this transaction. Only then do the triggers that stamp
-- the present (messages_fill_tree, log_head_move, tool_effects_log) or decide
-- anew (record_tool_call) keep the exported rows instead. The setting is a
-- cheap hint that spares every other write the lookup; setting it proves nothing.
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and
-- calling one costs tens of microseconds on every write; this returns at the
-- setting for all but an import.
CREATE OR REPLACE FUNCTION convo_private.is_import(p_conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo_private.importing i
                    WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id());
END;
$$;
