-- request_digest: the SHA-256, in lower-case hex, of request_messages' body
-- in its canonical text, jsonb's own output (keys in jsonb's order, one
-- space after each colon and comma), as UTF-8: what an application passes
-- to begin_generation(p_request_digest => ...), so an audit can tell
-- whether a reply was made from exactly the stored path.
CREATE OR REPLACE FUNCTION convo.request_digest(
    p_conversation_id uuid,
    p_message_id      uuid DEFAULT NULL,
    p_format          text DEFAULT 'openai')
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET debug_print_parse = off
SET debug_print_rewritten = off
SET debug_print_plan = off
SET trace_sort = off
SET plpgsql.print_strict_params = off
SET plpgsql.extra_warnings = 'none'
SET plpgsql.extra_errors = 'none'
SET client_min_messages = notice
AS $$
BEGIN
    RETURN encode(sha256(convert_to(convo.request_messages(p_conversation_id, p_message_id, p_format)::text, 'UTF8')), 'hex');
END;
$$;

COMMENT ON FUNCTION convo.request_digest(uuid, uuid, text) IS
    'SHA-256 (hex) of request_messages'' jsonb text: the p_request_digest of begin_generation, for auditing a reply against the stored path.';
