-- messages_guard: a message inserted outside pgconvo's code (a DBA's
-- repair, as a superuser or a role granted INSERT) must be one
-- write_messages could have written: in a conversation the writer may write
-- for, under its lock (so it serializes with the API), with the depth,
-- sibling position and branch the tree gives it, no import, not marked
-- incomplete (only a stopped or failed generation's answer is, written by
-- cancel_generation or fail_generation), a time neither
-- before its parent's nor after now, well-formed parts (part_problem), and
-- none addressed by key (a tool call, result or attachment needs its keyed
-- row and its ledger decision: write those through the API). It computes
-- nothing; it refuses. Its parent is a message of its conversation
-- (message_ref: CV003 or CV002) in replica mode too, which skips the
-- foreign key. SECURITY DEFINER, so that a role granted INSERT meets these
-- rules rather than a missing privilege on pgconvo's functions; the owner
-- checks read the caller from the session (convo_private.caller), not
-- current_user. A role row-level security binds was refused before any
-- row is read (messages_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.messages_guard()
RETURNS trigger
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
    v_parent  convo.messages;
    v_last    int;
    v_branch  uuid;
    v_problem text[];
    v_where   text := format('a new %s message in conversation %s, parent %s', coalesce(NEW.role, 'NULL'),
                             NEW.conversation_id, coalesce(NEW.parent_id::text, 'none (a root)'));
BEGIN
    PERFORM convo_private.lock_conversation(NEW.conversation_id);
    IF NEW.parent_id IS NOT NULL THEN
        v_parent := convo_private.message_ref(NEW.conversation_id, NEW.parent_id);
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id = NEW.parent_id
                    ORDER BY s.sibling_index DESC LIMIT 1);
    ELSE
        v_last := (SELECT s.sibling_index FROM convo.messages s
                    WHERE s.conversation_id = NEW.conversation_id AND s.parent_id IS NULL
                    ORDER BY s.parent_id DESC, s.sibling_index DESC LIMIT 1);
    END IF;
    v_last := coalesce(v_last, 0);
    v_branch := CASE WHEN NEW.parent_id IS NOT NULL AND v_last = 0 THEN v_parent.branch_id ELSE NEW.id END;
    IF NEW.depth IS DISTINCT FROM coalesce(v_parent.depth + 1, 0) OR NEW.sibling_index IS DISTINCT FROM v_last + 1
       OR NEW.branch_id IS DISTINCT FROM v_branch OR NEW.import_id IS NOT NULL
       OR NEW.created_at > clock_timestamp() OR NEW.created_at < v_parent.created_at OR NEW.incomplete THEN
        RAISE EXCEPTION 'a message written outside the API must be placed as the tree places it'
            USING ERRCODE = 'CV011',
                  DETAIL = format('%s: depth %s, sibling_index %s, branch_id %s, no import_id, not incomplete, created_at from %s to now',
                                  v_where, coalesce(v_parent.depth + 1, 0), v_last + 1, v_branch,
                                  coalesce(v_parent.created_at::text, '-infinity')),
                  HINT = 'Write messages through convo.append_message, edit_and_resend or regenerate, which place them.';
    END IF;
    IF NEW.parts IS NULL OR jsonb_typeof(NEW.parts) <> 'array' OR jsonb_array_length(NEW.parts) = 0
       OR octet_length(NEW.parts::text) > convo.max_message_bytes() THEN
        RAISE EXCEPTION 'p_parts must be a non-empty JSON array of at most % bytes', convo.max_message_bytes()
            USING ERRCODE = 'CV008', DETAIL = v_where;
    END IF;
    SELECT p.problem INTO v_problem
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e (part, n),
           LATERAL (SELECT CASE WHEN e.part ->> 'type' IN ('tool_use', 'tool_result', 'attachment')
                                THEN ARRAY['CV008', format('a %s part is written through the API only', e.part ->> 'type'),
                                           format(', part %s', e.n - 1),
                                           'It needs its keyed row and, for a tool call, its ledger decision.']
                                ELSE convo_private.part_problem(e.part, NEW.role) END AS problem) p
     WHERE p.problem IS NOT NULL
     ORDER BY e.n LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', v_problem[2]
            USING ERRCODE = v_problem[1], DETAIL = v_where || v_problem[3], HINT = v_problem[4];
    END IF;
    RETURN NEW;
END;
$$;
