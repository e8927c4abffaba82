-- 0025_owner_sessions_guarded: the guards hold for every session of the
-- owner role: one a superuser opened with SET SESSION AUTHORIZATION
-- convo_owner is outside pgconvo's code like one with SET ROLE convo_owner
-- (each trigger's WHEN), and neither may write the history tables except
-- through pgconvo's logging triggers (refuse_forgery).

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

-- conversations_guard: of a conversation only the head, the title and the
-- archive state may change (each logged), its last activity only with its
-- messages through the API, and its metadata only by erasure (pgconvo's
-- erase_content): its id, owner and creation time are fixed, and a head once
-- set is never unset (the head always names a message). It runs for every UPDATE that changes a fixed
-- column or unsets the head, and for every UPDATE outside pgconvo's code
-- (not the owner role, or the owner role only because a session SET ROLE
-- or SET SESSION AUTHORIZATION to it: pgconvo's SECURITY DEFINER functions
-- run as the owner role with the caller's role setting and login).
CREATE OR REPLACE FUNCTION convo_private.conversations_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.owner_id IS DISTINCT FROM OLD.owner_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'a conversation''s id, owner_id and created_at never change'
            USING ERRCODE = 'CV005', DETAIL = format('conversation %s', OLD.id);
    END IF;
    IF OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL THEN
        RAISE EXCEPTION 'the head of a conversation cannot be unset'
            USING ERRCODE = 'CV011', DETAIL = format('conversation %s, head %s', OLD.id, OLD.head_message_id);
    END IF;
    IF (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
       AND NEW.last_activity_at IS DISTINCT FROM OLD.last_activity_at THEN
        RAISE EXCEPTION 'a conversation''s last_activity_at moves only with its messages, through the API'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user);
    END IF;
    IF (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
       AND NEW.metadata::text IS DISTINCT FROM OLD.metadata::text THEN
        RAISE EXCEPTION 'convo.conversations is append-only: its metadata changes only by erasure'
            USING ERRCODE = 'CV005',
                  DETAIL = format('table convo.conversations, conversation %s, role %s', OLD.id, current_user),
                  HINT = 'Content is removed only by convo.erase_conversation or convo.erase_owner.';
    END IF;
    RETURN NEW;
END;
$$;

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

-- conversation_changes_10_no_forgery: only pgconvo's code (or a superuser)
-- writes the change log, so a change reaches it only as it happened.
CREATE OR REPLACE TRIGGER conversation_changes_10_no_forgery
    BEFORE INSERT ON convo.conversation_changes
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_changes ENABLE ALWAYS TRIGGER conversation_changes_10_no_forgery;

-- conversation_changes_30_no_update: outside pgconvo's code a change row is
-- never updated; pgconvo's only update of one is erasure's redaction of a title.
CREATE OR REPLACE TRIGGER conversation_changes_30_no_update
    BEFORE UPDATE ON convo.conversation_changes
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (titles change only by erasure)');
ALTER TABLE convo.conversation_changes ENABLE ALWAYS TRIGGER conversation_changes_30_no_update;

-- conversation_head_log_10_no_forgery: only pgconvo's code (or a superuser)
-- writes head-log rows, so a reason or mover reaches the log only through the
-- API (a direct head UPDATE is logged as direct_update).
CREATE OR REPLACE TRIGGER conversation_head_log_10_no_forgery
    BEFORE INSERT ON convo.conversation_head_log
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.conversation_head_log ENABLE ALWAYS TRIGGER conversation_head_log_10_no_forgery;

-- conversations_10_guard: id, owner and creation time never change, a head
-- once set is never unset, and outside pgconvo's code metadata never changes
-- (erasure is pgconvo's). pgconvo's own head moves skip it in its WHEN.
CREATE OR REPLACE TRIGGER conversations_10_guard
    BEFORE UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR (OLD.head_message_id IS NOT NULL AND NEW.head_message_id IS NULL) OR current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.conversations_guard();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_10_guard;

-- conversations_20_log_direct: a head moved outside pgconvo's code (a direct
-- UPDATE) writes exactly one head-log row, direct_update by the caller, in
-- the same transaction; pgconvo's own moves log themselves (log_head_move).
CREATE OR REPLACE TRIGGER conversations_20_log_direct
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN (OLD.head_message_id IS DISTINCT FROM NEW.head_message_id AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner'))
    EXECUTE FUNCTION convo_private.log_direct_head_move();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_20_log_direct;

-- conversations_21_log_direct_change: a title or archive state changed outside
-- pgconvo's code (a direct UPDATE) is logged in the change log, by the caller,
-- in the same transaction; pgconvo's own changes log themselves (log_change).
CREATE OR REPLACE TRIGGER conversations_21_log_direct_change
    AFTER UPDATE ON convo.conversations
    FOR EACH ROW
    WHEN ((OLD.title IS DISTINCT FROM NEW.title OR OLD.archived IS DISTINCT FROM NEW.archived) AND (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner'))
    EXECUTE FUNCTION convo_private.log_direct_change();
ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_21_log_direct_change;

-- erasure_places_10_no_forgery: only erasure (or a superuser) records where
-- it redacted.
CREATE OR REPLACE TRIGGER erasure_places_10_no_forgery
    BEFORE INSERT ON convo.erasure_places
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasure_places ENABLE ALWAYS TRIGGER erasure_places_10_no_forgery;

-- erasures_10_no_forgery: only erase_conversation and erase_owner (or a
-- superuser) record an erasure.
CREATE OR REPLACE TRIGGER erasures_10_no_forgery
    BEFORE INSERT ON convo.erasures
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.erasures ENABLE ALWAYS TRIGGER erasures_10_no_forgery;

-- generations_20_transition: outside pgconvo's code a generation starts
-- streaming and ends once, and its identity never changes.
CREATE OR REPLACE TRIGGER generations_20_transition
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.generations_transition();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_20_transition;

-- import_origins_10_no_forgery: only the import functions (or a superuser)
-- write origin records, the source nodes kept verbatim beside the messages.
CREATE OR REPLACE TRIGGER import_origins_10_no_forgery
    BEFORE INSERT ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_10_no_forgery;

-- import_origins_30_no_update: outside pgconvo's code an origin record is
-- never updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER import_origins_30_no_update
    BEFORE UPDATE ON convo.import_origins
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (a source node changes only by erasure)');
ALTER TABLE convo.import_origins ENABLE ALWAYS TRIGGER import_origins_30_no_update;

-- imports_10_no_forgery: only the import functions (or a superuser) record
-- an import (who, when, the document's digest), so a record names the role
-- that really imported.
CREATE OR REPLACE TRIGGER imports_10_no_forgery
    BEFORE INSERT ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_10_no_forgery;

-- imports_30_no_update: outside pgconvo's code an import's record is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER imports_30_no_update
    BEFORE UPDATE ON convo.imports
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (its source key and digest change only by erasure)');
ALTER TABLE convo.imports ENABLE ALWAYS TRIGGER imports_30_no_update;

-- keyed_parts_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- keyed parts, with their messages.
CREATE OR REPLACE TRIGGER keyed_parts_10_no_forgery
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_10_no_forgery;

-- keyed_parts_20_guard: a keyed part written outside pgconvo's code must be
-- its message's part at that ordinal (keyed_parts_guard).
CREATE OR REPLACE TRIGGER keyed_parts_20_guard
    BEFORE INSERT ON convo.keyed_parts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.keyed_parts_guard();
ALTER TABLE convo.keyed_parts ENABLE ALWAYS TRIGGER keyed_parts_20_guard;

-- live_path_10_no_forgery: the derived index of the live paths is written
-- only by pgconvo's code (log_head_move, move_live_path), or a superuser.
CREATE OR REPLACE TRIGGER live_path_10_no_forgery
    BEFORE INSERT OR UPDATE OR DELETE ON convo.live_path
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_10_no_forgery;

-- messages_20_guard: a message inserted outside pgconvo's code must be placed
-- as the tree places it, with well-formed parts (messages_guard); pgconvo's
-- own writes (write_messages) skip it in its WHEN.
CREATE OR REPLACE TRIGGER messages_20_guard
    BEFORE INSERT ON convo.messages
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.messages_guard();
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_20_guard;

-- messages_30_no_update: outside pgconvo's code a message is never updated;
-- pgconvo's only update of one is erasure's redaction (erase_content).
CREATE OR REPLACE TRIGGER messages_30_no_update
    BEFORE UPDATE ON convo.messages
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (content changes only by erasure)');
ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_30_no_update;

-- tool_effect_calls_10_no_forgery: only pgconvo's code (or a superuser) links
-- a call to its decision.
CREATE OR REPLACE TRIGGER tool_effect_calls_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_calls
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_10_no_forgery;

-- tool_effect_events_10_no_forgery: only pgconvo's code (or a superuser)
-- writes the event log.
CREATE OR REPLACE TRIGGER tool_effect_events_10_no_forgery
    BEFORE INSERT ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_10_no_forgery;

-- tool_effect_events_30_no_update: outside pgconvo's code an event is never
-- updated; pgconvo's only update of one is erasure's redaction.
CREATE OR REPLACE TRIGGER tool_effect_events_30_no_update
    BEFORE UPDATE ON convo.tool_effect_events
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_change('append-only (evidence changes only by erasure)');
ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_30_no_update;

-- tool_effects_10_no_forgery: only pgconvo's code (or a superuser) writes the
-- ledger.
CREATE OR REPLACE TRIGGER tool_effects_10_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_10_no_forgery;

-- tool_effects_20_transition: outside pgconvo's code an effect changes only
-- by a transition of the state machine (effect_transitions), CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_effects_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_transition();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_20_transition;

-- tool_effects_30_log_direct: a transition made outside pgconvo's code gets
-- its event, by the caller; pgconvo's own transitions log themselves.
CREATE OR REPLACE TRIGGER tool_effects_30_log_direct
    AFTER INSERT OR UPDATE ON convo.tool_effects
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_effects_log_direct();
ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_30_log_direct;

-- tool_receipts_10_no_forgery: only pgconvo's code (or a superuser) writes
-- receipts.
CREATE OR REPLACE TRIGGER tool_receipts_10_no_forgery
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_10_no_forgery;

-- tool_receipts_20_transition: outside pgconvo's code a receipt is filed
-- pending and ends once, CV006 otherwise.
CREATE OR REPLACE TRIGGER tool_receipts_20_transition
    BEFORE INSERT OR UPDATE ON convo.tool_receipts
    FOR EACH ROW
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.tool_receipts_transition();
ALTER TABLE convo.tool_receipts ENABLE ALWAYS TRIGGER tool_receipts_20_transition;

-- tools_10_no_forgery: only register_tool (or a superuser) adds to the
-- allowlist.
CREATE OR REPLACE TRIGGER tools_10_no_forgery
    BEFORE INSERT ON convo.tools
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_forgery();
ALTER TABLE convo.tools ENABLE ALWAYS TRIGGER tools_10_no_forgery;

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
