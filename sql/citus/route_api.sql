-- route_api: the API on a distributed database, from one list: each
-- function that names a conversation routed by it to the node that holds
-- the conversation (route), begin_receipt by its owner and the receipts
-- named by id by the caller's owner to the owner's node, create_conversation
-- in two calls (route_create_conversation), the sidebar in one a node
-- (route_conversations), erase_owner a node and a conversation at a time
-- (route_erase_owner), register_tool on the coordinator's copy of the
-- allowlist and from there on every worker's (route_register_tool), the
-- stale lists and the receipts' sweep a node at a time (route_view_rows,
-- route_expire_receipts); the imports, self_check, erase_due and search
-- refuse there
-- (refuse_distributed). What is not listed here runs as it does on one
-- server. No function keeps plan_cache_mode = force_generic_plan or
-- force_custom_plan: Citus cannot plan a generic plan's parameters in the
-- statements it routes. Run by distribute and after every later migration,
-- which may have re-created an API function as its body; idempotent.
CREATE OR REPLACE FUNCTION convo_node.route_api()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_function regprocedure;
BEGIN
    FOR v_function IN
        SELECT p.oid FROM pg_proc p
         WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace, 'convo_node'::regnamespace)
           AND EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'plan\_cache\_mode=%') LOOP
        EXECUTE format('ALTER FUNCTION %s RESET plan_cache_mode', v_function);
    END LOOP;
    GRANT USAGE ON SCHEMA convo_node TO convo_app, convo_reader, convo_admin;
    GRANT EXECUTE ON FUNCTION convo_node.pass_owner(), convo_node.node_keys()
       TO convo_app, convo_reader, convo_admin;
    PERFORM convo_node.route(f, 'p_conversation_id', 'convo.conversations')
       FROM unnest(ARRAY['append_message', 'edit_and_resend', 'regenerate', 'move_head', 'path', 'path_at',
                         'head_at', 'head_history', 'alternatives', 'request_messages', 'request_digest',
                         'set_title', 'archive_conversation', 'unarchive_conversation', 'export_conversation',
                         'begin_generation', 'complete_generation', 'fail_generation', 'cancel_generation',
                         'effect_for_call', 'settle_effect', 'compensate_effect', 'confirm_effect',
                         'decline_effect', 'erase_conversation', 'delete_conversation',
                         'restore_deleted_conversation']) WITH ORDINALITY AS u (f, n)
      ORDER BY n;
    PERFORM convo_node.route('begin_receipt', 'p_owner_id', 'convo.tool_receipts');
    PERFORM convo_node.route(f, NULL, 'convo.tool_receipts')
       FROM unnest(ARRAY['fill_receipt', 'apply_receipt', 'fail_receipt']) WITH ORDINALITY AS u (f, n)
      ORDER BY n;
    PERFORM convo_node.route_create_conversation();
    PERFORM convo_node.route_conversations();
    PERFORM convo_node.route_erase_owner();
    PERFORM convo_node.route_register_tool();
    PERFORM convo_node.route_view_rows();
    PERFORM convo_node.route_expire_receipts();
    PERFORM convo_node.refuse_distributed(f)
       FROM unnest(ARRAY['import_chatgpt', 'import_openwebui', 'import_librechat', 'import_conversation',
                         'import_history', 'self_check', 'erase_due', 'search_conversations',
                         'set_search_config']) WITH ORDINALITY AS u (f, n)
      ORDER BY n;
END;
$$;
