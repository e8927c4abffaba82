-- index_messages: the search index's entries of new messages, one a
-- message that has text (search_document), written by write_messages in the
-- transaction that writes the messages, under the configuration in use.
-- Derived: erasure removes a conversation's entries, and set_search_config
-- writes them all again. The owner is read first: the INSERT joins no table
-- (on a distributed database Citus plans no join into it). The
-- configuration is read by the INSERT itself, after it has its lock on the
-- index: a set_search_config that holds the index is waited for, and its
-- configuration is the one read.
CREATE OR REPLACE FUNCTION convo_private.index_messages(p_conversation_id uuid, p_ids uuid[], p_parts jsonb[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner text;
BEGIN
    SELECT c.owner_id INTO v_owner FROM convo.conversations c WHERE c.id = p_conversation_id;
    INSERT INTO convo_private.message_search (conversation_id, message_id, document)
    SELECT p_conversation_id, m.id, convo_private.search_document(m.parts, (SELECT convo_private.search_config_in_use()), v_owner)
      FROM unnest(p_ids, p_parts) AS m (id, parts)
     WHERE convo_private.search_text(m.parts) <> '';
END;
$$;
