-- generations_05_row_security: a role row-level security binds is refused
-- (42501, refuse_row_security_bound) before the guards, which run as the
-- owner role, read any row for it; pgconvo's own writes skip it in its WHEN.
CREATE OR REPLACE TRIGGER generations_05_row_security
    BEFORE INSERT OR UPDATE ON convo.generations
    FOR EACH STATEMENT
    WHEN (current_user <> 'convo_owner' OR current_setting('role') = 'convo_owner' OR session_user = 'convo_owner')
    EXECUTE FUNCTION convo_private.refuse_row_security_bound();
ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_05_row_security;
