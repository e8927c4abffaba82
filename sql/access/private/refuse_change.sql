-- refuse_change: the trigger function behind every append-only table (and
-- any other statement a table refuses).
-- A statement-level BEFORE trigger (ENABLE ALWAYS) so it also stops the table
-- owner, TRUNCATE, and sessions with session_replication_role = replica.
CREATE OR REPLACE FUNCTION convo_private.refuse_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The trigger's argument, if any, says why the table refuses (default: append-only).
    RAISE EXCEPTION 'convo.% is %: % is not allowed', TG_TABLE_NAME, coalesce(TG_ARGV[0], 'append-only'), TG_OP
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s', TG_TABLE_NAME, TG_OP, current_user),
              HINT = 'Nothing in the conversation tree is updated or deleted: insert a sibling or move the head instead.';
END;
$$;
