-- 0033_erasure_keyed_import_ids down: reverses 0033_erasure_keyed_import_ids.up.sql.

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

-- import_key: the one rule for an import's ids (docs/importing.md,
-- "Ids"): the source key (the export's own id, else 'sha:' and the
-- md5 of the JSON), the conversation id md5 of the jsonb array (format,
-- owner, source key), whose text no other (owner, source key) pair shares
-- (a plain 'format:owner:key' let owner 'acme' with source '42:foo' take
-- the id of owner 'acme:42' with source 'foo'), where to say the import was
-- going in a DETAIL (p_label names the format), and the keyed digest of the
-- source text that tells a repeat (import_repeat). A repeat is found by
-- owner, format and source key, never by recomputing the id: ids given
-- under the earlier rule stay valid.
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
BEGIN
    source := coalesce(p_source, 'sha:' || md5(p_doc::text));
    conversation_id := md5(jsonb_build_array(p_kind, p_owner_id, source)::text)::uuid;
    place := format('%s %s of owner %s, conversation %s', p_label, source, p_owner_id, conversation_id);
    digest := convo_private.keyed_digest(encode(sha256(convert_to(p_doc::text, 'UTF8')), 'hex'));
END;
$$;

-- Reverse the table changes here, below the objects.

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
