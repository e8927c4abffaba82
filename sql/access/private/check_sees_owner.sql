-- check_sees_owner: the owner a read of an owner's rows names (a sidebar
-- page, a search), checked before any row is read: one this session may
-- see (sees_owner: the owner its session set, every owner for
-- convo_reader); CV011 otherwise, as check_owner answers a write.
CREATE OR REPLACE FUNCTION convo_private.check_sees_owner(p_owner_id text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_owner_id IS NULL OR NOT convo_private.sees_owner(p_owner_id) THEN
        RAISE EXCEPTION 'p_owner_id must be the owner this session acts for'
            USING ERRCODE = 'CV011', DETAIL = format('owner %s', coalesce(quote_literal(p_owner_id), 'NULL')),
                  HINT = 'Name the owner with SET LOCAL convo.owner_id first.';
    END IF;
END;
$$;
