-- erase_conversation: removes every copy of a conversation's content (see
-- redact_row) and keeps its shape: the tree, the head log and the ledger
-- stay whole and reconcilable. Recorded in convo.erasures (who, when, why)
-- and convo.erasure_places (rows per place), a repeat too. convo_admin's.
CREATE OR REPLACE FUNCTION convo.erase_conversation(p_conversation_id uuid, p_reason text)
RETURNS TABLE (place text, rows_redacted bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
DECLARE
    v_owner text;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'p_reason is required: say why the content is erased'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    IF length(p_reason) > convo.max_ref_length() THEN
        RAISE EXCEPTION 'p_reason is longer than % characters', convo.max_ref_length()
            USING ERRCODE = 'CV010', DETAIL = format('conversation %s', p_conversation_id);
    END IF;
    SELECT c.owner_id INTO v_owner FROM convo.conversations c WHERE c.id = p_conversation_id;
    RETURN QUERY SELECT * FROM convo_private.erase_content(v_owner, p_conversation_id, p_reason);
END;
$$;

COMMENT ON FUNCTION convo.erase_conversation(uuid, text) IS
    'Erase a conversation''s content everywhere it is stored, keeping its shape; recorded with p_reason. Returns rows per place.';
