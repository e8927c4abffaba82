-- 0016_import_checks: is_import and is_imported in PL/pgSQL, returning at the
-- setting: as SQL functions with a subquery they were called, not inlined, on every write.

-- Act as the owner role: a migrating role that is not a superuser becomes
-- a member for this transaction only (it needs CREATEROLE for that).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
        PERFORM set_config('pgconvo.revoke_owner_after_migration', current_user, true);
    END IF;
END;
$$;
SELECT set_config('role', 'convo_owner', true);

-- Table changes, written by hand, go here, above the objects that use them.

-- is_import: whether import_conversation is writing this conversation right
-- now, in this transaction: its marker row (convo_private.importing, which
-- only import_conversation writes and deletes again before it returns) names
-- the conversation and this transaction. Only then do the triggers that stamp
-- the present (messages_fill_tree, log_head_move, tool_effects_log) or decide
-- anew (record_tool_call) keep the exported rows instead. The setting is a
-- cheap hint that spares every other write the lookup; setting it proves nothing.
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and
-- calling one costs tens of microseconds on every write; this returns at the
-- setting for all but an import.
CREATE OR REPLACE FUNCTION convo_private.is_import(p_conversation_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo_private.importing i
                    WHERE i.conversation_id = p_conversation_id AND i.xact = pg_current_xact_id());
END;
$$;

-- is_imported: whether a message being inserted is one an import is writing:
-- the transaction's import names its conversation (a cheap filter any
-- session could set) and the message's origin record exists, which only
-- the import functions write (import_origins_no_forgery) and only before
-- their messages. messages_fill_tree then keeps its original time, and
-- record_tool_call writes no ledger row for it.
-- PL/pgSQL, as is_import, so that every other write pays a setting read.
CREATE OR REPLACE FUNCTION convo_private.is_imported(p_conversation_id uuid, p_message_id uuid)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('convo.importing', true) IS DISTINCT FROM p_conversation_id::text THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM convo.import_origins o
                    WHERE o.conversation_id = p_conversation_id AND o.message_id = p_message_id);
END;
$$;

SELECT convo_private.apply_grants();

-- Back to the migrating role; give back a membership taken above.
SELECT set_config('role', 'none', true);
DO $$
BEGIN
    IF coalesce(current_setting('pgconvo.revoke_owner_after_migration', true), '') <> '' THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_setting('pgconvo.revoke_owner_after_migration'));
    END IF;
END;
$$;
