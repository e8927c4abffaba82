-- tool_effects_transition: the effect state machine, for every statement.
-- A new effect starts in a state reachable from 'requested'; a change of
-- state must be a row of effect_transitions and may set only the columns
-- that row names; without a change of state nothing changes. CV006 otherwise.
-- Rows are compared by their text, since jsonb's = calls 500 and 500.000 equal.
-- It guards every write outside pgconvo's code (whose entries, and
-- erasure, write only such rows).
CREATE OR REPLACE FUNCTION convo_private.tool_effects_transition()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_from    text := CASE TG_OP WHEN 'INSERT' THEN 'requested' ELSE OLD.state END;
    v_changes text[];
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state = OLD.state THEN
        IF to_jsonb(NEW)::text <> to_jsonb(OLD)::text THEN
            RAISE EXCEPTION 'effect % changes only by a transition of its state', OLD.id
                USING ERRCODE = 'CV006', DETAIL = format('effect %s, state %s', OLD.id, OLD.state);
        END IF;
        RETURN NEW;
    END IF;
    SELECT t.changes INTO v_changes FROM convo.effect_transitions t
     WHERE t.from_state = v_from AND t.to_state = NEW.state;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an effect cannot go from % to %', v_from, NEW.state
            USING ERRCODE = 'CV006', DETAIL = format('effect %s, %s to %s', NEW.id, v_from, NEW.state),
                  HINT = 'The transitions are listed in convo.effect_transitions.';
    END IF;
    IF TG_OP = 'UPDATE' AND (to_jsonb(NEW) - v_changes - 'state')::text <> (to_jsonb(OLD) - v_changes - 'state')::text THEN
        RAISE EXCEPTION 'the transition % to % may change only %', OLD.state, NEW.state, array_to_string(v_changes, ', ')
            USING ERRCODE = 'CV006', DETAIL = format('effect %s', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;
