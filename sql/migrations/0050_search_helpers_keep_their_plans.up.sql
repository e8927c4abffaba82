-- 0050_search_helpers_keep_their_plans: search_text, search_document and search_config_in_use are PL/pgSQL, whose plans PostgreSQL keeps for the session; as SQL functions their bodies were planned again at every write's INSERT into the search index.

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

-- search_document: a message's entry in the search index: its text
-- (search_text) under the search configuration, and its owner's lexeme
-- (search_owner). PL/pgSQL, as search_text.
CREATE OR REPLACE FUNCTION convo_private.search_document(p_parts jsonb, p_config regconfig, p_owner_id text)
RETURNS tsvector
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN to_tsvector(p_config, convo_private.search_text(p_parts))
           || array_to_tsvector(ARRAY[convo_private.search_owner(p_owner_id)]);
END;
$$;

-- search_text: what search finds in a message: the text of its text parts,
-- one a line (tool calls, results and attachments are not searched); ''
-- for a message without text. IMMUTABLE: search_document and the snippet
-- read the same text from the same parts. PL/pgSQL, not SQL: PostgreSQL 15
-- plans a SQL function's body again at every execution of the statement
-- that calls it (index_messages' INSERT, once a write), where PL/pgSQL
-- keeps its plan for the session; the search index's part of an append
-- cost about 2.5 times as much.
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
