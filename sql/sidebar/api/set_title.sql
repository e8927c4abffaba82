-- set_title: a conversation's title (NULL clears it), as a sidebar shows it.
-- After the owner check and the conversation's lock, the title changes and
-- the change is logged (who, when, from what: convo.conversation_changes),
-- never in place without a trace; the same title again changes and logs
-- nothing. CV010 over max_title_length characters.
CREATE OR REPLACE FUNCTION convo.set_title(p_conversation_id uuid, p_title text)
RETURNS void
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
    v_old text;
BEGIN
    PERFORM convo_private.lock_conversation(p_conversation_id);
    IF length(p_title) > convo_private.max_title_length() THEN
        RAISE EXCEPTION 'a title is at most % characters', convo_private.max_title_length()
            USING ERRCODE = 'CV010',
                  DETAIL = format('conversation %s, a title of %s characters', p_conversation_id, length(p_title));
    END IF;
    SELECT c.title INTO v_old FROM convo.conversations c WHERE c.id = p_conversation_id;
    IF v_old IS DISTINCT FROM p_title THEN
        UPDATE convo.conversations c SET title = p_title WHERE c.id = p_conversation_id;
        PERFORM convo_private.log_change(p_conversation_id, 'title', v_old, p_title, convo_private.caller(), NULL);
    END IF;
END;
$$;

COMMENT ON FUNCTION convo.set_title(uuid, text) IS
    'Set (or with NULL clear) a conversation''s title; every change is logged (who, when, old and new). CV010 over 1,000 characters.';
