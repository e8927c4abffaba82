package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// boundaryCheck holds data tests for one migration, run by
// TestMigrationBoundaries around the step from version N-1 to N, the way
// River tests its migrations. Every field is optional.
type boundaryCheck struct {
	// before runs at version N-1, just before migrating up to N: insert the
	// data the migration must carry over.
	before func(t *testing.T, db *pgxpool.Pool)
	// after runs at version N, right after migrating up: assert the data
	// came through and the new objects work.
	after func(t *testing.T, db *pgxpool.Pool)
	// down runs at version N-1 again, after migrating back down: assert the
	// down migration kept or removed what it should.
	down func(t *testing.T, db *pgxpool.Pool)
}

// boundaryChecks maps a migration version to its data tests.
var boundaryChecks = map[uint]boundaryCheck{
	1: {
		after: func(t *testing.T, db *pgxpool.Pool) {
			id := queryRow[string](t, db, `SELECT convo.create_conversation('owner-1', 'You are helpful.')::text`)
			requireCount(t, db, 1, `SELECT count(*) FROM convo.path($1::uuid)`, id)
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 0, `SELECT count(*) FROM pg_namespace WHERE nspname = 'convo'`)
		},
	},
	// 0002 adds the ledger beside a tree that may already hold tool calls:
	// those calls were never checked against an allowlist, so they get no
	// go-ahead (CV007) even once the tool is registered; new calls do. Going
	// down drops the ledger and keeps the conversation.
	2: {
		before: func(t *testing.T, db *pgxpool.Pool) {
			mustExec(t, db, `SELECT convo.create_conversation('owner-2', 'You sell credits.', '{}', 'c0000000-0000-4000-8000-0000000000f2')`)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-0000000000f2', 'user', '[{"type":"text","text":"Buy 500 credits"}]')`)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-0000000000f2', 'assistant',
				'[{"type":"tool_use","id":"toolu_old","name":"purchase_credits","input":{"amount_minor":500}}]')`)
		},
		after: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 3, `SELECT count(*) FROM convo.path('c0000000-0000-4000-8000-0000000000f2')`)
			requireCount(t, db, 0, `SELECT count(*) FROM convo.tool_effects`)
			mustExec(t, db, `SELECT convo.register_tool('purchase_credits', true, '{"type":"object"}')`)
			_, err := db.Exec(context.Background(), `SELECT * FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000f2', 'toolu_old')`)
			requireSQLState(t, err, "CV007")
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-0000000000f2', 'assistant',
				'[{"type":"tool_use","id":"toolu_new","name":"purchase_credits","input":{"amount_minor":500}}]')`)
			if got := queryRow[string](t, db, `SELECT decision FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000f2', 'toolu_new')`); got != "execute" {
				t.Fatalf("decision for a call after 0002 = %q, want execute", got)
			}
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 4, `SELECT count(*) FROM convo.path('c0000000-0000-4000-8000-0000000000f2')`)
			requireCount(t, db, 0, `SELECT count(*) FROM pg_tables WHERE schemaname = 'convo'
				AND tablename IN ('tools', 'tool_effects', 'tool_effect_calls', 'tool_effect_events', 'tool_receipts', 'generations')`)
		},
	},
	// 0003 hands everything to the owner role and the machinery to
	// convo_private: the data of 0002 comes through, readable by convo_app
	// only for its owner; going down gives the objects back to the
	// migrating role, in schema convo, executable by PUBLIC again.
	3: {
		before: func(t *testing.T, db *pgxpool.Pool) {
			mustExec(t, db, `SELECT convo.create_conversation('owner-3', 'You sell credits.', '{}', 'c0000000-0000-4000-8000-0000000000f3')`)
			mustExec(t, db, `SELECT convo.register_tool('buy', true, '{"type": "object"}')`)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-0000000000f3', 'assistant',
				'[{"type":"tool_use","id":"toolu_3","name":"buy","input":{"amount_minor":500}}]')`)
		},
		after: func(t *testing.T, db *pgxpool.Pool) {
			requireEqual(t, "self_check", queryRow[bool](t, db, `SELECT bool_and(ok) FROM convo.self_check()`), true)
			web := loginAs(t, db, "convo_app")
			requireSlice(t, "path as convo_app for owner-3", queryAsOwner(t, web, "owner-3",
				`SELECT role FROM convo.path('c0000000-0000-4000-8000-0000000000f3')`), []string{"system", "assistant"})
			requireSQLState(t, asOwner(web, "owner-4", `SELECT * FROM convo.path('c0000000-0000-4000-8000-0000000000f3')`), "CV002")
			requireSlice(t, "decision as convo_app", queryAsOwner(t, web, "owner-3",
				`SELECT decision FROM convo.effect_for_call('c0000000-0000-4000-8000-0000000000f3', 'toolu_3')`), []string{"execute"})
			web.Close()
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 0, `SELECT count(*) FROM pg_namespace WHERE nspname = 'convo_private'`)
			requireCount(t, db, 0, `SELECT count(*) FROM pg_class WHERE relnamespace = 'convo'::regnamespace
				AND (relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user) OR relrowsecurity)`)
			requireCount(t, db, 2, `SELECT count(*) FROM convo.path('c0000000-0000-4000-8000-0000000000f3')`)
			requireCount(t, db, 1, `SELECT count(*) FROM pg_proc WHERE proname = 'lock_conversation' AND pronamespace = 'convo'::regnamespace
				AND has_function_privilege('public', oid, 'EXECUTE')`)
		},
	},
	// 0004 lets a schema be true or false (the registry's CHECK with it):
	// tools registered before keep validating as they did, a boolean schema
	// registers, and a deep input is rejected instead of failing the append.
	// Going down restores the object-only CHECK (with no boolean schema
	// registered; see TestMigration0004DownWithBooleanSchemas).
	4: {
		before: func(t *testing.T, db *pgxpool.Pool) {
			mustExec(t, db, `SELECT convo.create_conversation('owner-4', 'You sell credits.', '{}', 'c0000000-0000-4000-8000-0000000000f4')`)
			mustExec(t, db, `SELECT convo.register_tool('buy', true, '{"type": "object", "required": ["amount_minor"]}')`)
		},
		after: func(t *testing.T, db *pgxpool.Pool) {
			requireEqual(t, "self_check", queryRow[bool](t, db, `SELECT bool_and(ok) FROM convo.self_check()`), true)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-0000000000f4', 'assistant',
				'[{"type":"tool_use","id":"toolu_4a","name":"buy","input":{"amount_minor":500}},
				  {"type":"tool_use","id":"toolu_4b","name":"buy","input":{}},
				  {"type":"tool_use","id":"toolu_4c","name":"buy","input":`+nestedObjects(100, "1")+`}]')`)
			requireSlice(t, "decisions", queryRowsAs[string](t, db, `SELECT decision FROM convo.tool_effect_calls
				WHERE conversation_id = 'c0000000-0000-4000-8000-0000000000f4' ORDER BY tool_call_id`),
				[]string{"execute", "rejected", "rejected"})
			ctx := context.Background()
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			var version int
			if err := tx.QueryRow(ctx, `SELECT convo.register_tool('anything', true, 'true')`).Scan(&version); err != nil {
				t.Fatalf("registering a true schema after 0004: %v", err)
			}
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 1, `SELECT count(*) FROM pg_constraint WHERE conname = 'tools_args_schema_check'
				AND pg_get_constraintdef(oid) LIKE '%= ''object''%'`)
			_, err := db.Exec(context.Background(), `SELECT convo.register_tool('anything', true, 'true')`)
			requireSQLState(t, err, "CV011")
			requireCount(t, db, 3, `SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = 'c0000000-0000-4000-8000-0000000000f4'`)
		},
	},
	// 0021 keys every digest of content with a secret of the database. A
	// charge settled before it is still found by a re-run of the same call
	// after it (reuse, under the key that was sent), a pending effect keeps
	// the key that may have been sent, an effect awaiting confirmation (not
	// sent) is confirmed as before, and a receipt's repeat is still a
	// repeat. Going down keeps every row.
	21: {
		before: func(t *testing.T, db *pgxpool.Pool) {
			effRegisterPurchase(t, db, "buy", "fork_args", "1 hour")
			registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
			mustExec(t, db, `SELECT convo.create_conversation('owner-21', 'You sell credits.', '{}', 'c0000000-0000-4000-8000-000000000021')`)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-000000000021', 'user', $1,
				p_message_id => 'a0000000-0000-4000-8000-000000000021')`, textParts("Buy 500 credits."))
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-000000000021', 'assistant', $1)`,
				effToolUses(effBuy("call_settled", "buy", 500), effBuy("call_pending", "buy", 700)))
			effSettle(t, db, "c0000000-0000-4000-8000-000000000021", effForCall(t, db, "c0000000-0000-4000-8000-000000000021", "call_settled").EffectID, "ch_21")
			mustExec(t, db, `SELECT convo.edit_and_resend('c0000000-0000-4000-8000-000000000021', 'a0000000-0000-4000-8000-000000000021', $1)`,
				textParts("Buy 900 credits."))
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-000000000021', 'assistant', $1)`,
				effToolUses(effBuy("call_awaiting", "buy", 900)))
			beginReceipt(t, db, "owner-21", "follow-21-0001", "file_followup", `{"ticket": 21}`)
			mustExec(t, db, `CREATE TABLE public.keys_before_21 AS SELECT tool_call_id, effect_id, idempotency_key, state
				FROM convo.effect_for_call('c0000000-0000-4000-8000-000000000021', 'call_settled')
				     CROSS JOIN (VALUES ('call_settled')) v (tool_call_id)
				UNION ALL SELECT 'call_pending', effect_id, idempotency_key, state
				FROM convo.effect_for_call('c0000000-0000-4000-8000-000000000021', 'call_pending')`)
		},
		after: func(t *testing.T, db *pgxpool.Pool) {
			const conv = "c0000000-0000-4000-8000-000000000021"
			settled := queryRow[string](t, db, `SELECT effect_id::text || ' ' || idempotency_key FROM public.keys_before_21 WHERE tool_call_id = 'call_settled'`)
			pending := queryRow[string](t, db, `SELECT effect_id::text || ' ' || idempotency_key FROM public.keys_before_21 WHERE tool_call_id = 'call_pending'`)
			requireEqual(t, "the pending effect's key", queryRow[string](t, db, `SELECT effect_id::text || ' ' || idempotency_key
				FROM convo.effect_for_call($1, 'call_pending')`, conv), pending)
			// A re-run of the settled call on a branch of its own: the same fork point, tool and arguments.
			mustExec(t, db, `SELECT convo.regenerate($1, (SELECT message_id FROM convo.tool_effect_calls
				WHERE conversation_id = $1 AND tool_call_id = 'call_settled'), $2)`,
				conv, effToolUses(effBuy("call_rerun", "buy", 500)))
			rerun := effForCall(t, db, conv, "call_rerun")
			requireEqual(t, "the re-run after 0021", rerun.Decision+" "+rerun.EffectID+" "+rerun.Key, "reuse "+settled)
			awaiting := effForCall(t, db, conv, "call_awaiting")
			requireEqual(t, "the effect awaiting confirmation", awaiting.State, "awaiting_confirmation")
			effConfirm(t, db, conv, awaiting.EffectID, "ops")
			requireEqual(t, "confirmed", effForCall(t, db, conv, "call_awaiting").State, "pending")
			r := beginReceipt(t, db, "owner-21", "follow-21-0001", "file_followup", `{"ticket": 21}`)
			requireEqual(t, "the receipt's repeat", r.Created, false)
			requireSlice(t, "failed self_check checks", queryRowsAs[string](t, db,
				`SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok`), []string{})
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 3, `SELECT count(*) FROM convo.tool_effects`)
			requireCount(t, db, 1, `SELECT count(*) FROM convo.tool_receipts`)
			requireCount(t, db, 0, `SELECT count(*) FROM pg_tables WHERE schemaname = 'convo_private' AND tablename = 'digest_key'`)
		},
	},
	// 0022 records imports and derives imported ids by a rule no two owners
	// share. A conversation imported before it, under the old rule, is
	// recorded from its metadata and its messages name that record; the
	// same source again is found by owner, format and source key (not by
	// recomputing the id) and returns the old id, writing nothing. Each
	// call names its tool version. Going down drops the record (the CLI's
	// data-loss check would ask for -force-data-loss) and keeps the rest.
	22: {
		before: func(t *testing.T, db *pgxpool.Pool) {
			registerTestTool(t, db, "lookup", false, `{"type": "object"}`)
			mustExec(t, db, `SELECT convo.import_chatgpt('acme', $1::jsonb)`, tinyChatGPT("42:foo", "Hi."))
			mustExec(t, db, `SELECT convo.create_conversation('owner-22', NULL, '{}', 'c0000000-0000-4000-8000-000000000022')`)
			mustExec(t, db, `SELECT convo.append_message('c0000000-0000-4000-8000-000000000022', 'assistant',
				'[{"type": "tool_use", "id": "call_look", "name": "lookup", "input": {}}]')`)
		},
		after: func(t *testing.T, db *pgxpool.Pool) {
			old := derivedID("chatgpt:acme:42:foo")
			requireEqual(t, "the record of the import made before", queryRow[string](t, db,
				`SELECT format || ' ' || source_key FROM convo.imports WHERE conversation_id = $1`, old), "chatgpt 42:foo")
			requireCount(t, db, 0, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1 AND import_id IS NULL`, old)
			before := fingerprint(t, db)
			requireEqual(t, "the same source again", queryRow[string](t, db, `SELECT convo.import_chatgpt('acme', $1::jsonb)::text`,
				tinyChatGPT("42:foo", "Hi.")), old)
			requireFingerprint(t, db, "the repeat", before)
			requireEqual(t, "the replayed call's tool version", queryRow[string](t, db, `SELECT tool_name || ' ' || tool_version
				FROM convo.tool_effect_calls WHERE tool_call_id = 'call_look'`), "lookup 1")
			requireEqual(t, "failing checks", failingChecks(t, db), "")
		},
		down: func(t *testing.T, db *pgxpool.Pool) {
			requireCount(t, db, 2, `SELECT count(*) FROM convo.conversations`)
			requireCount(t, db, 0, `SELECT count(*) FROM pg_tables WHERE schemaname = 'convo' AND tablename = 'imports'`)
		},
	},
}

// TestMigration0004DownWithBooleanSchemas: a tool registered with a
// boolean schema is frozen and the old CHECK cannot hold it, so going below
// 0004 is refused with a message naming the tools, and the database stays
// as it was (the down runs in one transaction).
func TestMigration0004DownWithBooleanSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	if err := m.Goto(ctx, 4); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	mustExec(t, pool, `SELECT convo.register_tool('anything', true, 'true')`)
	mustExec(t, pool, `SELECT convo.register_tool('nothing', true, 'false')`)
	err := m.Goto(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), "cannot reverse 0004_schema_suite") || !strings.Contains(err.Error(), "anything v1, nothing v1") {
		t.Fatalf("going below 0004 with boolean schemas: want the refusal naming the tools, got %v", err)
	}
	requireCount(t, pool, 2, `SELECT count(*) FROM convo.tools WHERE jsonb_typeof(args_schema) = 'boolean'`)
	requireCount(t, pool, 1, `SELECT count(*) FROM pg_constraint WHERE conname = 'tools_args_schema_check'
		AND pg_get_constraintdef(oid) LIKE '%''boolean''%'`)
}

// TestMigrationSetIsWellFormed checks the embedded migrations in plain Go:
// numbered from 1 without gaps, no version twice, an up and a down for each.
func TestMigrationSetIsWellFormed(t *testing.T) {
	t.Parallel()
	if err := migrator.Check(pgconvosql.Migrations); err != nil {
		t.Fatal(err)
	}
}

// TestUpDownUpLeavesSameSchema migrates up, all the way down, and up again,
// and requires the second schema to match the first exactly and the bottom
// to hold nothing of ours.
func TestUpDownUpLeavesSameSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	bare := snapshotSchema(t, db, "public")

	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	first := snapshotPackage(t, db)

	if err := m.Down(ctx, 0); err != nil {
		t.Fatal(err)
	}
	requireNoConvoSchema(t, db)
	if diff := diffSnapshots(bare, snapshotSchema(t, db, "public")); diff != "" {
		t.Fatalf("down to zero left objects in schema public (other than schema_migrations):\n%s", diff)
	}
	requireOnlyExtensions(t, db, "plpgsql")
	if left := queryStrings(t, db, `
		SELECT 'default privileges of ' || pg_get_userbyid(defaclrole) FROM pg_default_acl
		UNION ALL
		SELECT 'database privilege ' || a.privilege_type || ' of convo_owner'
		  FROM pg_database d, aclexplode(d.datacl) a
		 WHERE d.datname = current_database() AND a.grantee = 'convo_owner'::regrole`); len(left) != 0 {
		t.Fatalf("down to zero left privileges behind: %v", left)
	}

	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := diffSnapshots(first, snapshotPackage(t, db)); diff != "" {
		t.Fatalf("up, down, up gave a different schema than up:\n%s", diff)
	}
}

// TestObjectFilesMatchMigrations is the drift test: after migrating to the
// latest version, re-applying every object file (sql/DOMAIN/api, private,
// views and triggers) and creating the triggers of package_triggers again
// must change nothing, every function and view of the package must have a
// file named after it (a trigger a file or a row of the list), and every
// file and row must name an object that exists.
func TestObjectFilesMatchMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newDB(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })

	for _, kind := range objectKinds {
		files := objectFiles(t, kind.dir)
		objects := map[string]bool{}
		for _, name := range queryStrings(t, db, kind.namesQuery) {
			objects[name] = true
			if _, ok := files[name]; !ok {
				t.Errorf("%s convo.%s has no object file %s", kind.noun, name, filepath.Join(kind.dir, name+".sql"))
			}
		}
		for name, path := range files {
			if !objects[name] {
				t.Errorf("%s names %s convo.%s, which the migrations do not create", path, kind.noun, name)
			}
		}
	}

	before := snapshotPackage(t, db)
	for _, kind := range objectKinds {
		files := objectFiles(t, kind.dir)
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			body, err := os.ReadFile(files[name])
			if err != nil {
				t.Fatal(err)
			}
			// One simple-protocol Exec runs the whole file, as psql -f would.
			if _, err := pool.Exec(ctx, string(body), pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("re-applying %s: %v", files[name], err)
			}
		}
	}
	// And the triggers created again from the list.
	if _, err := pool.Exec(ctx, `SELECT convo_private.create_triggers()`); err != nil {
		t.Fatal(err)
	}
	listed := queryStrings(t, db, `SELECT trigger_name FROM convo_private.package_triggers()
		EXCEPT SELECT tg.tgname FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
		 WHERE c.relnamespace = 'convo'::regnamespace`)
	if len(listed) > 0 {
		t.Errorf("package_triggers lists triggers the migrations do not create: %v", listed)
	}
	if diff := diffSnapshots(before, snapshotPackage(t, db)); diff != "" {
		t.Fatalf("the object files differ from what the migrations define "+
			"(write a migration that brings the schema to the files, or fix the files):\n%s", diff)
	}
}

// objectKinds lists the object directories in the order they are applied,
// each with a query for the names of the objects of that kind in convo.
var objectKinds = []struct {
	dir, noun, namesQuery string
}{
	{"../sql/*/api", "function", `
		SELECT DISTINCT p.proname FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'convo'`},
	{"../sql/*/private", "private function", `
		SELECT DISTINCT p.proname FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'convo_private'`},
	// The package's own triggers come from one list (package_triggers);
	// a trigger outside it has a file.
	{"../sql/*/triggers", "trigger", `
		SELECT DISTINCT tg.tgname FROM pg_trigger tg
		JOIN pg_class c ON c.oid = tg.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'convo' AND NOT tg.tgisinternal
		  AND tg.tgname NOT IN (SELECT trigger_name FROM convo_private.package_triggers())`},
	{"../sql/*/views", "view", `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'convo' AND c.relkind IN ('v', 'm')`},
}

// objectFiles maps object name to path for the .sql files of the folders
// dir matches (one kind, in every domain); a name in two folders is a
// failure.
func objectFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	paths, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".sql")
		if other, ok := files[name]; ok {
			t.Fatalf("%s and %s define the same object", other, p)
		}
		files[name] = p
	}
	return files
}

// TestMigrationBoundaries steps over every version boundary with data in
// the database: from N-1 up to N, down to N-1 and up to N again, running
// the boundaryChecks hooks for N on the way. One database walks up through
// every version, so the whole run applies each migration a few times, not
// every version's predecessors again: a boundary without hooks is crossed
// on it; one with hooks on a copy of it made at N-1 (CREATE DATABASE ...
// TEMPLATE), so that the hooks' rows stay out of the later boundaries.
func TestMigrationBoundaries(t *testing.T) {
	t.Parallel()
	latest, err := migrator.Latest()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, walkURL := newEmptyDB(t)
	admin := newPool(t, adminURL(), pgx.QueryExecModeDescribeExec)
	for v := uint(1); v <= latest; v++ {
		check := boundaryChecks[v]
		dbURL := walkURL
		if check.before != nil || check.after != nil || check.down != nil {
			dbURL = copyDatabase(t, admin, walkURL, fmt.Sprintf("v%d", v-1))
		}
		ok := t.Run(fmt.Sprintf("version_%d", v), func(t *testing.T) {
			m := newMigrator(t, dbURL)
			pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
			step := func(what string, to uint) {
				t.Helper()
				if err := m.Goto(ctx, to); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				requireVersion(t, m, to)
			}
			requireVersion(t, m, v-1)
			if check.before != nil {
				check.before(t, pool)
			}
			step("migrating up", v)
			if check.after != nil {
				check.after(t, pool)
			}
			step("migrating back down", v-1)
			if check.down != nil {
				check.down(t, pool)
			}
			step("migrating up again", v)
		})
		if !ok {
			return // The walk stopped where it failed.
		}
		if dbURL != walkURL {
			m, err := migrator.Open(walkURL)
			if err != nil {
				t.Fatal(err)
			}
			err = errors.Join(m.Goto(ctx, v), m.Close())
			if err != nil {
				t.Fatalf("walking up to version %d: %v", v, err)
			}
		}
	}
}

// copyDatabase makes a copy of the database at dbURL, which no session
// may be connected to, named after it with suffix, and returns its URL; the
// copy is dropped when the test ends.
func copyDatabase(t testing.TB, admin *pgxpool.Pool, dbURL, suffix string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	source := strings.TrimPrefix(u.Path, "/")
	name := source + "_" + suffix
	mustExec(t, admin, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, pgx.Identifier{name}.Sanitize(), pgx.Identifier{source}.Sanitize()))
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("dropping the copy %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// TestMigratorUpTwice requires a second up, with nothing to do, to succeed.
func TestMigratorUpTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	for i := 0; i < 2; i++ {
		if err := m.Up(ctx); err != nil {
			t.Fatalf("up #%d: %v", i+1, err)
		}
	}
	requireVersion(t, m, latestVersion(t))
	if err := m.Down(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Down(ctx, 0); err != nil {
		t.Fatalf("down with nothing to do: %v", err)
	}
	requireVersion(t, m, 0)
}

// TestMigratorConcurrentUp runs several migrators at once on one database:
// golang-migrate's advisory lock must make them take turns.
func TestMigratorConcurrentUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		m := newMigrator(t, dbURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Up(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	requireVersion(t, newMigrator(t, dbURL), latestVersion(t))
}

// TestMigratorDirty marks the database dirty, as a migration that failed
// half way does, and requires every change to refuse with the way out until
// force clears it.
func TestMigratorDirty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	latest := latestVersion(t)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}

	v, dirty, err := m.Version(ctx)
	if err != nil || v != latest || !dirty {
		t.Fatalf("want version %d dirty, got %d dirty=%v err=%v", latest, v, dirty, err)
	}
	for name, op := range map[string]func() error{
		"up":   func() error { return m.Up(ctx) },
		"down": func() error { return m.Down(ctx, 1) },
	} {
		err := op()
		var dirtyErr *migrator.DirtyError
		if !errors.As(err, &dirtyErr) || dirtyErr.Version != latest {
			t.Fatalf("%s on a dirty database: want a DirtyError at %d, got %v", name, latest, err)
		}
		want := fmt.Sprintf("go run ./cmd/migrate force %d", latest-1)
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "dirty at version") {
			t.Fatalf("%s on a dirty database: the error should say how to recover (%q), got: %v", name, want, err)
		}
	}

	if err := m.Force(ctx, int(latest)); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("up after force: %v", err)
	}
	requireVersion(t, m, latest)
}

// TestMigratorStatus requires status to list every migration by name and
// mark which are applied.
func TestMigratorStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	all, err := migrator.List(pgconvosql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	check := func(applied uint) {
		t.Helper()
		got, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(all) {
			t.Fatalf("status lists %d migrations, want %d", len(got), len(all))
		}
		for i, mig := range got {
			if mig.Version != uint(i+1) || mig.Name != all[i].Name || mig.Name == "" {
				t.Fatalf("status entry %d is %+v, want version %d named %q", i, mig, i+1, all[i].Name)
			}
			if mig.Applied != (mig.Version <= applied) || mig.Dirty {
				t.Fatalf("status entry %+v at version %d", mig, applied)
			}
		}
	}
	check(0)
	if err := m.Goto(ctx, 1); err != nil {
		t.Fatal(err)
	}
	check(1)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check(latestVersion(t))
}

// latestVersion returns the highest embedded migration version.
func latestVersion(t testing.TB) uint {
	t.Helper()
	v, err := migrator.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// requireVersion fails the test unless m's database is cleanly at want.
func requireVersion(t testing.TB, m *migrator.Migrator, want uint) {
	t.Helper()
	v, dirty, err := m.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v != want || dirty {
		t.Fatalf("want version %d clean, got %d dirty=%v", want, v, dirty)
	}
}

// requireNoConvoSchema fails the test if schema convo exists.
func requireNoConvoSchema(t testing.TB, db *sql.DB) {
	t.Helper()
	if n := len(queryStrings(t, db, `SELECT nspname FROM pg_namespace WHERE nspname = 'convo'`)); n != 0 {
		t.Fatal("down to zero left schema convo behind")
	}
	extra := queryStrings(t, db, `
		SELECT nspname FROM pg_namespace
		WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\_%'`)
	if len(extra) != 0 {
		t.Fatalf("down to zero left schemas behind: %v", extra)
	}
}

// requireOnlyExtensions fails the test unless exactly the named extensions
// are installed.
func requireOnlyExtensions(t testing.TB, db *sql.DB, want ...string) {
	t.Helper()
	got := queryStrings(t, db, `SELECT extname FROM pg_extension ORDER BY extname`)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("want extensions %v, got %v", want, got)
	}
}

// queryStrings runs query, which returns one text column, and returns the
// values.
func queryStrings(t testing.TB, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshotQueries describe every kind of object in a schema as rows of
// (key, definition). $1 is the schema name. The keys name objects without
// OIDs so that two databases, or one database before and after, compare.
// schema_migrations is left out: it is golang-migrate's, not ours.
var snapshotQueries = []string{
	// The schema itself, with owner, privileges and comment.
	`SELECT 'schema ' || n.nspname,
	        format('owner=%s acl=%s comment=%s', pg_get_userbyid(n.nspowner), n.nspacl,
	               obj_description(n.oid, 'pg_namespace'))
	 FROM pg_namespace n WHERE n.nspname = $1`,
	// Relations of every kind, with row security, privileges and comment.
	`SELECT 'relation ' || c.relname,
	        format('kind=%s owner=%s rls=%s/%s acl=%s comment=%s', c.relkind, pg_get_userbyid(c.relowner),
	               c.relrowsecurity, c.relforcerowsecurity, c.relacl, obj_description(c.oid, 'pg_class'))
	 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = $1 AND c.relname NOT IN ('schema_migrations', 'schema_migrations_pkey')`,
	// Columns: position (among the columns not dropped), type, nullability,
	// default, generation, identity, comment.
	`SELECT 'column ' || c.relname || '.' || a.attname,
	        format('#%s %s notnull=%s default=%s generated=%s identity=%s comment=%s',
	               (SELECT count(*) FROM pg_attribute b
	                 WHERE b.attrelid = a.attrelid AND b.attnum BETWEEN 1 AND a.attnum AND NOT b.attisdropped),
	               format_type(a.atttypid, a.atttypmod), a.attnotnull,
	               pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity,
	               col_description(c.oid, a.attnum))
	 FROM pg_attribute a
	 JOIN pg_class c ON c.oid = a.attrelid
	 JOIN pg_namespace n ON n.oid = c.relnamespace
	 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	 WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped
	   AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c') AND c.relname <> 'schema_migrations'`,
	// Constraints on tables and domains.
	`SELECT 'constraint ' || coalesce(c.relname, ty.typname) || '.' || con.conname,
	        format('%s comment=%s', pg_get_constraintdef(con.oid), obj_description(con.oid, 'pg_constraint'))
	 FROM pg_constraint con
	 JOIN pg_namespace n ON n.oid = con.connamespace
	 LEFT JOIN pg_class c ON c.oid = con.conrelid
	 LEFT JOIN pg_type ty ON ty.oid = con.contypid
	 WHERE n.nspname = $1 AND coalesce(c.relname, '') <> 'schema_migrations'`,
	// Indexes.
	`SELECT 'index ' || ci.relname, pg_get_indexdef(i.indexrelid)
	 FROM pg_index i
	 JOIN pg_class ci ON ci.oid = i.indexrelid
	 JOIN pg_namespace n ON n.oid = ci.relnamespace
	 WHERE n.nspname = $1 AND ci.relname <> 'schema_migrations_pkey'`,
	// Functions and procedures, whole text, with owner, privileges and comment.
	`SELECT 'function ' || p.oid::regprocedure::text,
	        format('%s owner=%s acl=%s comment=%s', pg_get_functiondef(p.oid), pg_get_userbyid(p.proowner),
	               p.proacl, obj_description(p.oid, 'pg_proc'))
	 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	 WHERE n.nspname = $1 AND p.prokind IN ('f', 'p')`,
	// Aggregates and window functions, which pg_get_functiondef refuses.
	`SELECT 'aggregate ' || p.oid::regprocedure::text,
	        format('kind=%s owner=%s acl=%s comment=%s', p.prokind, pg_get_userbyid(p.proowner), p.proacl,
	               obj_description(p.oid, 'pg_proc'))
	 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	 WHERE n.nspname = $1 AND p.prokind NOT IN ('f', 'p')`,
	// Triggers, with whether they are enabled.
	`SELECT 'trigger ' || c.relname || '.' || tg.tgname,
	        format('%s enabled=%s comment=%s', pg_get_triggerdef(tg.oid), tg.tgenabled,
	               obj_description(tg.oid, 'pg_trigger'))
	 FROM pg_trigger tg
	 JOIN pg_class c ON c.oid = tg.tgrelid
	 JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = $1 AND NOT tg.tgisinternal`,
	// Views and materialised views, by their query.
	`SELECT 'view ' || c.relname, pg_get_viewdef(c.oid)
	 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')`,
	// Types that are not a relation's row type: enums, domains, ranges.
	`SELECT 'type ' || ty.typname,
	        format('kind=%s owner=%s base=%s labels=%s acl=%s comment=%s', ty.typtype,
	               pg_get_userbyid(ty.typowner), format_type(ty.typbasetype, ty.typtypmod),
	               (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
	                FROM pg_enum e WHERE e.enumtypid = ty.oid),
	               ty.typacl, obj_description(ty.oid, 'pg_type'))
	 FROM pg_type ty JOIN pg_namespace n ON n.oid = ty.typnamespace
	 WHERE n.nspname = $1 AND ty.typtype <> 'b'
	   AND (ty.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = ty.typrelid) = 'c')`,
	// Row-level security policies.
	`SELECT 'policy ' || c.relname || '.' || pol.polname,
	        format('cmd=%s permissive=%s roles=%s using=%s check=%s', pol.polcmd, pol.polpermissive,
	               (SELECT array_agg(pg_get_userbyid(r) ORDER BY 1) FROM unnest(pol.polroles) r),
	               pg_get_expr(pol.polqual, pol.polrelid), pg_get_expr(pol.polwithcheck, pol.polrelid))
	 FROM pg_policy pol
	 JOIN pg_class c ON c.oid = pol.polrelid
	 JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = $1`,
	// Sequences' parameters.
	`SELECT 'sequence ' || c.relname,
	        format('start=%s inc=%s min=%s max=%s cycle=%s type=%s',
	               s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcycle, format_type(s.seqtypid, NULL))
	 FROM pg_sequence s
	 JOIN pg_class c ON c.oid = s.seqrelid
	 JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = $1`,
	// The other kinds of object that have an owner.
	`SELECT kind || ' ' || name, 'owner=' || pg_get_userbyid(owner)
	 FROM (SELECT 'operator', o.oid::regoperator::text, o.oprowner, o.oprnamespace FROM pg_operator o
	       UNION ALL SELECT 'operator class', o.opcname, o.opcowner, o.opcnamespace FROM pg_opclass o
	       UNION ALL SELECT 'operator family', o.opfname, o.opfowner, o.opfnamespace FROM pg_opfamily o
	       UNION ALL SELECT 'collation', o.collname, o.collowner, o.collnamespace FROM pg_collation o
	       UNION ALL SELECT 'conversion', o.conname, o.conowner, o.connamespace FROM pg_conversion o
	       UNION ALL SELECT 'text search configuration', o.cfgname, o.cfgowner, o.cfgnamespace FROM pg_ts_config o
	       UNION ALL SELECT 'text search dictionary', o.dictname, o.dictowner, o.dictnamespace FROM pg_ts_dict o
	       UNION ALL SELECT 'statistics', o.stxname, o.stxowner, o.stxnamespace FROM pg_statistic_ext o)
	      AS x (kind, name, owner, namespace)
	 JOIN pg_namespace n ON n.oid = x.namespace
	 WHERE n.nspname = $1`,
}

// snapshotSchema describes every object in schema, keyed by kind and name.
func snapshotSchema(t testing.TB, db *sql.DB, schema string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for _, q := range snapshotQueries {
		rows, err := db.Query(q, schema)
		if err != nil {
			t.Fatalf("snapshot query failed: %v\n%s", err, q)
		}
		for rows.Next() {
			var key, def string
			if err := rows.Scan(&key, &def); err != nil {
				rows.Close()
				t.Fatal(err)
			}
			snap[key] = def
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return snap
}

// snapshotPackage describes every object of both of pgconvo's schemas, the
// API (convo) and the machinery (convo_private).
func snapshotPackage(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for _, schema := range []string{"convo", "convo_private"} {
		for k, v := range snapshotSchema(t, db, schema) {
			snap[schema+": "+k] = v
		}
	}
	return snap
}

// diffSnapshots describes how b differs from a, one object a paragraph, or
// returns "" when they are the same.
func diffSnapshots(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out strings.Builder
	for _, k := range sorted {
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inB:
			fmt.Fprintf(&out, "- %s is gone (was: %s)\n", k, oneLine(av))
		case !inA:
			fmt.Fprintf(&out, "+ %s is new: %s\n", k, oneLine(bv))
		case av != bv:
			fmt.Fprintf(&out, "~ %s changed:\n%s", k, lineDiff(av, bv))
		}
	}
	return out.String()
}

// oneLine squeezes a definition onto one line for a diff.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// lineDiff shows the lines of two definitions that differ, after trimming
// their common beginning and end.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	start := 0
	for start < len(al) && start < len(bl) && al[start] == bl[start] {
		start++
	}
	ea, eb := len(al), len(bl)
	for ea > start && eb > start && al[ea-1] == bl[eb-1] {
		ea--
		eb--
	}
	var out strings.Builder
	fmt.Fprintf(&out, "    @@ line %d\n", start+1)
	for _, l := range al[start:ea] {
		fmt.Fprintf(&out, "    - %s\n", l)
	}
	for _, l := range bl[start:eb] {
		fmt.Fprintf(&out, "    + %s\n", l)
	}
	return out.String()
}
