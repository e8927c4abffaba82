-- import_walk: one pass over an import's source tree, given as arrays in key
-- order (p_parent: the index of each node's source parent, 0 for none).
-- For each node: its imported parent (the nearest imported strict ancestor,
-- 0 for none: a root), its depth among imported messages, and its time (its
-- own, else its imported parent's, else p_root_time). Each node is pushed
-- on a stack once and resolved once, after its ancestors: linear in the
-- nodes. A node that is its own ancestor (a cycle) is CV011, naming it.
CREATE OR REPLACE FUNCTION convo_private.import_walk(
    p_keys text[], p_parent int[], p_imported boolean[], p_time timestamptz[], p_root_time timestamptz, p_where text,
    OUT o_parent int[], OUT o_depth int[], OUT o_at timestamptz[])
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n     int := coalesce(cardinality(p_keys), 0);
    v_state int[] := array_fill(0, ARRAY[v_n]); -- 0 unseen, 1 on the stack, 2 resolved
    v_stack int[] := array_fill(0, ARRAY[v_n]);
    v_sp    int;
    v_j     int;
    v_k     int;
    v_p     int;
    v_ip    int;
BEGIN
    o_parent := array_fill(0, ARRAY[v_n]);
    o_depth := array_fill(0, ARRAY[v_n]);
    o_at := array_fill(NULL::timestamptz, ARRAY[v_n]);
    FOR v_i IN 1 .. v_n LOOP
        CONTINUE WHEN v_state[v_i] = 2;
        -- Climb until a root or a resolved node.
        v_sp := 0;
        v_j := v_i;
        WHILE v_j > 0 AND v_state[v_j] = 0 LOOP
            v_state[v_j] := 1;
            v_sp := v_sp + 1;
            v_stack[v_sp] := v_j;
            v_j := p_parent[v_j];
        END LOOP;
        IF v_j > 0 AND v_state[v_j] = 1 THEN
            RAISE EXCEPTION 'node % is its own ancestor: following its parents never reaches a root', p_keys[v_j]
                USING ERRCODE = 'CV011', DETAIL = format('%s, node %s', p_where, p_keys[v_j]);
        END IF;
        -- Resolve down again, ancestors first.
        WHILE v_sp > 0 LOOP
            v_k := v_stack[v_sp];
            v_sp := v_sp - 1;
            v_p := p_parent[v_k];
            v_ip := CASE WHEN v_p = 0 THEN 0 WHEN p_imported[v_p] THEN v_p ELSE o_parent[v_p] END;
            o_parent[v_k] := v_ip;
            o_depth[v_k] := CASE WHEN v_ip = 0 THEN 0 ELSE o_depth[v_ip] + 1 END;
            o_at[v_k] := coalesce(p_time[v_k], CASE WHEN v_ip = 0 THEN p_root_time ELSE o_at[v_ip] END);
            v_state[v_k] := 2;
        END LOOP;
    END LOOP;
END;
$$;
