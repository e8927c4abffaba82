-- refuse_all_but_erasure: the row-level UPDATE guard of the append-only
-- tables that hold content (messages, message_parts, tool_effect_events,
-- and the metadata of conversations): every UPDATE raises CV005, for every
-- role, unless it is an erasure (is_erasure: exactly the redaction, in a
-- transaction that recorded it).
CREATE OR REPLACE FUNCTION convo_private.refuse_all_but_erasure()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF convo_private.is_erasure(TG_TABLE_NAME, to_jsonb(OLD), to_jsonb(NEW)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'convo.% is append-only: UPDATE is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'CV005',
              DETAIL = format('table convo.%s, conversation %s, role %s', TG_TABLE_NAME,
                              coalesce(to_jsonb(OLD) ->> 'conversation_id', to_jsonb(OLD) ->> 'id'), current_user),
              HINT = 'Nothing in the conversation tree is updated: insert a sibling or move the head instead; '
                     'content is removed only by convo.erase_conversation or convo.erase_owner.';
END;
$$;
