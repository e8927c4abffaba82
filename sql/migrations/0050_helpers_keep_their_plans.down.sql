-- 0050_helpers_keep_their_plans down: reverses 0050_helpers_keep_their_plans.up.sql.

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

-- notifies: whether the changes of this transaction are sent as live-update
-- notifications (pg_notify): the database's switch (set_live_updates, on
-- until a DBA sets it) and the session's convo.notify (off silences that
-- session alone). The one test of every place that notifies: log_head_move,
-- effect_event and notify_receipt, each running as the owner role. A quoted
-- body: Citus cannot send a SQL-standard one that holds a subquery to its
-- workers.
CREATE OR REPLACE FUNCTION convo_private.notifies()
RETURNS boolean
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT current_setting('convo.notify', true) IS DISTINCT FROM 'off'
       AND coalesce((SELECT s.live_updates FROM convo_private.settings s), true)
$$;

-- search_config_in_use: the text search configuration the index is
-- written and searched with: the database's setting (set_search_config),
-- 'simple' until a DBA sets one.
CREATE OR REPLACE FUNCTION convo_private.search_config_in_use()
RETURNS regconfig
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT s.search_config FROM convo_private.settings s), 'simple')::regconfig
$$;

-- search_text: what search finds in a message: the text of its text parts,
-- one a line (tool calls, results and attachments are not searched); ''
-- for a message without text. IMMUTABLE: search_document and the snippet
-- read the same text from the same parts.
CREATE OR REPLACE FUNCTION convo_private.search_text(p_parts jsonb)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN coalesce((SELECT string_agg(e.part ->> 'text', E'\n' ORDER BY e.n)
                   FROM jsonb_array_elements(p_parts) WITH ORDINALITY AS e (part, n)
                  WHERE e.part ->> 'type' = 'text'), '');

-- Reverse the table changes here, below the objects.

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
