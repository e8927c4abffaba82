-- is_imported: whether a message being inserted is one an import is writing:
-- the transaction's import names its conversation (a cheap filter any
-- session could set) and the message's origin record exists, which only
-- the import functions write (import_origins_no_forgery) and only before
-- their messages. messages_fill_tree then keeps its original time, and
-- record_tool_call writes no ledger row for it.
-- PL/pgSQL, as is_import, so that every other write pays a setting read.
CREATE OR REPLACE FUNCTION convo_private.is_imported(p_conversation_id uuid, p_message_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo.import_origins o
                    WHERE o.conversation_id = p_conversation_id AND o.message_id = p_message_id);
END;
$$;
