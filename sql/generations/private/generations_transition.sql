-- generations_transition: a generation starts streaming and ends once:
-- streaming to completed, failed or cancelled, and an ended generation
-- never changes; its identity (prompt, model, params, digest, start) never
-- changes at all, nor does its import, and its answer is an assistant child
-- of its prompt (marked incomplete when a cancelled or failed generation
-- kept what was streamed, and only then), and no other generation's. CV006. A new one's prompt and starting head are messages
-- of its conversation (CV003, CV002), and it names no import (CV011). It
-- guards every write outside pgconvo's code (whose entries, and erasure,
-- write only such rows), first refusing a conversation not the writer's
-- owner's (lock_conversation: CV002); a role row-level security binds was
-- refused before (generations_05_row_security).
CREATE OR REPLACE FUNCTION convo_private.generations_transition()
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
    -- The writer's owner's conversation (writes_owner, CV002 otherwise),
    -- under its lock, as messages_guard: a repair role with BYPASSRLS
    -- writes for the owner it set only.
    PERFORM convo_private.lock_conversation(coalesce(NEW.conversation_id, OLD.conversation_id));
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'streaming' THEN
            RAISE EXCEPTION 'a generation starts streaming, not %', NEW.state
                USING ERRCODE = 'CV006', DETAIL = format('generation %s', NEW.id);
        END IF;
        -- Its prompt and the head it began at are messages of its own
        -- conversation (message_ref: CV003 or CV002), in replica mode too,
        -- which skips the foreign keys that say so. A NULL prompt is left
        -- to its NOT NULL.
        IF NEW.prompt_message_id IS NOT NULL THEN
            PERFORM convo_private.message_ref(NEW.conversation_id, NEW.prompt_message_id);
        END IF;
        IF NEW.head_at_begin IS NOT NULL THEN
            PERFORM convo_private.message_ref(NEW.conversation_id, NEW.head_at_begin);
        END IF;
        -- A restored row comes only from import_conversation, pgconvo's.
        IF NEW.import_id IS NOT NULL THEN
            RAISE EXCEPTION 'a generation written outside the API is not restored from an import'
                USING ERRCODE = 'CV011', DETAIL = format('generation %s, import %s', NEW.id, NEW.import_id),
                      HINT = 'Restore generations with convo.import_conversation.';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.conversation_id, NEW.id, NEW.prompt_message_id, NEW.head_at_begin, NEW.model, NEW.params::text,
        NEW.request_digest, NEW.started_at, NEW.import_id)
       IS DISTINCT FROM
       (OLD.conversation_id, OLD.id, OLD.prompt_message_id, OLD.head_at_begin, OLD.model, OLD.params::text,
        OLD.request_digest, OLD.started_at, OLD.import_id) THEN
        RAISE EXCEPTION 'a generation''s prompt, model, params, digest, start and import never change'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id);
    END IF;
    IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text AND NOT (OLD.state = 'streaming' AND NEW.state IN ('completed', 'failed', 'cancelled')) THEN
        RAISE EXCEPTION 'a generation cannot go from % to %', OLD.state, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('generation %s', OLD.id),
                  HINT = 'A generation goes from streaming to completed, failed or cancelled, once.';
    END IF;
    IF NEW.message_id IS NOT NULL AND OLD.state = 'streaming'
       AND NOT EXISTS (SELECT 1 FROM convo.messages m
                        WHERE m.conversation_id = NEW.conversation_id AND m.id = NEW.message_id
                          AND m.parent_id = NEW.prompt_message_id AND m.role = 'assistant'
                          AND m.incomplete = (NEW.state <> 'completed')) THEN
        RAISE EXCEPTION 'a generation''s message is an assistant answer to its prompt, incomplete unless the generation completed'
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, message %s, prompt %s', OLD.id, NEW.message_id, OLD.prompt_message_id);
    END IF;
    -- Each answer is its own generation's (generations_message_key holds
    -- it too; this names the rule).
    IF NEW.message_id IS NOT NULL AND OLD.state = 'streaming'
       AND EXISTS (SELECT 1 FROM convo.generations o
                    WHERE o.conversation_id = NEW.conversation_id AND o.message_id = NEW.message_id AND o.id <> NEW.id) THEN
        RAISE EXCEPTION 'message % is the answer of another generation', NEW.message_id
            USING ERRCODE = 'CV006', DETAIL = format('generation %s, message %s', OLD.id, NEW.message_id);
    END IF;
    RETURN NEW;
END;
$$;
