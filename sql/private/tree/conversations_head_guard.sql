-- conversations_head_guard: a head moved outside pgconvo's code names a
-- message of its own conversation (message_ref: CV003 for a message of
-- another conversation the caller sees, CV002 for one it does not see, or
-- none). The foreign key says the same, but a session in
-- session_replication_role = replica (a role a DBA let SET it, no superuser
-- needed) skips foreign keys, and not this ENABLE ALWAYS trigger; the head
-- log and the live path then record only heads it let through. pgconvo's
-- own moves name a message they have just found or written, and skip it in
-- its WHEN. SECURITY DEFINER: a role granted UPDATE alone meets the rule,
-- not a missing privilege.
CREATE OR REPLACE FUNCTION convo_private.conversations_head_guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- An unset head is conversations_guard's to refuse.
    IF NEW.head_message_id IS NOT NULL THEN
        PERFORM convo_private.message_ref(NEW.id, NEW.head_message_id);
    END IF;
    RETURN NEW;
END;
$$;
