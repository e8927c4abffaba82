-- refuse_forgery: the trigger function behind every table whose rows are
-- history (head log, effect events, call links, the ledger, receipts, the
-- allowlist, the keyed parts): only pgconvo's own code writes them, and the
-- trigger's WHEN lets that code through (current_user the owner role, in a
-- SECURITY DEFINER function, with neither a SET ROLE nor a SET SESSION
-- AUTHORIZATION to it behind it). Whatever reaches this function is refused,
-- whatever table privileges it holds, the owner role's sessions included,
-- except a superuser as itself (who could drop the trigger anyway) and the
-- owner role's writes made inside a trigger (pg_trigger_depth() above this
-- one's: pgconvo's logging of a direct head, title or effect update, since
-- self_check allows no trigger of anyone else's on these tables).
-- Statement-level (ENABLE ALWAYS), so it refuses even when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_forgery()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
       OR (current_user = 'convo_owner' AND pg_trigger_depth() > 1) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'convo.% is written only by pgconvo''s functions: % by role % is refused',
            TG_TABLE_NAME, TG_OP, current_user
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, operation %s, role %s, session user %s',
                              TG_TABLE_NAME, TG_OP, current_user, session_user),
              HINT = 'History is written through the API (convo.*), which logs who did what.';
END;
$$;
