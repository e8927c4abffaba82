-- chatgpt_attach: a ChatGPT message's parts from chatgpt_message's items:
-- each {"pointer": uri} becomes an attachment whose media type is the
-- mime_type of the metadata.attachments entry the pointer names (its id is
-- the uri without its file-service:// or sediment:// scheme), else
-- application/octet-stream; then each attachment no pointer names (an
-- uploaded PDF, say) becomes a chatgpt-attachment:<id> attachment, and an
-- entry without an id a text part that says so. One hash join: linear.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_attach(p_items jsonb, p_attachments jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    WITH att AS (
        SELECT a.n, a.e, convo_private.nonempty_text(a.e -> 'id') AS id,
               convo_private.nonempty_text(a.e -> 'mime_type') AS mime
          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_attachments) = 'array' THEN p_attachments ELSE '[]'::jsonb END)
               WITH ORDINALITY AS a (e, n)
    ), mime AS (
        SELECT DISTINCT ON (att.id) att.id, att.mime FROM att WHERE att.id IS NOT NULL ORDER BY att.id, att.n
    ), items AS (
        SELECT i.n, i.e, regexp_replace(i.e ->> 'pointer', '^(file-service|sediment)://', '') AS ref
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS i (e, n)
    )
    SELECT jsonb_agg(x.part ORDER BY x.k, x.n)
      FROM (SELECT 0 AS k, items.n,
                   CASE WHEN items.e ? 'pointer'
                        THEN jsonb_build_object('type', 'attachment', 'uri', items.e ->> 'pointer',
                                                'media_type', coalesce(mime.mime, 'application/octet-stream'))
                        ELSE items.e END AS part
              FROM items LEFT JOIN mime ON mime.id = items.ref
            UNION ALL
            SELECT 1, att.n,
                   CASE WHEN att.id IS NULL
                        THEN jsonb_build_object('type', 'text', 'text', '[unmapped chatgpt attachment] ' || att.e::text)
                        ELSE jsonb_build_object('type', 'attachment', 'uri', 'chatgpt-attachment:' || att.id,
                                                'media_type', coalesce(att.mime, 'application/octet-stream')) END
              FROM att
             WHERE att.id IS NULL OR NOT EXISTS (SELECT 1 FROM items WHERE items.ref = att.id)) x;
END;
