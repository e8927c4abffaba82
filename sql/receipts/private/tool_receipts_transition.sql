-- tool_receipts_transition: a receipt is filed pending and ends once, applied
-- or failed; its owner, key, tool and request never change, its arguments
-- are filled once and are valid only if they pass receipt_arguments_error,
-- and a settled receipt never changes (compared as text: jsonb's = calls 500
-- and 500.000 equal). CV006. It guards every write outside pgconvo's code
-- (whose entries, and erasure, write only such rows).
CREATE OR REPLACE FUNCTION convo_private.tool_receipts_transition()
RETURNS trigger
LANGUAGE plpgsql
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
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NEW.arguments IS NOT NULL THEN
            RAISE EXCEPTION 'a receipt is filed pending and unfilled'
                USING ERRCODE = 'CV006', DETAIL = format('receipt %s', NEW.id);
        END IF;
        RETURN NEW;
    END IF;
    IF to_jsonb(NEW)::text = to_jsonb(OLD)::text THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'pending'
       OR (NEW.id, NEW.owner_id, NEW.idempotency_key, NEW.tool_name, NEW.tool_version, NEW.request::text,
           NEW.request_digest, NEW.created_at, NEW.deadline_at)
          IS DISTINCT FROM
          (OLD.id, OLD.owner_id, OLD.idempotency_key, OLD.tool_name, OLD.tool_version, OLD.request::text,
           OLD.request_digest, OLD.created_at, OLD.deadline_at)
       OR (OLD.arguments IS NOT NULL
           AND (NEW.arguments::text, NEW.expected::text, NEW.arguments_valid, NEW.filled_at)
               IS DISTINCT FROM (OLD.arguments::text, OLD.expected::text, OLD.arguments_valid, OLD.filled_at)) THEN
        RAISE EXCEPTION 'receipt % is %: this change is not a transition it allows', OLD.id, OLD.status
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, %s to %s', OLD.id, OLD.status, NEW.status),
                  HINT = 'A receipt goes from pending to applied or failed, once; its arguments are filled once.';
    END IF;
    IF NEW.arguments_valid AND OLD.arguments IS NULL
       AND convo_private.receipt_arguments_error(NEW.tool_name, NEW.tool_version, NEW.arguments, NEW.expected) IS NOT NULL THEN
        RAISE EXCEPTION 'receipt % arguments are marked valid but fail its tool version or the expected values', OLD.id
            USING ERRCODE = 'CV006', DETAIL = format('receipt %s, tool %s version %s', OLD.id, OLD.tool_name, OLD.tool_version);
    END IF;
    RETURN NEW;
END;
$$;
