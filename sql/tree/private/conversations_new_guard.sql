-- conversations_new_guard: a conversation inserted outside pgconvo's code
-- (a superuser's repair, a role granted INSERT, a session that became the
-- owner role) must be what create_conversation writes: no head, title,
-- archive state, deletion or erasure yet (each arrives with its logged move,
-- change or record), created
-- and last active now (not backdated or set ahead, which would misplace it in
-- the sidebar), and metadata within the cap. Imports and restores, which keep
-- an export's times and title, are pgconvo's code and skip it in the WHEN.
-- SECURITY DEFINER so that a role granted INSERT alone meets the rule, not
-- a missing privilege on the cap; the DETAIL names the caller. An owner
-- the writer may not write for (writes_owner) is CV011; a role row-level
-- security binds was refused before (conversations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.conversations_new_guard()
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
BEGIN
    -- As create_conversation: the owner the writer may write for.
    IF NOT convo_private.writes_owner(NEW.owner_id) THEN
        RAISE EXCEPTION 'this session may not create conversations for owner %', NEW.owner_id
            USING ERRCODE = 'CV011',
                  DETAIL = format('owner %s, convo.owner_id %s, role %s', NEW.owner_id,
                                  coalesce(current_setting('convo.owner_id', true), 'unset'), convo_private.caller());
    END IF;
    IF NEW.head_message_id IS NOT NULL OR NEW.title IS NOT NULL OR NEW.archived
       OR NEW.deleted_at IS NOT NULL OR NEW.erased_at IS NOT NULL THEN
        RAISE EXCEPTION 'a new conversation has no head, title, archive state, deletion or erasure: each is set through the API, which logs it'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', NEW.id, convo_private.caller()),
                  HINT = 'Create it with convo.create_conversation, then append, set_title or archive_conversation.';
    END IF;
    IF NEW.created_at < transaction_timestamp() OR NEW.created_at > clock_timestamp()
       OR NEW.last_activity_at < NEW.created_at OR NEW.last_activity_at > clock_timestamp() THEN
        RAISE EXCEPTION 'a new conversation is created and last active now'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, created_at %s, last_activity_at %s, role %s',
                                  NEW.id, NEW.created_at, NEW.last_activity_at, convo_private.caller()),
                  HINT = 'Leave created_at and last_activity_at to their defaults; an import keeps an export''s times.';
    END IF;
    IF octet_length(NEW.metadata::text) > convo.max_metadata_bytes() THEN
        RAISE EXCEPTION 'conversation metadata is larger than % bytes', convo.max_metadata_bytes()
            USING ERRCODE = 'CV010',
                  DETAIL = format('conversation %s: %s bytes', NEW.id, octet_length(NEW.metadata::text));
    END IF;
    RETURN NEW;
END;
$$;
