-- openwebui_file: one element of an Open WebUI message's files as a part:
-- an attachment whose uri is its url (a data: URI kept whole), else
-- openwebui-file:<file.id or id>, and whose media type is the data: URI's,
-- else file.meta.content_type, meta.content_type or content_type, else
-- application/octet-stream; an element with neither url nor id is a text
-- part that says so and holds it.
CREATE OR REPLACE FUNCTION convo_private.openwebui_file(p_file jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
BEGIN ATOMIC
    SELECT CASE WHEN x.uri IS NULL
                THEN jsonb_build_object('type', 'text', 'text', '[unmapped openwebui file] ' || p_file::text)
                ELSE jsonb_build_object('type', 'attachment', 'uri', x.uri, 'media_type',
                         coalesce(substring(x.url FROM '^data:([^;,]+)'),
                                  convo_private.nonempty_text(p_file -> 'file' -> 'meta' -> 'content_type'),
                                  convo_private.nonempty_text(p_file -> 'meta' -> 'content_type'),
                                  convo_private.nonempty_text(p_file -> 'content_type'),
                                  'application/octet-stream')) END
      FROM (SELECT u.url, coalesce(u.url, 'openwebui-file:' || coalesce(convo_private.nonempty_text(p_file -> 'file' -> 'id'),
                                                                       convo_private.nonempty_text(p_file -> 'id'))) AS uri
              FROM (SELECT convo_private.nonempty_text(p_file -> 'url') AS url) u) x;
END;
