-- keyed_digest: the HMAC-SHA256 (hex) of a plain SHA-256 hex digest under
-- this database's secret (convo_private.digest_key, which only the owner
-- role reads, created by the migration, kept by pg_dump like any table).
-- Every stored digest of content is one (scope and idempotency keys,
-- receipts' request digests, import digests), so that what erasure keeps
-- beside the ids cannot be hashed back into the content it removed by
-- trying candidates (a PIN, a phone number). It takes the plain digest, so
-- a digest stored before keys existed was keyed in place to the value a
-- new computation gives.
CREATE OR REPLACE FUNCTION convo_private.keyed_digest(p_digest text)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key convo_private.digest_key;
BEGIN
    SELECT * INTO STRICT v_key FROM convo_private.digest_key;
    RETURN encode(sha256(v_key.outer_pad || sha256(v_key.inner_pad || convert_to(p_digest, 'UTF8'))), 'hex');
END;
$$;
