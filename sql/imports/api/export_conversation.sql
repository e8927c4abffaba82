-- export_conversation: everything pgconvo holds about one conversation, as
-- one JSON document that import_conversation restores (the answer to a
-- data-subject access request, too). A read: the caller must see
-- the conversation's owner (CV002 otherwise, as path does).
CREATE OR REPLACE FUNCTION convo.export_conversation(p_conversation_id uuid)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
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
BEGIN
    PERFORM convo_private.conversation_ref(p_conversation_id);
    RETURN convo_private.export_of(p_conversation_id);
END;
$$;

COMMENT ON FUNCTION convo.export_conversation(uuid) IS
    'Everything stored about one conversation as JSON: {"format": "pgconvo.export", "version": 3, "conversation": its row, "messages": the tree with parts, "head_log", "changes": its titles and archive states, "generations", "tools": the tool versions its calls and effects were checked against, "tool_calls": ledger decisions, "effects", "effect_events", "erasures" (with places), "origins": the source node of each imported message, "imports": its record of imports}; each row as its table''s columns, times in UTC. See docs/erasure.md.';
