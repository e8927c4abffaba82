-- conversations_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation (message_ref: CV003 for a message of
-- another conversation the caller sees, CV002 for one it does not see, or
-- none). The foreign key says the same, but a session in
-- session_replication_role = replica (a role a DBA let SET it, no superuser
-- needed) skips foreign keys, and not this ENABLE ALWAYS trigger; the head
-- log and the live path then record only heads it let through. pgconvo's
-- own moves name a message they have just found or written, and skip it in
-- its WHEN. SECURITY DEFINER: a role granted UPDATE alone meets the rule,
-- not a missing privilege. It runs for every UPDATE outside pgconvo's
-- code: the writer may write for the conversation's owner (lock_conversation,
-- CV002); a role row-level security binds was refused before
-- (conversations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.conversations_head_guard()
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
    -- The writer's owner's conversation (writes_owner, CV002 otherwise),
    -- as messages_guard: a head, title or archive state of another owner's
    -- is not a repair role's to change.
    PERFORM convo_private.lock_conversation(OLD.id);
    -- An unset head is conversations_guard's to refuse.
    IF NEW.head_message_id IS NOT NULL AND NEW.head_message_id IS DISTINCT FROM OLD.head_message_id THEN
        PERFORM convo_private.message_ref(NEW.id, NEW.head_message_id);
    END IF;
    RETURN NEW;
END;
$$;
