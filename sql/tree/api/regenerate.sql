-- regenerate: an assistant message's sibling (branch_reason 'regenerate');
-- the head moves to it and the old answer stays as an alternative.
CREATE OR REPLACE FUNCTION convo.regenerate(
    p_conversation_id uuid,
    p_message_id      uuid,
    p_parts           jsonb,
    p_expected_head   uuid DEFAULT NULL,
    p_new_message_id  uuid DEFAULT NULL,
    p_moved_by        text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql
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
RETURN convo_private.add_sibling(p_conversation_id, p_message_id, p_parts, p_expected_head,
                         p_new_message_id, p_moved_by, 'assistant', 'regenerate');

COMMENT ON FUNCTION convo.regenerate(uuid, uuid, jsonb, uuid, uuid, text) IS
    'Regenerate an assistant message: insert its sibling (branch_reason regenerate) and move the head to it.';
