-- refuse_forgery: the trigger function behind every table whose rows are
-- history (head log, effect events, call links, the ledger, receipts, the
-- allowlist, the per-part rows): only pgconvo's own code writes them. It runs as the owner role
-- (SECURITY DEFINER functions owned by convo_owner, which nobody logs in as),
-- so any other current_user is refused, whatever table privileges it holds;
-- a superuser, who could drop the trigger anyway, is let through.
-- Statement-level (ENABLE ALWAYS), so it refuses even when no row matches.
CREATE OR REPLACE FUNCTION convo_private.refuse_forgery()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_user = 'convo_owner'
       OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
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
