package tests

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgconvo/pgconvo/migrator"
)

// apiFunctions is the contract's function list: all that schema convo holds.
var apiFunctions = []string{
	"alternatives", "append_message", "apply_receipt", "archive_conversation", "args_errors",
	"begin_generation", "begin_receipt", "cancel_generation", "compensate_effect", "complete_generation",
	"confirm_effect", "conversations", "create_conversation", "decline_effect", "delete_conversation",
	"deletion_retention", "edit_and_resend", "effect_for_call", "erase_conversation", "erase_due", "erase_owner",
	"expire_receipts", "export_conversation",
	"fail_generation", "fail_receipt", "fill_receipt", "generation_stale_after", "head_at", "head_history",
	"import_chatgpt", "import_conversation", "import_history", "import_librechat", "import_openwebui",
	"live_updates", "max_detail_bytes", "max_message_bytes", "max_metadata_bytes", "max_part_bytes", "max_ref_length",
	"max_request_bytes", "max_tool_input_bytes", "move_head", "path", "path_at", "regenerate", "register_tool",
	"request_digest", "request_messages", "restore_deleted_conversation", "search_config", "search_conversations",
	"self_check", "set_deletion_retention", "set_live_updates", "set_search_config", "set_title", "settle_effect",
	"unarchive_conversation",
}

// TestSchemaConvoIsTheAPI: \df convo.* lists the contract and nothing else;
// every function that reads or writes a table runs as the owner role with a
// pinned search_path; everything is owned by convo_owner.
func TestSchemaConvoIsTheAPI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	requireSlice(t, "functions of schema convo", queryRowsAs[string](t, db,
		`SELECT proname::text FROM pg_proc WHERE pronamespace = 'convo'::regnamespace ORDER BY 1`), apiFunctions)
	requireSlice(t, "API functions that are not SECURITY DEFINER with search_path pinned", queryRowsAs[string](t, db, `
		SELECT proname::text FROM pg_proc
		 WHERE pronamespace = 'convo'::regnamespace AND proname NOT LIKE 'max\_%' AND proname <> 'generation_stale_after'
		   AND NOT (prosecdef AND proconfig @> '{"search_path=pg_catalog, pg_temp"}')
		 ORDER BY 1`), []string{})
	requireSlice(t, "functions of either schema without a pinned search_path", queryRowsAs[string](t, db, `
		SELECT p.oid::regprocedure::text FROM pg_proc p
		 WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)
		   AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'sql') AND NOT coalesce(p.proconfig @> '{"search_path=pg_catalog, pg_temp"}', false)
		 ORDER BY 1`), []string{})
	requireSlice(t, "objects not owned by convo_owner", queryRowsAs[string](t, db, `
		SELECT oid::regclass::text FROM pg_class
		 WHERE relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND relowner <> 'convo_owner'::regrole
		UNION ALL
		SELECT oid::regprocedure::text FROM pg_proc
		 WHERE pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND proowner <> 'convo_owner'::regrole`),
		[]string{})
	requireSlice(t, "API functions no role may execute", queryRowsAs[string](t, db, `
		SELECT proname::text FROM pg_proc p WHERE pronamespace = 'convo'::regnamespace
		   AND NOT EXISTS (SELECT 1 FROM convo_private.documented_grants() g WHERE g.object_name = p.oid::regprocedure::text)
		 ORDER BY 1`), []string{})
	// A function the owner role creates later is PUBLIC's no more than these.
	mustExec(t, db, `BEGIN; SET LOCAL ROLE convo_owner;
		CREATE FUNCTION convo_private.added_later() RETURNS int LANGUAGE sql RETURN 1; COMMIT`)
	requireEqual(t, "PUBLIC may execute a function added later", queryRow[bool](t, db,
		`SELECT has_function_privilege('public', 'convo_private.added_later()', 'EXECUTE')`), false)
	requireEqual(t, "convo_owner can log in", queryRow[bool](t, db,
		`SELECT rolcanlogin OR rolsuper FROM pg_roles WHERE rolname = 'convo_owner'`), false)
}

// TestAppRoleReachesOnlyTheAPI: a login member of convo_app gets 42501 for
// every direct statement on every table and for anything in the private
// schema; a login role with no pgconvo role reaches nothing (PUBLIC
// executes nothing); the DBA's functions are convo_admin's.
func TestAppRoleReachesOnlyTheAPI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	web := loginAs(t, db, "convo_app")
	nobody := loginAs(t, db)
	before := fingerprint(t, db)

	tables := queryRowsAs[string](t, db, `
		SELECT c.oid::regclass::text || ' ' || a.attname FROM pg_class c
		  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
		 WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind = 'r' ORDER BY 1`)
	if len(tables) < 10 {
		t.Fatalf("found %d tables in convo", len(tables))
	}
	for _, tc := range tables {
		table, column, _ := strings.Cut(tc, " ")
		for _, st := range []string{
			`SELECT count(*) FROM ` + table,
			`INSERT INTO ` + table + ` DEFAULT VALUES`,
			`UPDATE ` + table + ` SET ` + column + ` = ` + column,
			`DELETE FROM ` + table,
			`TRUNCATE ` + table,
		} {
			t.Run(st, func(t *testing.T) {
				requireSQLState(t, asOwner(web, "alice", st), "42501")
			})
		}
	}
	for _, st := range []string{
		`SELECT convo_private.sees_owner('alice')`,
		`SELECT * FROM convo_private.documented_grants()`,
		`SELECT convo_private.log_head_move($1, $2, NULL, 'create', 'alice', NULL)`,
		`SELECT convo.register_tool('buy', true, '{"type": "object"}')`,
		`SELECT convo.expire_receipts()`,
		`SELECT * FROM convo.self_check()`,
	} {
		t.Run("convo_app: "+st, func(t *testing.T) {
			args := []any{}
			if strings.Contains(st, "$1") {
				args = []any{alice.conv, alice.root}
			}
			requireSQLState(t, asOwner(web, "alice", st, args...), "42501")
		})
	}
	for _, st := range []string{
		`SELECT convo.max_ref_length()`,
		`SELECT * FROM convo.path('` + alice.conv + `')`,
		`SELECT * FROM convo.orphaned_applied_effects`,
		`SELECT convo.create_conversation('alice')`,
	} {
		t.Run("no role: "+st, func(t *testing.T) {
			requireSQLState(t, asOwner(nobody, "alice", st), "42501")
		})
	}
	// What convo_app may do, it does.
	if got := queryAsOwner(t, web, "alice", `SELECT count(*)::text FROM convo.path($1)`, alice.conv); got[0] != "3" {
		t.Fatalf("path as convo_app: %v rows, want 3", got)
	}
	requireFingerprint(t, db, "the refused statements", before)
}

// TestOwnersSeeOnlyTheirOwn: with the owner set by SET LOCAL, every API
// function and view answers for that owner only: another owner's
// conversation, message, tool call, effect, generation or receipt is CV002,
// as if it did not exist, and nothing is written; creating for another
// owner is CV011; with no owner set, nothing is visible.
func TestOwnersSeeOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	alice2 := createConversation(t, db, "alice", "A second conversation.")
	bob := buildTenant(t, db, "bob")
	web := loginAs(t, db, "convo_app")
	before := fingerprint(t, db)

	parts := textParts("forged")
	calls := []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"path", `SELECT * FROM convo.path($1)`, []any{bob.conv}, "CV002"},
		{"path_at", `SELECT * FROM convo.path_at($1, clock_timestamp())`, []any{bob.conv}, "CV002"},
		{"head_at", `SELECT convo.head_at($1, clock_timestamp())`, []any{bob.conv}, "CV002"},
		{"head_history", `SELECT * FROM convo.head_history($1)`, []any{bob.conv}, "CV002"},
		{"alternatives", `SELECT * FROM convo.alternatives($1, $2)`, []any{bob.conv, bob.user}, "CV002"},
		{"request_messages", `SELECT convo.request_messages($1)`, []any{bob.conv}, "CV002"},
		{"request_digest", `SELECT convo.request_digest($1, $2, 'anthropic')`, []any{bob.conv, bob.user}, "CV002"},
		{"append_message", `SELECT convo.append_message($1, 'user', $2)`, []any{bob.conv, parts}, "CV002"},
		{"edit_and_resend", `SELECT convo.edit_and_resend($1, $2, $3)`, []any{bob.conv, bob.edited, parts}, "CV002"},
		{"regenerate", `SELECT convo.regenerate($1, $2, $3)`, []any{bob.conv, bob.answer, parts}, "CV002"},
		{"move_head", `SELECT convo.move_head($1, $2)`, []any{bob.conv, bob.root}, "CV002"},
		{"begin_generation", `SELECT convo.begin_generation($1, $2, 'm')`, []any{bob.conv, bob.edited}, "CV002"},
		{"complete_generation", `SELECT convo.complete_generation($1, $2, $3)`, []any{bob.conv, bob.gen,
			textParts("answer")}, "CV002"},
		{"fail_generation", `SELECT convo.fail_generation($1, $2, 'boom')`, []any{bob.conv, bob.gen}, "CV002"},
		{"cancel_generation", `SELECT convo.cancel_generation($1, $2)`, []any{bob.conv, bob.gen}, "CV002"},
		{"effect_for_call", `SELECT * FROM convo.effect_for_call($1, $2)`, []any{bob.conv, bob.callID}, "CV002"},
		{"settle_effect", `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`, []any{bob.conv, bob.awaiting}, "CV002"},
		{"compensate_effect", `SELECT convo.compensate_effect($1, $2, 're_1')`, []any{bob.conv, bob.applied}, "CV002"},
		{"confirm_effect", `SELECT convo.confirm_effect($1, $2, 'alice')`, []any{bob.conv, bob.awaiting}, "CV002"},
		{"decline_effect", `SELECT convo.decline_effect($1, $2, 'alice')`, []any{bob.conv, bob.awaiting}, "CV002"},
		{"fill_receipt", `SELECT * FROM convo.fill_receipt($1, '{"ticket": 2}')`, []any{bob.receipt}, "CV002"},
		{"apply_receipt", `SELECT convo.apply_receipt($1, 'fu_1')`, []any{bob.receipt}, "CV002"},
		{"fail_receipt", `SELECT convo.fail_receipt($1, 500, 'boom')`, []any{bob.receipt}, "CV002"},
		{"create_conversation for bob", `SELECT convo.create_conversation('bob')`, nil, "CV011"},
		{"create_conversation with bob's id", `SELECT convo.create_conversation('alice', p_conversation_id => $1)`,
			[]any{bob.conv}, "CV009"},
		{"begin_receipt for bob", `SELECT * FROM convo.begin_receipt('bob', 'follow-bob-0002', 'file_followup')`, nil, "CV011"},
		// An id of bob's, named in alice's own conversation, is not found
		// there (CV002), not "in another conversation" (CV003): that would
		// say it exists. An id of alice's other conversation is CV003.
		{"bob's message in alice's conversation", `SELECT convo.move_head($1, $2)`, []any{alice.conv, bob.root}, "CV002"},
		{"bob's tool call in alice's conversation", `SELECT * FROM convo.effect_for_call($1, $2)`,
			[]any{alice.conv, bob.callID}, "CV002"},
		{"bob's effect in alice's conversation", `SELECT convo.confirm_effect($1, $2, 'alice')`,
			[]any{alice.conv, bob.awaiting}, "CV002"},
		{"bob's generation in alice's conversation", `SELECT convo.cancel_generation($1, $2)`,
			[]any{alice.conv, bob.gen}, "CV002"},
		{"alice's other conversation's message", `SELECT convo.move_head($1, $2)`,
			[]any{alice.conv, headOf(t, db, alice2)}, "CV003"},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			requireSQLState(t, asOwner(web, "alice", c.sql, c.args...), c.code)
		})
	}
	requireFingerprint(t, db, "the calls across owners", before)

	t.Run("views", func(t *testing.T) {
		mustExec(t, db, `SELECT convo.register_tool('buy', true, $1::jsonb, p_idempotency_scope => 'tool_call',
			p_deadline => '1 millisecond', p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`, effPurchaseSchema)
		for _, n := range []tenant{alice, bob} {
			mustExec(t, db, `SELECT convo.append_message($1, 'assistant', $2)`, n.conv, effToolUses(effBuy(n.owner+"_late", "buy", 1)))
		}
		time.Sleep(10 * time.Millisecond)
		// A generation's start never changes; a superuser steps round the
		// rule to make the streaming ones stale.
		mustExec(t, db, `BEGIN;
			ALTER TABLE convo.generations DISABLE TRIGGER generations_20_transition;
			UPDATE convo.generations SET started_at = started_at - interval '1 hour';
			ALTER TABLE convo.generations ENABLE ALWAYS TRIGGER generations_20_transition;
			COMMIT`)
		views := []string{"orphaned_applied_effects", "stale_pending_effects", "stale_generations"}
		for _, v := range views {
			for owner, want := range map[string][]string{"alice": {alice.conv}, "bob": {bob.conv}, "": nil, "carol": nil} {
				got := queryAsOwner(t, web, owner, `SELECT DISTINCT conversation_id::text FROM convo.`+v)
				if !slices.Equal(got, want) {
					t.Errorf("%s as owner %q: conversations %v, want %v", v, owner, got, want)
				}
			}
		}
	})

	t.Run("no owner set sees nothing", func(t *testing.T) {
		for _, st := range []string{`SELECT * FROM convo.path('` + alice.conv + `')`,
			`SELECT convo.append_message('` + alice.conv + `', 'user', '` + parts + `')`,
			`SELECT * FROM convo.fill_receipt('` + alice.receipt + `', '{"ticket": 1}')`} {
			requireSQLState(t, asOwner(web, "", st), "CV002")
		}
		requireSQLState(t, asOwner(web, "", `SELECT convo.create_conversation('alice')`), "CV011")
		requireSQLState(t, asOwner(web, "", `SELECT convo.create_conversation('')`), "CV011")
	})

	t.Run("the owner's own calls work", func(t *testing.T) {
		if err := asOwner(web, "alice", `SELECT convo.append_message($1, 'user', $2)`, alice.conv, textParts("Thanks!")); err != nil {
			t.Fatal(err)
		}
		if err := asOwner(web, "bob", `SELECT convo.apply_receipt($1, 'fu_1')`, bob.receipt); err != nil {
			t.Fatal(err)
		}
		if err := asOwner(web, "alice", `SELECT convo.create_conversation('alice')`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOwnerIsTransactionLocal: the functions read convo.owner_id as the
// transaction sees it. A plain SET outlives its transaction (behind a
// pooler it reaches the next client, which is why the contract says SET
// LOCAL); a SET LOCAL inside a later transaction wins over it and is gone
// when that transaction ends.
func TestOwnerIsTransactionLocal(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	web := loginAs(t, db, "convo_app")
	ctx := context.Background()
	conn, err := web.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	sees := func(conv string) bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, conv).Scan(&n)
		if err != nil {
			requireSQLState(t, err, "CV002")
			return false
		}
		return true
	}
	requireEqual(t, "sees bob's before any SET", sees(bob.conv), false)
	if _, err := conn.Exec(ctx, `SET convo.owner_id = 'bob'`); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "sees bob's after a plain SET, in a later transaction", sees(bob.conv), true)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, alice.conv).Scan(&n); err != nil {
		t.Fatalf("alice's path under SET LOCAL: %v", err)
	}
	_, err = tx.Exec(ctx, `SELECT count(*) FROM convo.path($1)`, bob.conv)
	requireSQLState(t, err, "CV002")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "sees alice's after the SET LOCAL transaction", sees(alice.conv), false)
	requireEqual(t, "sees bob's again (the plain SET)", sees(bob.conv), true)
	if _, err := conn.Exec(ctx, `RESET convo.owner_id`); err != nil {
		t.Fatal(err)
	}
}

// TestReaderAndAdmin: convo_reader reads every owner (tables, views, read
// functions, self_check) and writes nothing; convo_admin also registers
// tools, runs the sweeps and writes across owners.
func TestReaderAndAdmin(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	reader := loginAs(t, db, "convo_reader")
	admin := loginAs(t, db, "convo_admin")
	before := fingerprint(t, db)

	for _, n := range []tenant{alice, bob} {
		requireEqual(t, "reader: path of "+n.owner, queryAsOwner(t, reader, "", `SELECT count(*)::text FROM convo.path($1)`, n.conv)[0], "3")
	}
	requireEqual(t, "reader: conversations", queryAsOwner(t, reader, "", `SELECT count(*)::text FROM convo.conversations`)[0], "2")
	requireEqual(t, "reader: orphaned effects", queryAsOwner(t, reader, "alice",
		`SELECT count(*)::text FROM convo.orphaned_applied_effects`)[0], "2")
	if got := queryAsOwner(t, reader, "", `SELECT bool_and(ok)::text FROM convo.self_check()`); got[0] != "true" {
		t.Fatalf("self_check as convo_reader: %v", got)
	}
	for _, st := range []string{
		`SELECT convo.append_message('` + alice.conv + `', 'user', '` + textParts("x") + `')`,
		`SELECT convo.register_tool('buy', true, '{}')`,
		`SELECT convo.expire_receipts()`,
		`INSERT INTO convo.conversations (id, owner_id) VALUES (gen_random_uuid(), 'alice')`,
		`SELECT convo_private.sees_owner('alice')`,
	} {
		requireSQLState(t, asOwner(reader, "alice", st), "42501")
	}
	requireFingerprint(t, db, "the reader", before)

	for _, st := range []string{
		`SELECT convo.register_tool('lookup', false, '{"type": "object"}')`,
		`SELECT convo.expire_receipts()`,
		`SELECT convo.append_message('` + bob.conv + `', 'user', '` + textParts("From support.") + `')`,
		`SELECT convo.create_conversation('carol')`,
	} {
		if err := asOwner(admin, "", st); err != nil {
			t.Fatalf("as convo_admin: %s: %v", st, err)
		}
	}
}

// forgery is one attempt to write history outside pgconvo's functions; codes
// lists the SQLSTATEs that refuse it (42501 where the role lacks even the
// table privilege, CV005 where it has it).
type forgery struct {
	name, sql string
	codes     []string
}

// forgeries returns the attacks on history against tenant n of a database
// where a call of an unregistered tool (callUnregistered, in message
// unregisteredMsg) sits on the live path.
func forgeries(n tenant, liveText, unregisteredMsg string) []forgery {
	refused := []string{"CV005", "42501"}
	return []forgery{
		{"a head-log row dated in the past", fmt.Sprintf(`INSERT INTO convo.conversation_head_log
			(conversation_id, head_message_id, previous_head_id, moved_at, moved_by, reason)
			VALUES ('%s', '%s', '%s', '2001-01-01', 'alice', 'create')`, n.conv, n.user, n.root), refused},
		{"an internal helper", fmt.Sprintf(`SELECT convo_private.log_head_move('%s', '%s', NULL, 'create', 'alice', NULL)`,
			n.conv, n.user), []string{"42501"}},
		{"an import's record, to pass rows off as restored", fmt.Sprintf(`INSERT INTO convo.imports
			(conversation_id, id, owner_id, format, imported_by) VALUES ('%s', gen_random_uuid(), '%s', 'pgconvo', 'dba')`,
			n.conv, n.owner), refused},
		{"an effect transition with a forged actor", fmt.Sprintf(`SELECT set_config('convo.effect_actor', 'finance-bot', false);
			UPDATE convo.tool_effects SET state = 'compensated', compensated_by = 're_x', compensated_at = now()
			 WHERE id = '%s'`, n.applied), refused},
		{"an effect event", fmt.Sprintf(`INSERT INTO convo.tool_effect_events
			(conversation_id, effect_id, from_state, to_state, actor, evidence, at)
			VALUES ('%s', '%s', 'applied', 'compensated', 'finance-bot', '{}', '2001-01-01')`, n.conv, n.applied), refused},
		{"a link from the orphaned charge to a text part on the live path", fmt.Sprintf(`INSERT INTO convo.tool_effect_calls
			(conversation_id, tool_call_id, message_id, ordinal, effect_id, decision)
			VALUES ('%s', 'toolu_fake', '%s', 0, '%s', 'reuse')`, n.conv, liveText, n.applied), refused},
		{"a replay decision for an unregistered tool", fmt.Sprintf(`INSERT INTO convo.tool_effect_calls
			(conversation_id, tool_call_id, message_id, ordinal, decision)
			VALUES ('%s', 'toolu_unregistered', '%s', 0, 'replay')`, n.conv, unregisteredMsg), refused},
		{"an effect born pending with a made-up confirmation", fmt.Sprintf(`INSERT INTO convo.tool_effects
			(conversation_id, id, tool_name, tool_version, idempotency_key, scope_key, state, arguments,
			 repeats_effect_id, deadline_at, confirmed_by, confirmed_at)
			VALUES ('%s', gen_random_uuid(), 'buy', 1, 'rerun:x:of:%s', 'tool_call:forged', 'pending', '{}',
			        '%s', now() + interval '1 hour', 'alice', now())`, n.conv, n.applied, n.applied), refused},
		{"a settled effect's arguments, 500 as 500.000", fmt.Sprintf(`UPDATE convo.tool_effects
			SET arguments = '{"amount_minor": 500.000, "currency": "EUR"}' WHERE id = '%s'`, n.applied), refused},
		{"a filled receipt's request and arguments", fmt.Sprintf(`UPDATE convo.tool_receipts
			SET request = '{"ticket": 1.0}', arguments = '{"ticket": 1.0}' WHERE id = '%s'`, n.receipt), refused},
		{"a receipt applied with HTTP 500", fmt.Sprintf(`UPDATE convo.tool_receipts
			SET status = 'applied', http_status = 500, result_ref = 'fu_x', settled_at = now() WHERE id = '%s'`, n.receipt), refused},
		{"a receipt filed applied", fmt.Sprintf(`INSERT INTO convo.tool_receipts
			(id, owner_id, idempotency_key, tool_name, tool_version, request, request_digest, status, http_status,
			 result_ref, arguments, arguments_valid, filled_at, settled_at, deadline_at)
			VALUES (gen_random_uuid(), '%s', 'forged-key-0001', 'file_followup', 1, '{}', 'x', 'applied', 201,
			        'fu_x', '{}', true, now(), now(), now())`, n.owner), refused},
		{"a live-path row naming another branch", fmt.Sprintf(`UPDATE convo.live_path SET branch_id = '%s'
			WHERE conversation_id = '%s' AND min_depth = 0`, n.user, n.conv), refused},
		{"disabling an append-only trigger", `ALTER TABLE convo.messages DISABLE TRIGGER messages_90_append_only`, []string{"42501"}},
		{"disabling every trigger of the head log", `ALTER TABLE convo.conversation_head_log DISABLE TRIGGER ALL`, []string{"42501"}},
		{"an allowlist entry behind register_tool's back", `INSERT INTO convo.tools
			(name, version, effectful, args_schema, idempotency_scope, deadline)
			VALUES ('wire_money', 1, true, '{"type": "object", "x-unchecked": true}', 'tool_call', '1 hour')`, refused},
		{"dropping row-level security", `ALTER TABLE convo.conversations DISABLE ROW LEVEL SECURITY`, []string{"42501"}},
		{"replacing an internal function", `CREATE OR REPLACE FUNCTION convo_private.sees_owner(p_owner_id text)
			RETURNS boolean LANGUAGE sql RETURN true`, []string{"42501"}},
	}
}

// forgeryFixture writes a tenant plus a call of an unregistered tool on the
// live path, and returns the tenant, the id of a text message on the live
// path, and the unregistered call's message.
func forgeryFixture(t testing.TB, db *pgxpool.Pool) (tenant, string, string) {
	t.Helper()
	trustTools(t, db)
	n := buildTenant(t, db, "alice")
	unregistered := appendMsg(t, db, n.conv, "assistant",
		effToolUses(effCall{ID: "toolu_unregistered", Name: "unlisted_tool", Input: map[string]any{}}))
	live := appendMsg(t, db, n.conv, "user", textParts("Is it done?"))
	return n, live, unregistered
}

// TestHistoryCannotBeForged: each attack forgeries lists, tried by a role that
// holds every table privilege (and BYPASSRLS), is refused (CV005, or 42501
// for what only an owner may do), and every table is unchanged.
func TestHistoryCannotBeForged(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	n, live, unregistered := forgeryFixture(t, db)
	grantee := createGrantedRole(t, db)
	mustExec(t, db, `GRANT USAGE ON SCHEMA convo_private TO `+pgx.Identifier{grantee}.Sanitize())
	before := fingerprint(t, db)
	conn := dedicatedConn(t, db)
	if _, err := conn.Exec(context.Background(), `SET ROLE `+pgx.Identifier{grantee}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	for _, f := range forgeries(n, live, unregistered) {
		t.Run(f.name, func(t *testing.T) {
			_, err := conn.Exec(context.Background(), f.sql)
			requireSQLStateIn(t, err, f.codes...)
		})
	}
	requireFingerprint(t, db, "the forgeries", before)

	// The tables' owner may alter them (so the forgeries that need an
	// owner's privilege are not its to refuse), but whichever way a session
	// becomes the owner role, outside an API function its writes are
	// forgeries like anyone's.
	for _, owner := range []struct{ name, setup string }{
		{"owner role by SET ROLE", `SET ROLE convo_owner`},
		{"owner role by SET SESSION AUTHORIZATION", `SET SESSION AUTHORIZATION convo_owner`},
	} {
		t.Run(owner.name, func(t *testing.T) {
			conn := dedicatedConn(t, db)
			if _, err := conn.Exec(context.Background(), owner.setup); err != nil {
				t.Fatal(err)
			}
			for _, f := range forgeries(n, live, unregistered) {
				if slices.Equal(f.codes, []string{"42501"}) {
					continue
				}
				t.Run(f.name, func(t *testing.T) {
					_, err := conn.Exec(context.Background(), f.sql)
					requireSQLStateIn(t, err, f.codes...)
				})
			}
		})
	}
	requireFingerprint(t, db, "the owner role's forgeries", before)

	// A superuser passes the guards, but the state machines still compare
	// what is stored as text: 500 and 500.000 differ.
	t.Run("superuser: settled rows keep their text", func(t *testing.T) {
		_, err := db.Exec(context.Background(), `UPDATE convo.tool_effects
			SET arguments = '{"amount_minor": 500.000, "currency": "EUR"}' WHERE id = $1`, n.applied)
		requireSQLState(t, err, "CV006")
		mustExec(t, db, `SELECT convo.apply_receipt($1, 'fu_1')`, n.receipt)
		_, err = db.Exec(context.Background(), `UPDATE convo.tool_receipts SET request = '{"ticket": 1.0}' WHERE id = $1`, n.receipt)
		requireSQLState(t, err, "CV006")
		_, err = db.Exec(context.Background(), `UPDATE convo.tool_receipts SET arguments = '{"ticket": 1.0}' WHERE id = $1`, n.receipt)
		requireSQLState(t, err, "CV006")
		other := beginReceipt(t, db, "alice", "follow-alice-0009", "file_followup", `{}`).ID
		fillReceipt(t, db, other, `{}`, `{}`)
		_, err = db.Exec(context.Background(), `UPDATE convo.tool_receipts
			SET status = 'applied', http_status = 500, result_ref = 'fu_x', settled_at = now() WHERE id = $1`, other)
		requireSQLState(t, err, "23514")
		_, err = db.Exec(context.Background(), `UPDATE convo.tool_receipts
			SET status = 'failed', http_status = 201, error_code = 'x', settled_at = now() WHERE id = $1`, other)
		requireSQLState(t, err, "23514")
	})
}

// TestMigratingRoleCannotForge: a database migrated by a non-superuser role
// with CREATEROLE (the least a deployment needs) leaves that role owning
// nothing and a member of nothing; every attack above, tried by it, is
// refused; down and up again work with the roles already present.
func TestMigratingRoleCannotForge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super, dbURL := newEmptyDB(t)
	name := "migrator_" + strings.ReplaceAll(newID()[:13], "-", "")
	password := newID()
	dbName := queryStrings(t, super, `SELECT current_database()`)[0]
	for _, st := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEROLE PASSWORD '%s'`, name, password),
		fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, pgx.Identifier{dbName}.Sanitize(), name),
	} {
		if _, err := super.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
	migratorURL := withUser(t, dbURL, name, password)
	m := newMigrator(t, migratorURL)
	if err := m.Up(ctx); err != nil {
		t.Fatalf("migrating as %s: %v", name, err)
	}
	db := newPool(t, dbURL, pgx.QueryExecModeDescribeExec) // the superuser, for the fixture
	t.Cleanup(func() {
		super.Exec(fmt.Sprintf(`ALTER DATABASE %s OWNER TO CURRENT_USER`, pgx.Identifier{dbName}.Sanitize()))
		super.Exec(`DROP OWNED BY ` + name)
		super.Exec(`DROP ROLE ` + name)
	})
	requireEqual(t, "the migrating role is a member of convo_owner", queryRow[bool](t, db,
		`SELECT pg_has_role($1, 'convo_owner', 'MEMBER')`, name), false)
	requireEqual(t, "objects the migrating role owns", queryRow[int64](t, db, `
		SELECT count(*) FROM pg_class WHERE relowner = $1::regrole AND relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace)`,
		name), int64(0))
	requireEqual(t, "self_check", queryRow[bool](t, db, `SELECT bool_and(ok) FROM convo.self_check()`), true)

	n, live, unregistered := forgeryFixture(t, db)
	before := fingerprint(t, db)
	forger := newPool(t, migratorURL, pgx.QueryExecModeDescribeExec)
	for _, f := range forgeries(n, live, unregistered) {
		t.Run(f.name, func(t *testing.T) {
			_, err := forger.Exec(ctx, f.sql)
			requireSQLStateIn(t, err, f.codes...)
		})
	}
	requireFingerprint(t, db, "the migrating role's forgeries", before)
	db.Close() // down drops what the pool's cached plans name
	forger.Close()

	if err := m.Down(ctx, 1); err != nil {
		t.Fatalf("down from 0003 as %s: %v", name, err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("up again as %s, with the roles present: %v", name, err)
	}
	requireEqual(t, "the migrating role is a member of convo_owner after down and up",
		queryStrings(t, super, fmt.Sprintf(`SELECT pg_has_role('%s', 'convo_owner', 'MEMBER')::text`, name))[0], "false")
}

// TestMigratingRoleWithoutCreateRole: a migrating role that may not create
// roles nor act as the owner role is told what to run instead, and 0003
// writes nothing.
func TestMigratingRoleWithoutCreateRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	super, dbURL := newEmptyDB(t)
	name := "plain_" + strings.ReplaceAll(newID()[:13], "-", "")
	password := newID()
	dbName := queryStrings(t, super, `SELECT current_database()`)[0]
	for _, st := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, name, password),
		fmt.Sprintf(`ALTER DATABASE %s OWNER TO %s`, pgx.Identifier{dbName}.Sanitize(), name),
	} {
		if _, err := super.Exec(st); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		super.Exec(fmt.Sprintf(`ALTER DATABASE %s OWNER TO CURRENT_USER`, pgx.Identifier{dbName}.Sanitize()))
		super.Exec(`DROP OWNED BY ` + name)
		super.Exec(`DROP ROLE ` + name)
	})
	m := newMigrator(t, withUser(t, dbURL, name, password))
	if err := m.Goto(ctx, 2); err != nil {
		t.Fatalf("0001 and 0002 need no roles: %v", err)
	}
	err := m.Up(ctx)
	// The roles may exist already (another test migrated first): then the
	// role cannot act as the owner; else it cannot create them. Either way
	// the hint names the grant that would let it.
	if err == nil || !strings.Contains(err.Error(), "hint: ") || !strings.Contains(err.Error(), "GRANT convo_owner TO "+name) {
		t.Fatalf("want the hint to grant convo_owner to %s, got %v", name, err)
	}
	requireEqual(t, "schema convo_private after the refused 0003",
		queryStrings(t, super, `SELECT count(*)::text FROM pg_namespace WHERE nspname = 'convo_private'`)[0], "0")
	requireEqual(t, "owner of convo.messages after the refused 0003",
		queryStrings(t, super, `SELECT tableowner::text FROM pg_tables WHERE schemaname = 'convo' AND tablename = 'messages'`)[0], name)
}

// withUser returns dbURL with another user and password.
func withUser(t testing.TB, dbURL, user, password string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", user, password, cfg.Host, cfg.Port, cfg.Database)
}

// TestSelfCheckFindsEachBreak breaks each invariant self_check verifies, as
// a superuser can, on a database that passes, and requires that check (and
// only that check, or the one other a break must also show) to fail,
// naming the offender.
func TestSelfCheckFindsEachBreak(t *testing.T) {
	t.Parallel()
	// ledgerBreak runs sql as a superuser with one trigger off for it,
	// then on again: what a hand past the API leaves.
	ledgerBreak := func(table, trigger, sql string) string {
		return `ALTER TABLE convo.` + table + ` DISABLE TRIGGER ` + trigger + `; ` + sql +
			`; ALTER TABLE convo.` + table + ` ENABLE ALWAYS TRIGGER ` + trigger
	}
	breaks := []struct {
		check, names, also string
		sql                func(n tenant) string
	}{
		// The trigger off refuses TRUNCATE no more either.
		{"append_only_triggers", "messages_90_append_only", "truncate_refused", func(tenant) string {
			return `ALTER TABLE convo.messages DISABLE TRIGGER messages_90_append_only`
		}},
		{"append_only_triggers", "tool_effects_10_no_forgery enabled=O", "", func(tenant) string {
			return `ALTER TABLE convo.tool_effects ENABLE TRIGGER tool_effects_10_no_forgery` // not ALWAYS: replica skips it
		}},
		{"head_log_trigger", "conversations_20_log_direct", "", func(tenant) string {
			return `ALTER TABLE convo.conversations DISABLE TRIGGER conversations_20_log_direct`
		}},
		{"rule_triggers", "messages_20_guard missing", "", func(tenant) string {
			return `DROP TRIGGER messages_20_guard ON convo.messages`
		}},
		{"no_foreign_triggers", "messages.zz_rewrite", "", func(tenant) string {
			return `CREATE TRIGGER zz_rewrite BEFORE INSERT ON convo.messages FOR EACH ROW
				EXECUTE FUNCTION convo_private.messages_guard()`
		}},
		{"heads_match_log", "last logged", "", func(n tenant) string {
			return fmt.Sprintf(`INSERT INTO convo.conversation_head_log (conversation_id, seq, head_message_id, previous_head_id, reason)
				VALUES ('%[1]s', (SELECT max(seq) + 1 FROM convo.conversation_head_log WHERE conversation_id = '%[1]s'), '%[2]s',
				        (SELECT head_message_id FROM convo.conversations WHERE id = '%[1]s'), 'switch')`, n.conv, n.root)
		}},
		// A superuser in replica mode, which skips foreign keys, with the
		// guard that stands in for them off: alice's head, then a parent,
		// on a message of bob's conversation.
		{"foreign_keys_hold", "convo.conversations (id, head_message_id) = (", "", func(n tenant) string {
			return fmt.Sprintf(`SELECT convo.create_conversation('bob', 'Another owner.');
				SET session_replication_role = replica;
				ALTER TABLE convo.conversations DISABLE TRIGGER conversations_12_head_guard;
				UPDATE convo.conversations SET head_message_id = (SELECT head_message_id FROM convo.conversations WHERE owner_id = 'bob')
				 WHERE id = '%s';
				ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_12_head_guard;
				SET session_replication_role = origin`, n.conv)
		}},
		{"foreign_keys_hold", "convo.messages (conversation_id, parent_id) = (", "", func(n tenant) string {
			return fmt.Sprintf(`SELECT convo.create_conversation('bob', 'Another owner.');
				SET session_replication_role = replica;
				ALTER TABLE convo.messages DISABLE TRIGGER messages_20_guard;
				INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
				SELECT '%s', gen_random_uuid(), c.head_message_id, 'user', '[{"type": "text", "text": "grafted"}]', 1, 1, c.head_message_id
				  FROM convo.conversations c WHERE c.owner_id = 'bob';
				ALTER TABLE convo.messages ENABLE ALWAYS TRIGGER messages_20_guard;
				SET session_replication_role = origin`, n.conv)
		}},
		{"views_security_barrier", "stale_generations", "", func(tenant) string {
			return `ALTER VIEW convo.stale_generations RESET (security_barrier)`
		}},
		// A barrier view reading a table itself: EXPLAIN ANALYZE would count
		// every owner's rows below its owner filter.
		{"views_security_barrier", "stale_generations (security_barrier reading a table itself)", "", func(tenant) string {
			return `CREATE OR REPLACE VIEW convo.stale_generations WITH (security_barrier = true) AS
				SELECT g.conversation_id, g.id AS generation_id, g.model, g.prompt_message_id, g.started_at
				  FROM convo.generations g JOIN convo.conversations c ON c.id = g.conversation_id
				 WHERE c.owner_id = current_setting('convo.owner_id', true)`
		}},
		// A SECURITY DEFINER function whose plans a session with
		// debug_print_plan on would be sent.
		{"definer_settings", "convo.path(uuid) lacks debug_print_plan=off", "", func(tenant) string {
			return `ALTER FUNCTION convo.path(uuid) RESET debug_print_plan`
		}},
		// The live path's guard as it was: INSERT, UPDATE and DELETE only.
		{"truncate_refused", "no trigger refuses TRUNCATE on live_path", "", func(tenant) string {
			return `CREATE OR REPLACE TRIGGER live_path_10_no_forgery BEFORE INSERT OR UPDATE OR DELETE ON convo.live_path
				FOR EACH STATEMENT EXECUTE FUNCTION convo_private.refuse_forgery();
				ALTER TABLE convo.live_path ENABLE ALWAYS TRIGGER live_path_10_no_forgery`
		}},
		{"live_path_index", "live_path rows differ", "", func(n tenant) string {
			return fmt.Sprintf(`UPDATE convo.live_path SET max_depth = max_depth + 1 WHERE conversation_id = '%s' AND min_depth = 0`, n.conv)
		}},
		{"effects_linked", "creating calls", "ledger_as_written", func(n tenant) string {
			return fmt.Sprintf(`INSERT INTO convo.tool_effect_calls (conversation_id, tool_call_id, message_id, ordinal, effect_id, decision,
				                                  tool_name, tool_version, branch_id, depth)
				SELECT p.conversation_id, p.tool_call_id, p.message_id, p.ordinal, '%s', 'execute', 'buy', 1, m.branch_id, m.depth
				  FROM convo.message_parts p JOIN convo.messages m ON m.conversation_id = p.conversation_id AND m.id = p.message_id
				 WHERE p.conversation_id = '%s' AND p.tool_call_id = 'toolu_unregistered'`, n.applied, n.conv)
		}},
		// The ledger as the API writes it: an effectful call answered
		// replay, an amount its arguments do not say, a link across scopes.
		{"ledger_as_written", "decision replay for unlisted_tool version 1, which is effectful", "", func(n tenant) string {
			return fmt.Sprintf(`SELECT convo.register_tool('unlisted_tool', true, '{}');
				INSERT INTO convo.tool_effect_calls (conversation_id, tool_call_id, message_id, ordinal, decision, fork_point_id,
				                                     tool_name, tool_version, branch_id, depth)
				SELECT p.conversation_id, p.tool_call_id, p.message_id, p.ordinal, 'replay',
				       convo_private.fork_point_of(p.conversation_id, p.message_id), 'unlisted_tool', 1, m.branch_id, m.depth
				  FROM convo.message_parts p JOIN convo.messages m ON m.conversation_id = p.conversation_id AND m.id = p.message_id
				 WHERE p.conversation_id = '%s' AND p.tool_call_id = 'toolu_unregistered'`, n.conv)
		}},
		{"ledger_as_written", "amount 1 EUR, its arguments say 500 EUR", "", func(n tenant) string {
			return ledgerBreak("tool_effects", "tool_effects_20_transition", fmt.Sprintf(`UPDATE convo.tool_effects SET amount_minor = 1 WHERE id = '%s'`, n.applied))
		}},
		{"ledger_as_written", "reuses effect", "", func(n tenant) string {
			// A new call of 1 EUR, its own decision rewritten into a link
			// to the 500 EUR charge, the effect it had made taken away.
			return fmt.Sprintf(`SELECT convo.append_message('%s', 'assistant',
				'[{"type": "tool_use", "id": "toolu_linked", "name": "buy", "input": {"amount_minor": 1, "currency": "EUR"}}]');
				DO $$
				DECLARE
				    v_made uuid := (SELECT effect_id FROM convo.tool_effect_calls WHERE tool_call_id = 'toolu_linked');
				BEGIN
				    ALTER TABLE convo.tool_effect_calls DISABLE TRIGGER tool_effect_calls_90_append_only;
				    ALTER TABLE convo.tool_effect_events DISABLE TRIGGER tool_effect_events_90_append_only;
				    ALTER TABLE convo.tool_effects DISABLE TRIGGER tool_effects_90_no_delete;
				    UPDATE convo.tool_effect_calls SET decision = 'reuse', effect_id = '%s' WHERE tool_call_id = 'toolu_linked';
				    DELETE FROM convo.tool_effect_events WHERE effect_id = v_made;
				    DELETE FROM convo.tool_effects WHERE id = v_made;
				    ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only;
				    ALTER TABLE convo.tool_effect_events ENABLE ALWAYS TRIGGER tool_effect_events_90_append_only;
				    ALTER TABLE convo.tool_effects ENABLE ALWAYS TRIGGER tool_effects_90_no_delete;
				END;
				$$`, n.conv, n.applied)
		}},
		{"ledger_as_written", "is placed on branch", "", func(n tenant) string {
			// A call moved one message down its branch: the re-run lookup
			// would take it for a call off the path it is on.
			return `DO $$
				BEGIN
				    ALTER TABLE convo.tool_effect_calls DISABLE TRIGGER tool_effect_calls_90_append_only;
				    UPDATE convo.tool_effect_calls SET depth = depth + 1
				     WHERE tool_call_id = (SELECT min(tool_call_id) FROM convo.tool_effect_calls WHERE decision = 'execute');
				    ALTER TABLE convo.tool_effect_calls ENABLE ALWAYS TRIGGER tool_effect_calls_90_append_only;
				END;
				$$`
		}},
		{"effect_states_consistent", "its events end at compensated", "", func(n tenant) string {
			return fmt.Sprintf(`INSERT INTO convo.tool_effect_events (conversation_id, seq, effect_id, from_state, to_state)
				VALUES ('%[1]s', (SELECT max(seq) + 1 FROM convo.tool_effect_events WHERE conversation_id = '%[1]s'), '%[2]s',
				        'applied', 'compensated')`, n.conv, n.applied)
		}},
		{"row_level_security", "tool_receipts", "", func(tenant) string {
			return `ALTER TABLE convo.tool_receipts DISABLE ROW LEVEL SECURITY`
		}},
		{"row_level_security", "conversation_changes", "", func(tenant) string {
			return `ALTER TABLE convo.conversation_changes DISABLE ROW LEVEL SECURITY`
		}},
		{"privileges", "extra: SELECT on convo.messages to convo_app", "", func(tenant) string {
			return `GRANT SELECT ON convo.messages TO convo_app`
		}},
		{"privileges", "extra: EXECUTE on convo_private.lock_conversation(uuid) to PUBLIC", "", func(tenant) string {
			return `GRANT EXECUTE ON FUNCTION convo_private.lock_conversation(uuid) TO PUBLIC`
		}},
		{"privileges", "missing: EXECUTE on convo.path(uuid) to convo_app", "", func(tenant) string {
			return `REVOKE EXECUTE ON FUNCTION convo.path(uuid) FROM convo_app`
		}},
		{"ownership", "function convo.path(uuid) owned by", "", func(tenant) string {
			return `ALTER FUNCTION convo.path(uuid) OWNER TO CURRENT_USER`
		}},
	}
	// One database: each break is made in a transaction that is rolled
	// back after self_check has read it (DDL too is transactional).
	db := newDB(t)
	n, _, _ := forgeryFixture(t, db)
	requireEqual(t, "failing checks before the breaks", failingChecks(t, db), "")
	for _, b := range breaks {
		t.Run(b.check+": "+b.names, func(t *testing.T) {
			ctx := context.Background()
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, b.sql(n)); err != nil {
				t.Fatalf("the break: %v", err)
			}
			var got string
			if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(check_name || ': ' || detail, E'\n' ORDER BY check_name), '')
			                              FROM convo.self_check() WHERE NOT ok`).Scan(&got); err != nil {
				t.Fatalf("self_check after the break: %v", err)
			}
			lines := strings.Split(got, "\n")
			var checks []string
			for _, l := range lines {
				checks = append(checks, strings.SplitN(l, ": ", 2)[0])
			}
			want := []string{b.check}
			if b.also != "" {
				want = append(want, b.also)
				sort.Strings(want)
			}
			if !slices.Equal(checks, want) || !strings.Contains(got, b.names) {
				t.Fatalf("after the break, failing checks:\n%s\nwant %v, naming %q", got, want, b.names)
			}
		})
	}
	requireEqual(t, "failing checks after the breaks, rolled back", failingChecks(t, db), "")
}

// TestVerify: migrator.Verify (what `migrate verify` prints) passes on a
// sound database and, once a check is broken, returns every row and an
// error naming the failing check.
func TestVerify(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	checks, err := migrator.Verify(context.Background(), db)
	if err != nil || len(checks) < 16 {
		t.Fatalf("verify on a fresh database: %d checks, %v", len(checks), err)
	}
	mustExec(t, pool, `ALTER TABLE convo.conversation_head_log DISABLE TRIGGER conversation_head_log_10_no_forgery`)
	checks, err = migrator.Verify(context.Background(), db)
	if err == nil || !strings.Contains(err.Error(), "1 of 16 checks failed: [append_only_triggers]") || len(checks) != 16 {
		t.Fatalf("verify after disabling a trigger: %d checks, %v", len(checks), err)
	}
}

// TestSecondDatabaseOnTheSameServer: the roles are cluster-wide, so a
// second database migrates with them already there, and taking one
// database all the way down leaves the other whole.
func TestSecondDatabaseOnTheSameServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var dbs []*sql.DB
	var ms []*migrator.Migrator
	for i := 0; i < 2; i++ {
		db, dbURL := newEmptyDB(t)
		m := newMigrator(t, dbURL)
		if err := m.Up(ctx); err != nil {
			t.Fatalf("database %d: %v", i+1, err)
		}
		dbs, ms = append(dbs, db), append(ms, m)
	}
	if err := ms[0].Down(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Verify(ctx, dbs[1]); err != nil {
		t.Fatalf("the second database after the first went down: %v", err)
	}
	if err := ms[0].Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Verify(ctx, dbs[0]); err != nil {
		t.Fatalf("the first database up again: %v", err)
	}
}

// TestSelfCheckFindsALoginOwner: a login role made a member of convo_owner
// (directly or through another role) fails the ownership check. Roles are
// cluster-wide, so the grant stays inside a transaction that is rolled back:
// no other test's database ever sees it.
func TestSelfCheckFindsALoginOwner(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, st := range []string{
		`CREATE ROLE pgconvo_test_middle NOLOGIN`,
		`CREATE ROLE pgconvo_test_login LOGIN IN ROLE pgconvo_test_middle`,
		`GRANT convo_owner TO pgconvo_test_middle`,
	} {
		if _, err := tx.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	var detail string
	if err := tx.QueryRow(ctx, `SELECT detail FROM convo.self_check() WHERE check_name = 'ownership' AND NOT ok`).Scan(&detail); err != nil {
		t.Fatalf("the ownership check did not fail: %v", err)
	}
	requireEqual(t, "ownership detail", detail, "login role pgconvo_test_login is a member of convo_owner")
}
