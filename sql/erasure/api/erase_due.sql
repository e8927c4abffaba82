-- erase_due: the sweep a nightly job (or pg_cron) runs, convo_admin's:
-- every deleted conversation whose retention period (deletion_retention)
-- has run out since its deletion is erased as erase_conversation erases,
-- recorded with the reason 'deleted; retention period over'; returns how
-- many. One index range scan finds them (conversations_due_idx: deleted,
-- not erased); each is locked in id order and checked again under its lock,
-- so one restored meanwhile (restore_deleted_conversation) is left alone,
-- and only if the caller may write for its owner (writes_owner: every owner
-- for convo_admin; through a DBA's own SECURITY DEFINER function that an
-- application may call, the application's owner alone).
-- A repeat finds nothing more to erase. One transaction: a failure erases
-- nothing.
CREATE OR REPLACE FUNCTION convo.erase_due()
RETURNS bigint
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
    v_due   timestamptz := clock_timestamp() - convo.deletion_retention();
    v_ids   uuid[];
    v_id    uuid;
    v_owner text;
    v_n     bigint := 0;
BEGIN
    SELECT array_agg(c.id ORDER BY c.id) INTO v_ids
      FROM convo.conversations c
     WHERE c.deleted_at <= v_due AND c.erased_at IS NULL;
    FOREACH v_id IN ARRAY coalesce(v_ids, '{}') LOOP
        SELECT c.owner_id INTO v_owner
          FROM convo.conversations c
         WHERE c.id = v_id AND c.deleted_at <= v_due AND c.erased_at IS NULL
           AND convo_private.writes_owner(c.owner_id)
           FOR NO KEY UPDATE;
        IF FOUND THEN
            PERFORM convo_private.erase_content(v_owner, v_id, 'deleted; retention period over');
            v_n := v_n + 1;
        END IF;
    END LOOP;
    RETURN v_n;
END;
$$;

COMMENT ON FUNCTION convo.erase_due() IS
    'Erase every deleted conversation whose retention period has run out (a nightly job); returns how many.';
