-- 0050_helpers_keep_their_plans: search_text, search_config_in_use and notifies, which every write calls, are PL/pgSQL, whose plans PostgreSQL keeps for the session; as SQL functions that cannot be inlined, their bodies were planned again at every write (search_text and search_config_in_use from the INSERT into the search index, notifies once a transaction).

-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;

-- Table changes, written by hand, go here, above the objects that use them.

-- notifies: whether the changes of this transaction are sent as live-update
-- notifications (pg_notify): the database's switch (set_live_updates, on
-- until a DBA sets it) and the session's convo.notify (off silences that
-- session alone). The one test of every place that notifies: log_head_move,
-- effect_event and notify_receipt, each running as the owner role.
-- PL/pgSQL, not SQL: PostgreSQL 15 plans a SQL function's body again in
-- every transaction that calls it from PL/pgSQL (every write, in the
-- application's one call a transaction), where PL/pgSQL keeps its plan for
-- the session.
CREATE OR REPLACE FUNCTION convo_private.notifies()
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN current_setting('convo.notify', true) IS DISTINCT FROM 'off'
           AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true);
END;
$$;

-- search_config_in_use: the text search configuration the index is
-- written and searched with: the database's setting (set_search_config),
-- 'simple' until a DBA sets one. PL/pgSQL, as search_text: its plan is kept
-- for the session.
CREATE OR REPLACE FUNCTION convo_private.search_config_in_use()
RETURNS regconfig
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT s.search_config FROM convo_private.settings s), 'simple')::regconfig;
END;
$$;

-- search_text: what search finds in a message: the text of its text parts,
-- one a line (tool calls, results and attachments are not searched); ''
-- for a message without text. IMMUTABLE: search_document and the snippet
-- read the same text from the same parts. PL/pgSQL, not SQL: PostgreSQL 15
-- plans a SQL function's body again at every execution of the statement
-- that calls it (index_messages' INSERT, once a write), where PL/pgSQL
-- keeps its plan for the session.
CREATE OR REPLACE FUNCTION convo_private.search_text(p_parts jsonb)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.n)
                       FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e (part, n)
                      WHERE e.part ->> 'type' = 'text'), '');
END;
$$;

-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.hand_over_objects();
SELECT convo_private.apply_grants();

-- Give back a membership taken above.
-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
