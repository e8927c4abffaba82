-- chatgpt_is_call: whether a ChatGPT message is a tool call: an assistant
-- message whose recipient is a tool (a non-empty string other than "all"),
-- whatever its content type.
CREATE OR REPLACE FUNCTION convo_private.chatgpt_is_call(p_message jsonb)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
RETURN coalesce(p_message -> 'author' ->> 'role' = 'assistant'
                AND convo_private.nonempty_text(p_message -> 'recipient') <> 'all', false);
