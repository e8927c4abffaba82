-- message_parts_of: a message's parts as the JSON array they were given in.
CREATE OR REPLACE FUNCTION convo.message_parts_of(p_conversation_id uuid, p_message_id uuid)
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, convo
RETURN (SELECT jsonb_agg(p.body ORDER BY p.ordinal)
          FROM convo.message_parts p
         WHERE p.conversation_id = p_conversation_id AND p.message_id = p_message_id);
