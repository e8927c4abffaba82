-- import_key: the one rule for an import's ids (docs/importing.md,
-- "Ids"): the source key (the export's own id, else 'sha:' and the keyed
-- digest of the JSON), the conversation id (the keyed digest of the jsonb
-- array [format, owner, source key], whose text no other (owner, source
-- key) pair shares: a plain 'format:owner:key' let owner 'acme' with source
-- '42:foo' take the id of owner 'acme:42' with source 'foo'), where to say
-- the import was going in a DETAIL (p_label names the format), and the
-- keyed digest of the source text that tells a repeat (import_repeat). A
-- repeat is found by owner, format and source key, never by recomputing the
-- id: ids given under an earlier rule stay valid.
-- The id is keyed with this database's secret (keyed_digest), not an md5
-- anyone can compute: a conversation id is answered for (create_conversation
-- says CV009 for one that is taken), so a computable one would tell whether
-- another owner imported a given chat; and erasure keeps the id, so for a
-- document without an id of its own (its content is its key) one computed
-- from the document would answer a guess of it. One imported under the
-- earlier md5 rule is still found under its old key. And an erasure leaves
-- no answer that tells whether a new document is the erased one: where the
-- id is held by a conversation whose import an erasure emptied of its
-- source key, the next id of the rule is taken (the array with n = 1, 2,
-- ...), so that document imports anew like any other; an export's own id
-- is no content, and its erased import stays CV009 (import_tree).
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
    IF p_source IS NOT NULL THEN
        source := p_source;
        conversation_id := left(convo_private.keyed_digest(encode(sha256(convert_to(
            jsonb_build_array(p_kind, p_owner_id, source)::text, 'UTF8')), 'hex')), 32)::uuid;
    ELSE
        SELECT i.source_key, i.conversation_id INTO source, conversation_id FROM convo.imports i
         WHERE i.owner_id = p_owner_id AND i.format = p_kind AND i.import_id IS NULL
           AND i.source_key = 'sha:' || md5(p_doc::text);
        IF NOT FOUND THEN
            source := 'sha:' || digest;
            LOOP
                conversation_id := left(convo_private.keyed_digest(encode(sha256(convert_to(
                    CASE WHEN v_n = 0 THEN jsonb_build_array(p_kind, p_owner_id, source)
                         ELSE jsonb_build_array(p_kind, p_owner_id, source, v_n) END::text,
                    'UTF8')), 'hex')), 32)::uuid;
                EXIT WHEN NOT EXISTS (SELECT 1 FROM convo.imports i
                                       WHERE i.conversation_id = import_key.conversation_id AND i.import_id IS NULL
                                         AND i.source_key IS NULL);
                v_n := v_n + 1;
            END LOOP;
        END IF;
    END IF;
    place := format('%s %s of owner %s, conversation %s', p_label, source, p_owner_id, conversation_id);
END;
$$;
