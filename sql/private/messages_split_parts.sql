-- messages_split_parts: writes one message_parts row per element of a new
-- message's parts, in the same statement, so each part is checked on its
-- own and tool calls get their unique index.
CREATE OR REPLACE FUNCTION convo_private.messages_split_parts()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO convo.message_parts (conversation_id, message_id, ordinal, body)
    SELECT NEW.conversation_id, NEW.id, e.ordinality - 1, e.part
      FROM jsonb_array_elements(NEW.parts) WITH ORDINALITY AS e(part, ordinality);
    RETURN NULL;
END;
$$;
