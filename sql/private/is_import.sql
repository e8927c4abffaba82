-- is_import: whether an import (import_conversation, or import_tree for the
-- imports from other products) is writing this conversation right now, in
-- this transaction: its marker row (convo_private.importing, which only the
-- imports write and delete again before they return) names the conversation
-- and this transaction. Only then do the triggers that stamp the present
-- (messages_fill_tree, log_head_move, tool_effects_log) or decide anew
-- (record_tool_call) keep the given rows instead. The setting is a
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
