-- 0033_erasure_keyed_import_ids: a document imported without an id of its own
-- is keyed by its digest under the database's secret (not the md5 of its
-- text), and a guess of an erased one imports anew like any other document.

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

-- import_key: the one rule for an import's ids (docs/importing.md,
-- "Ids"): the source key (the export's own id, else 'sha:' and the keyed
-- digest of the JSON), the conversation id md5 of the jsonb array (format,
-- owner, source key), whose text no other (owner, source key) pair shares
-- (a plain 'format:owner:key' let owner 'acme' with source '42:foo' take
-- the id of owner 'acme:42' with source 'foo'), where to say the import was
-- going in a DETAIL (p_label names the format), and the keyed digest of the
-- source text that tells a repeat (import_repeat). A repeat is found by
-- owner, format and source key, never by recomputing the id: ids given
-- under the earlier rule stay valid.
-- A document without an id of its own is keyed by its digest under this
-- database's secret (keyed_digest), not by a plain md5 of its text, so
-- that its conversation id, which erasure keeps, cannot be checked against
-- guessed documents; one imported under the earlier md5 rule is still found
-- under its key. And an erasure leaves no answer that tells whether a new
-- document is the erased one: where the id is held by a conversation whose
-- import an erasure emptied of its source key, the next id of the same
-- rule is taken ([format, owner, source key, n]), so that document imports
-- anew like any other; an export's own id is no content, and its erased
-- import stays CV009 (import_tree).
CREATE OR REPLACE FUNCTION convo_private.import_key(
    p_kind     text,
    p_label    text,
    p_owner_id text,
    p_source   text,
    p_doc      jsonb,
    OUT source          text,
    OUT conversation_id uuid,
    OUT place           text,
    OUT digest          text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n int := 0;
BEGIN
    digest := convo_private.keyed_digest(encode(sha256(convert_to(p_doc::text, 'UTF8')), 'hex'));
    source := p_source;
    IF source IS NULL THEN
        SELECT i.source_key INTO source FROM convo.imports i
         WHERE i.owner_id = p_owner_id AND i.format = p_kind AND i.import_id IS NULL
           AND i.source_key = 'sha:' || md5(p_doc::text);
        source := coalesce(source, 'sha:' || digest);
    END IF;
    conversation_id := md5(jsonb_build_array(p_kind, p_owner_id, source)::text)::uuid;
    IF p_source IS NULL THEN
        WHILE EXISTS (SELECT 1 FROM convo.imports i
                       WHERE i.conversation_id = import_key.conversation_id AND i.import_id IS NULL
                         AND i.source_key IS NULL) LOOP
            v_n := v_n + 1;
            conversation_id := md5(jsonb_build_array(p_kind, p_owner_id, source, v_n)::text)::uuid;
        END LOOP;
    END IF;
    place := format('%s %s of owner %s, conversation %s', p_label, source, p_owner_id, conversation_id);
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
