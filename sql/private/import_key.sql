-- import_key: the one rule for an import's ids (import-mapping.md §4.2, §5):
-- the source id (the export's own, else 'sha:' and the md5 of the JSON), the
-- conversation id md5(kind || ':' || owner || ':' || source), where to say
-- the import was going in a DETAIL (p_label names the source's kind), and
-- the digest of the source text that tells a repeat (import_repeat).
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
LANGUAGE sql
STABLE
BEGIN ATOMIC
    SELECT k.source, k.id,
           format('%s %s of owner %s, conversation %s', p_label, k.source, p_owner_id, k.id),
           encode(sha256(convert_to(p_doc::text, 'UTF8')), 'hex')
      FROM (SELECT s.source, md5(p_kind || ':' || p_owner_id || ':' || s.source)::uuid AS id
              FROM (SELECT coalesce(p_source, 'sha:' || md5(p_doc::text)) AS source) s) k;
END;
