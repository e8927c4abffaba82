-- create_conversation: a new conversation; with a system prompt, a root
-- system message that becomes the head (head-log reason 'create').
-- Retry-safe through p_conversation_id: the same call returns the same id.
-- A convo_app session creates only for the owner it set (CV011 otherwise):
-- hold_new_owner, then new_conversation, each on its own key's node on a
-- distributed database.
CREATE OR REPLACE FUNCTION convo.create_conversation(
    p_owner_id        text,
    p_system_prompt   text DEFAULT NULL,
    p_metadata        jsonb DEFAULT '{}',
    p_conversation_id uuid DEFAULT NULL)
RETURNS uuid
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
BEGIN
    PERFORM convo_private.hold_new_owner(p_owner_id, 'create conversations');
    RETURN convo_private.new_conversation(coalesce(p_conversation_id, gen_random_uuid()), p_owner_id,
                                          p_system_prompt, p_metadata, p_conversation_id IS NOT NULL);
END;
$$;

COMMENT ON FUNCTION convo.create_conversation(text, text, jsonb, uuid) IS
    'New conversation for an owner; a system prompt becomes the root message and the head. Retry-safe by p_conversation_id.';
