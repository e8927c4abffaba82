-- self_check: every invariant a DBA can verify on a live database, one row
-- per check, ok or not with the offenders (the first 10) in detail. It reads
-- every row of the package once per check (foreign_keys_hold: each table once
-- per foreign key it holds): run it from a maintenance job or `migrate
-- verify`, not from a request.
CREATE OR REPLACE FUNCTION convo.self_check()
RETURNS TABLE (check_name text, ok boolean, detail text)
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
DECLARE
    v_bad   text[];
    v_found text[];
    v_key   record;
BEGIN
    -- Triggers: each of the package's present and ENABLE ALWAYS (so neither
    -- session_replication_role nor a plain ENABLE skips it), by what it
    -- guards; a view's trigger present and enabled (a view cannot be
    -- written in replica mode anyway: its INSERT writes nothing).
    FOR check_name, v_bad IN
        SELECT CASE g.guards WHEN 'row_security' THEN 'rule' ELSE g.guards END, array_agg(g.table_name || '.' || g.trigger_name || ' '
                                   || CASE WHEN tg.oid IS NULL THEN 'missing' ELSE 'enabled=' || tg.tgenabled::text END
                                   ORDER BY g.table_name, g.trigger_name)
                             FILTER (WHERE tg.oid IS NULL OR (tg.tgenabled <> 'A' AND NOT (rel.relkind = 'v' AND tg.tgenabled = 'O')))
          FROM convo_private.package_triggers() g
          LEFT JOIN pg_class rel ON rel.oid = to_regclass('convo.' || g.table_name)
          LEFT JOIN pg_trigger tg ON tg.tgname = g.trigger_name AND tg.tgrelid = rel.oid
         GROUP BY 1
    LOOP
        check_name := CASE check_name WHEN 'append_only' THEN 'append_only_triggers'
                                      WHEN 'head_log' THEN 'head_log_trigger' ELSE 'rule_triggers' END;
        ok := v_bad IS NULL;
        detail := coalesce(array_to_string(v_bad[1:10], '; '), 'all present, enabled always');
        RETURN NEXT;
    END LOOP;

    -- Every table of convo refuses TRUNCATE, which row-level security does
    -- not bind (a role granted it would empty every owner's rows at once):
    -- one of the package's ENABLE ALWAYS triggers fires on it.
    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO v_bad
      FROM pg_class c
     WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p')
       AND NOT EXISTS (SELECT 1 FROM pg_trigger tg
                        JOIN convo_private.package_triggers() g ON g.table_name = c.relname AND g.trigger_name = tg.tgname
                       WHERE tg.tgrelid = c.oid AND tg.tgenabled = 'A' AND tg.tgtype & 32 <> 0);
    RETURN QUERY SELECT 'truncate_refused', v_bad IS NULL,
                        coalesce('no trigger refuses TRUNCATE on ' || array_to_string(v_bad, ', '),
                                 'every table refuses TRUNCATE');

    -- No trigger of anyone else's on the package's tables: with TRIGGER
    -- privilege a role could rewrite rows on their way in.
    SELECT array_agg(c.relname || '.' || tg.tgname ORDER BY c.relname, tg.tgname) INTO v_bad
      FROM pg_trigger tg
      JOIN pg_class c ON c.oid = tg.tgrelid
     WHERE c.relnamespace = 'convo'::regnamespace AND NOT tg.tgisinternal
       AND NOT EXISTS (SELECT 1 FROM convo_private.package_triggers() g
                        WHERE g.table_name = c.relname AND g.trigger_name = tg.tgname);
    RETURN QUERY SELECT 'no_foreign_triggers', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'none');

    -- Every head equals its last head-log row, and each log row starts where
    -- the one before it ended.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ' head ' || coalesce(c.head_message_id::text, 'none')
               || ', last logged ' || coalesce(last.head_message_id::text, 'none') AS id
          FROM convo.conversations c
          LEFT JOIN LATERAL (SELECT l.head_message_id FROM convo.conversation_head_log l
                              WHERE l.conversation_id = c.id ORDER BY l.seq DESC LIMIT 1) last ON true
         WHERE c.head_message_id IS DISTINCT FROM last.head_message_id
        UNION ALL
        SELECT 'conversation ' || l.conversation_id || ' log seq ' || l.seq || ' does not start where '
               || coalesce('seq ' || l.prev_seq || ' ended', 'the conversation began')
          FROM (SELECT l.*, lag(l.head_message_id) OVER w AS prev_head, lag(l.seq) OVER w AS prev_seq
                  FROM convo.conversation_head_log l
                WINDOW w AS (PARTITION BY l.conversation_id ORDER BY l.seq)) l
         WHERE l.previous_head_id IS DISTINCT FROM l.prev_head) x;
    RETURN QUERY SELECT 'heads_match_log', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every head is its last logged move');

    -- Every foreign key of the package holds on every row: a head, a
    -- head-log row, a parent, a generation's prompt names a message of its
    -- own conversation, an effect its tool version, and so on. A session in
    -- session_replication_role = replica skips foreign-key checks (the
    -- guards, ENABLE ALWAYS, still run), as does a superuser's DISABLE
    -- TRIGGER ALL: a row that got past shows here. One anti-join a key, read
    -- from the catalog, so a key added later is covered.
    v_bad := NULL;
    FOR v_key IN
        SELECT con.conname, con.conrelid::regclass::text AS child, con.confrelid::regclass::text AS parent,
               string_agg(quote_ident(ca.attname), ', ' ORDER BY k.n) AS child_cols,
               string_agg(quote_ident(pa.attname), ', ' ORDER BY k.n) AS parent_cols,
               string_agg('c.' || quote_ident(ca.attname), ', ' ORDER BY k.n) AS c_cols,
               string_agg('p.' || quote_ident(pa.attname), ', ' ORDER BY k.n) AS p_cols
          FROM pg_constraint con
         CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k (child_att, parent_att, n)
          JOIN pg_attribute ca ON ca.attrelid = con.conrelid AND ca.attnum = k.child_att
          JOIN pg_attribute pa ON pa.attrelid = con.confrelid AND pa.attnum = k.parent_att
         WHERE con.contype = 'f' AND con.connamespace = 'convo'::regnamespace
         GROUP BY con.oid, con.conname, con.conrelid, con.confrelid
         ORDER BY 2, 1
    LOOP
        -- A key with a NULL column references nothing (MATCH SIMPLE).
        EXECUTE format('SELECT array_agg(%L || '' = '' || x.k || '' names no row of '' || %L ORDER BY x.k)
                          FROM (SELECT ROW(%s)::text AS k FROM %s c
                                 WHERE ROW(%s) IS NOT NULL
                                   AND NOT EXISTS (SELECT 1 FROM %s p WHERE (%s) = (%s))
                                 ORDER BY 1 LIMIT 10) x',
                       v_key.child || ' (' || v_key.child_cols || ')', v_key.parent || ' (' || v_key.parent_cols || ')',
                       v_key.c_cols, v_key.child, v_key.c_cols, v_key.parent, v_key.p_cols, v_key.c_cols)
           INTO v_found;
        v_bad := v_bad || v_found;
    END LOOP;
    RETURN QUERY SELECT 'foreign_keys_hold', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every reference names its row');

    -- The live-path index (convo.live_path, what path reads) holds exactly
    -- the segments of the path from the root to each head (each branch it
    -- runs through, from where the branch starts to the deepest of it on
    -- the path), walked from the tree here. Repair:
    -- convo_private.rebuild_live_path(id).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'conversation ' || c.id || ': ' || d.n || ' live_path rows differ from the path to its head' AS id
          FROM convo.conversations c
         CROSS JOIN LATERAL (
               SELECT count(*) AS n
                 FROM (SELECT s.branch_id, b.depth AS min_depth, s.max_depth
                         FROM convo_private.path_segments(c.id, c.head_message_id) s
                         JOIN convo.messages b ON b.conversation_id = c.id AND b.id = s.branch_id) p
                 FULL JOIN (SELECT l.* FROM convo.live_path l WHERE l.conversation_id = c.id) l ON l.branch_id = p.branch_id
                WHERE (p.min_depth, p.max_depth) IS DISTINCT FROM (l.min_depth, l.max_depth)) d
         WHERE d.n > 0
        UNION ALL
        SELECT 'live_path rows of conversation ' || l.conversation_id || ', which does not exist'
          FROM convo.live_path l
         WHERE NOT EXISTS (SELECT 1 FROM convo.conversations c WHERE c.id = l.conversation_id)
         GROUP BY l.conversation_id) x;
    RETURN QUERY SELECT 'live_path_index', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every live path is its head''s path');

    -- Every effect was created by exactly one call (execute, confirm or
    -- rejected) and every link names a tool_use of the effect's tool.
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' has ' || count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse')
               || ' creating calls' AS id
          FROM convo.tool_effects e
          LEFT JOIN convo.tool_effect_calls l ON l.conversation_id = e.conversation_id AND l.effect_id = e.id
         GROUP BY e.conversation_id, e.id
        HAVING count(l.tool_call_id) FILTER (WHERE l.decision <> 'reuse') <> 1
        UNION ALL
        SELECT 'call ' || l.tool_call_id || ' of conversation ' || l.conversation_id || ' links a part that is not its tool_use'
          FROM convo.tool_effect_calls l
          JOIN convo.keyed_parts p
            ON p.conversation_id = l.conversation_id AND p.message_id = l.message_id AND p.ordinal = l.ordinal
          LEFT JOIN convo.tool_effects e ON e.conversation_id = l.conversation_id AND e.id = l.effect_id
         WHERE p.type <> 'tool_use' OR p.tool_call_id <> l.tool_call_id
            OR (e.id IS NOT NULL AND e.tool_name <> p.tool_name)) x;
    RETURN QUERY SELECT 'effects_linked', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every effect and link is consistent');

    -- Every ledger row is one the API could have written (ledger_problems):
    -- decisions that follow from the tool version, links within a scope,
    -- effects that their creating call explains. Written by hand past the
    -- API (a superuser, an import of old), a row shows here.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'conversation ' || p.conversation_id || ', ' || p.row_name || ': ' || p.problem AS d
          FROM convo_private.ledger_problems(NULL) p) x;
    RETURN QUERY SELECT 'ledger_as_written', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every decision, link and effect is one the API writes');

    -- Every effect's events form one chain from 'requested' to its state, and
    -- every CHECK that ties a state to its columns is in force (validated).
    SELECT array_agg(x.id ORDER BY x.id) INTO v_bad FROM (
        SELECT 'effect ' || e.id || ' is ' || e.state || ', its events end at '
               || coalesce(last.to_state, 'nothing') AS id
          FROM convo.tool_effects e
          LEFT JOIN LATERAL (SELECT ev.to_state FROM convo.tool_effect_events ev
                              WHERE ev.conversation_id = e.conversation_id AND ev.effect_id = e.id
                              ORDER BY ev.seq DESC LIMIT 1) last ON true
         WHERE last.to_state IS DISTINCT FROM e.state
        UNION ALL
        SELECT 'effect ' || ev.effect_id || ' event ' || ev.seq || ' starts from ' || ev.from_state
          FROM (SELECT ev.*, lag(ev.to_state, 1, 'requested') OVER (PARTITION BY ev.conversation_id, ev.effect_id
                                                                   ORDER BY ev.seq) AS prev_state
                  FROM convo.tool_effect_events ev) ev
         WHERE ev.from_state <> ev.prev_state
        UNION ALL
        SELECT 'constraint ' || con.conname || ' is not validated'
          FROM pg_constraint con
         WHERE con.connamespace = 'convo'::regnamespace AND NOT con.convalidated) x;
    RETURN QUERY SELECT 'effect_states_consistent', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every state matches its event chain');

    -- Row-level security on every owner-scoped table: each table of convo
    -- with a conversation_id or owner_id column, so a table added later is
    -- covered without a list to keep. It is enabled, not forced: the API
    -- functions run as the owner role and check the owner once per call
    -- (sees_owner, writes_owner), which keeps the path at the cost of a flat
    -- read; any other role is bound by the policies.
    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO v_bad
      FROM pg_class c
     WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p')
       AND EXISTS (SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname IN ('conversation_id', 'owner_id') AND NOT a.attisdropped)
       AND NOT c.relrowsecurity;
    RETURN QUERY SELECT 'row_level_security', v_bad IS NULL,
                        coalesce('not enabled on ' || array_to_string(v_bad, ', '),
                                 'enabled on every owner-scoped table');

    -- Every view a role other than its owner may read shows it only its
    -- own rows, EXPLAIN included. A view running as its owner and filtering
    -- by owner in its WHERE clause is not enough, even as a
    -- security_barrier: the planner pushes a caller's leakproof condition
    -- (=, <, >= on a uuid, a number, a text) down to a table scan below the
    -- owner filter, and EXPLAIN ANALYZE's row counts there count every
    -- owner's rows. So such a view is a security_barrier over functions
    -- only (PL/pgSQL, which take no caller's condition and show EXPLAIN
    -- nothing of what they read), reading no table itself; or a
    -- security_invoker view whose tables' policies give each reader every
    -- row or none (USING (true)): under a policy that filters, a leakproof
    -- condition that becomes an index condition shows its count from
    -- before the policy's filter just as well.
    SELECT array_agg(v.relname || ' (' || v.why || ')' ORDER BY v.relname) INTO v_bad FROM (
        SELECT c.relname::text AS relname,
               CASE WHEN invoker THEN 'security_invoker over a table whose policies filter rows'
                    WHEN barrier THEN 'security_barrier reading a table itself'
                    ELSE 'neither security_barrier nor security_invoker' END AS why,
               barrier, invoker, reads_table, filtered
          FROM pg_class c
         CROSS JOIN LATERAL (
               SELECT coalesce(bool_or(o.option_name = 'security_barrier' AND o.option_value::boolean), false) AS barrier,
                      coalesce(bool_or(o.option_name = 'security_invoker' AND o.option_value::boolean), false) AS invoker
                 FROM pg_options_to_table(c.reloptions) o) opt
         CROSS JOIN LATERAL (
               SELECT coalesce(bool_or(t.relkind IN ('r', 'p', 'v', 'm', 'f')), false) AS reads_table,
                      coalesce(bool_or(EXISTS (SELECT 1 FROM pg_policy pol
                                                WHERE pol.polrelid = t.oid
                                                  AND pg_get_expr(pol.polqual, pol.polrelid) IS DISTINCT FROM 'true')), false) AS filtered
                 FROM pg_rewrite rw
                 JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = rw.oid
                                 AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> c.oid
                 JOIN pg_class t ON t.oid = d.refobjid
                WHERE rw.ev_class = c.oid) dep
         WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'v'
           AND (EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
                         WHERE a.grantee <> c.relowner AND a.privilege_type = 'SELECT')
                OR EXISTS (SELECT 1 FROM pg_attribute att CROSS JOIN LATERAL aclexplode(att.attacl) a
                            WHERE att.attrelid = c.oid AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'))) v
     WHERE NOT ((v.invoker AND NOT v.filtered) OR (NOT v.invoker AND v.barrier AND NOT v.reads_table));
    RETURN QUERY SELECT 'views_security_barrier', v_bad IS NULL,
                        coalesce('readable by other roles, and a reader''s conditions or EXPLAIN reach rows it may not read: '
                                 || array_to_string(v_bad, ', '),
                                 'every view other roles read is a security barrier over functions, or reads with the reader''s rights under policies that filter nothing');

    -- Every SECURITY DEFINER function of the package pins search_path, and
    -- turns off each setting any session may SET that would print what runs
    -- inside it to that session (with client_min_messages = log): the parse,
    -- rewritten and plan trees, whose constants are the values the function
    -- read (another owner's ids, the keyed digests of the caller's input);
    -- trace_sort's sizes; PL/pgSQL's parameters of a failed INTO STRICT, and
    -- its extra checks (too_many_rows would warn or fail on how many rows a
    -- lookup found, whoever's they are); and no LOG message from inside
    -- reaches the client (auto_explain, where a DBA loaded it with
    -- log_nested_statements, logs the plans run inside at LOG).
    SELECT array_agg(p.oid::regprocedure::text || ' lacks ' || array_to_string(m.missing, ', ')
                     ORDER BY p.oid::regprocedure::text) INTO v_bad
      FROM pg_proc p
     CROSS JOIN LATERAL (
           SELECT array_agg(w.setting ORDER BY w.setting) AS missing
             FROM unnest(ARRAY['search_path=pg_catalog, pg_temp', 'debug_print_parse=off', 'debug_print_rewritten=off',
                               'debug_print_plan=off', 'trace_sort=off', 'plpgsql.print_strict_params=off',
                               'plpgsql.extra_warnings=none', 'plpgsql.extra_errors=none',
                               'client_min_messages=notice']) AS w (setting)
            WHERE NOT (w.setting = ANY (coalesce(p.proconfig, '{}')))) m
     WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND p.prosecdef
       AND m.missing IS NOT NULL;
    RETURN QUERY SELECT 'definer_settings', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '),
                                 'every SECURITY DEFINER function pins search_path and prints nothing of what it runs');

    -- Privileges exactly as documented: nothing for PUBLIC, nothing on a table
    -- for convo_app, nothing at all on convo_private.
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        (SELECT 'extra: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee AS d
           FROM (SELECT * FROM convo_private.granted_privileges()
                 EXCEPT SELECT * FROM convo_private.documented_grants()) g)
        UNION ALL
        (SELECT 'missing: ' || g.privilege || ' on ' || g.object_name || ' to ' || g.grantee
           FROM (SELECT * FROM convo_private.documented_grants()
                 EXCEPT SELECT * FROM convo_private.granted_privileges()) g)) x;
    RETURN QUERY SELECT 'privileges', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'exactly as documented');

    -- Every object belongs to convo_owner, which cannot log in, is no
    -- superuser, and has no member that can (read from pg_auth_members, not
    -- pg_has_role, which fails on a role dropped while the query runs).
    SELECT array_agg(x.d ORDER BY x.d) INTO v_bad FROM (
        SELECT 'schema ' || n.nspname || ' owned by ' || pg_get_userbyid(n.nspowner) AS d
          FROM pg_namespace n
         WHERE n.nspname IN ('convo', 'convo_private') AND pg_get_userbyid(n.nspowner) <> 'convo_owner'
        UNION ALL
        SELECT 'relation ' || c.oid::regclass || ' owned by ' || pg_get_userbyid(c.relowner)
          FROM pg_class c
         WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(c.relowner) <> 'convo_owner'
        UNION ALL
        SELECT 'function ' || p.oid::regprocedure || ' owned by ' || pg_get_userbyid(p.proowner)
          FROM pg_proc p
         WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
           AND pg_get_userbyid(p.proowner) <> 'convo_owner'
        UNION ALL
        SELECT 'role convo_owner can log in or is a superuser'
          FROM pg_roles r WHERE r.rolname = 'convo_owner' AND (r.rolcanlogin OR r.rolsuper)
        UNION ALL
        SELECT 'login role ' || r.rolname || ' is a member of convo_owner'
          FROM (WITH RECURSIVE members (oid) AS (
                    SELECT m.member FROM pg_auth_members m WHERE m.roleid = 'convo_owner'::regrole
                    UNION
                    SELECT m.member FROM pg_auth_members m JOIN members ON m.roleid = members.oid)
                SELECT members.oid FROM members) mm
          JOIN pg_roles r ON r.oid = mm.oid
         WHERE r.rolcanlogin AND NOT r.rolsuper) x;
    RETURN QUERY SELECT 'ownership', v_bad IS NULL,
                        coalesce(array_to_string(v_bad[1:10], '; '), 'every object owned by convo_owner, which no login role can become');
END;
$$;

COMMENT ON FUNCTION convo.self_check() IS
    'Every invariant a DBA can verify on a live database: one row per check, ok, and the offenders in detail.';
