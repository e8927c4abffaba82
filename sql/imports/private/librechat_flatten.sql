-- librechat_flatten: the messages of a LibreChat export as rows in document
-- order (seq, preorder), each with its nesting depth, the messageId of the
-- message it is nested under (NULL at the top), its position there (ord,
-- from 1) and whether its children were read. A recursive export nests
-- replies in each message's children: they are flattened with a stack of
-- children lists, each message read once, preorder, and returned
-- without its children (each child is a row of its own, so nothing is
-- kept twice). A flat export's children are not read: its messages come
-- back verbatim. Memory stays within the document's size; but jsonb hands
-- out a nested value only as a copy, so a message's subtree is copied once
-- per level above it: the time is the size times the nesting depth, which
-- is capped (max_librechat_nesting, CV010 past it) so that it stays linear.
CREATE OR REPLACE FUNCTION convo_private.librechat_flatten(p_messages jsonb, p_recursive boolean)
RETURNS TABLE (seq int, depth int, nest_parent text, ord int, message jsonb, listed boolean)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a stack of frames: a list of messages, the next index in it, the
    -- messageId of the message it is the children of
    v_frames jsonb[] := ARRAY[p_messages];
    v_next   int[] := ARRAY[0];
    v_owner  text[] := ARRAY[NULL::text];
    v_top    int := 1;
    v_m      jsonb;
BEGIN
    seq := 0;
    WHILE v_top > 0 LOOP
        IF v_next[v_top] >= jsonb_array_length(v_frames[v_top]) THEN
            v_frames[v_top] := NULL;
            v_top := v_top - 1;
            CONTINUE;
        END IF;
        v_m := v_frames[v_top] -> v_next[v_top];
        v_next[v_top] := v_next[v_top] + 1;
        seq := seq + 1;
        depth := v_top - 1;
        nest_parent := v_owner[v_top];
        ord := v_next[v_top];
        listed := p_recursive AND jsonb_typeof(v_m) = 'object' AND jsonb_typeof(v_m -> 'children') = 'array';
        message := CASE WHEN listed THEN v_m - 'children' ELSE v_m END;
        RETURN NEXT;
        IF listed AND v_top >= convo_private.max_librechat_nesting()
           AND jsonb_array_length(v_m -> 'children') > 0 THEN
            RAISE EXCEPTION 'a recursive LibreChat export nests deeper than % levels', convo_private.max_librechat_nesting()
                USING ERRCODE = 'CV010',
                      DETAIL = format('message %s, at nesting depth %s', coalesce(convo_private.nonempty_text(v_m -> 'messageId'),
                                                                              'without a messageId'), v_top - 1),
                      HINT = 'Export the conversation from LibreChat as a flat list (recursive off): it has no such limit.';
        END IF;
        IF listed THEN
            v_top := v_top + 1;
            v_frames[v_top] := v_m -> 'children';
            v_next[v_top] := 0;
            v_owner[v_top] := convo_private.nonempty_text(v_m -> 'messageId');
        END IF;
    END LOOP;
END;
$$;
