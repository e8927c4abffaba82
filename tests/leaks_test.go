package tests

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// noticeConn opens one connection of pool's role (a loginAs pool) that
// records every notice or LOG message the server sends it; drain returns
// them and forgets them.
func noticeConn(t *testing.T, pool *pgxpool.Pool) (conn *pgx.Conn, drain func() []string) {
	t.Helper()
	var mu sync.Mutex
	var msgs []string
	cfg := pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, n.Message+"\n"+n.Detail)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := msgs
		msgs = nil
		return out
	}
}

// TestViewsExplainNamesNoTable: EXPLAIN ANALYZE of each view a convo_app
// session reads, with a condition of leakproof operators only (which the
// planner pushes below a security_barrier view's owner filter, down to a
// table scan whose actual row count then counts every owner's rows), names
// no table: the view reads its rows through a function, which takes no
// condition of the caller's. Run as a login member of convo_app, owner
// alice, with bob's rows in every view; the counts of a condition true of
// bob's rows alone are also compared with one true of nobody's.
func TestViewsExplainNamesNoTable(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	bob := viewsLeakFixture(t, db)
	web := loginAs(t, db, "convo_app")
	for _, v := range []struct{ view, cond string }{
		{"orphaned_applied_effects", "amount_minor >= 0 AND conversation_id >= '%[1]s'::uuid AND conversation_id <= '%[1]s'::uuid"},
		{"stale_pending_effects", "idempotency_key >= '' AND conversation_id >= '%[1]s'::uuid AND conversation_id <= '%[1]s'::uuid"},
		{"stale_generations", "model >= 'model-stale-b' AND conversation_id >= '%[1]s'::uuid AND conversation_id <= '%[1]s'::uuid"},
	} {
		var plan string
		err := inOwnerTx(web, "alice", func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF, COSTS OFF, FORMAT JSON) SELECT * FROM convo.`+
				v.view+` WHERE `+fmt.Sprintf(v.cond, bob.conv)).Scan(&plan)
		})
		if err != nil {
			t.Fatalf("%s: %v", v.view, err)
		}
		if strings.Contains(plan, `"Relation Name"`) || strings.Contains(plan, `"Index Name"`) {
			t.Errorf("EXPLAIN ANALYZE of convo.%s as alice's convo_app session names a table, whose row counts count bob's rows:\n%s",
				v.view, plan)
		}
	}
}

// planMessages runs sql as owner on conn, in a transaction rolled back,
// with client_min_messages = log and debug_print_parse, debug_print_rewritten
// and debug_print_plan on (settings any role may SET), and returns the
// messages the server sent while it ran, with its error.
func planMessages(t *testing.T, conn *pgx.Conn, drain func() []string, owner, sql string, args ...any) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, st := range []string{`SELECT set_config('convo.owner_id', '` + owner + `', true)`,
		`SET LOCAL client_min_messages = log`, `SET LOCAL debug_pretty_print = off`,
		`SET LOCAL debug_print_plan = on`, `SET LOCAL debug_print_parse = on`, `SET LOCAL debug_print_rewritten = on`} {
		if _, err := tx.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	drain()
	// The simple protocol: one statement parsed, rewritten and planned once.
	_, err = tx.Exec(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	return drain(), err
}

// TestAPIPlansReachNoClient: a convo_app session that turns on
// debug_print_plan (with parse and rewritten) and client_min_messages = log
// is sent the trees of its own statement, once each, and nothing of what
// runs inside pgconvo's SECURITY DEFINER functions, whose plans hold other
// owners' values as constants (the conversation of bob's message, which the
// API answers CV002 for; an erased import's id for the right guess of its
// content; the keyed digests of the caller's input). Each call below is
// made with the settings on; its own statement is sent three trees (parse,
// rewritten, plan), and none names bob's conversation or the erased one.
func TestAPIPlansReachNoClient(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	web := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	erased := mustImport(t, web, "carol", "chatgpt", noIDChatGPT("Your PIN is 4821."))
	mustExec(t, admin, `SELECT count(*) FROM convo.erase_conversation($1, 'the user asked')`, erased)
	conn, drain := noticeConn(t, web)
	for _, c := range []struct {
		owner, state, sql string
		args              []any
	}{
		{"alice", "", `SELECT * FROM convo.path($1)`, []any{alice.conv}},
		{"alice", "CV002", `SELECT * FROM convo.alternatives($1, $2)`, []any{alice.conv, bob.user}},
		{"alice", "CV002", `SELECT * FROM convo.path($1)`, []any{bob.conv}},
		{"carol", "", `SELECT convo.import_chatgpt('carol', $1::jsonb)`, []any{noIDChatGPT("Your PIN is 4821.")}},
		{"alice", "", `SELECT * FROM convo.begin_receipt('alice', 'follow-plans-1', 'file_followup', '{"ticket": 4821}')`, nil},
	} {
		msgs, err := planMessages(t, conn, drain, c.owner, c.sql, c.args...)
		if c.state != "" {
			requireSQLState(t, err, c.state)
		} else if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if len(msgs) == 0 {
			t.Fatalf("%s: no tree was sent at all: the settings had no effect, so the test proves nothing", c.sql)
		}
		if len(msgs) > 3 {
			t.Errorf("%s: the session was sent %d trees, more than its own statement's parse, rewritten and plan: %.300s",
				c.sql, len(msgs), strings.Join(msgs[3:], "\n"))
		}
		for _, m := range msgs {
			for _, id := range []string{bob.conv, erased} {
				if planHasUUID(m, id) && !slices.Contains(c.args, any(id)) {
					t.Errorf("%s: a tree sent to the session holds %s, which it may not know", c.sql, id)
				}
			}
		}
	}
}

// planHasUUID says whether a printed node tree holds id as a constant (a
// uuid Const prints its 16 bytes as decimals) or as text.
func planHasUUID(tree, id string) bool {
	if strings.Contains(tree, id) {
		return true
	}
	var b []string
	for i := 0; i < len(id); {
		if id[i] == '-' {
			i++
			continue
		}
		var n int
		fmt.Sscanf(id[i:i+2], "%02x", &n)
		b = append(b, fmt.Sprint(int8(n))) // printed as signed chars
		i += 2
	}
	return strings.Contains(tree, "["+strings.Join(b, " ")+" ]") || strings.Contains(tree, " "+strings.Join(b, " ")+" ")
}

// rlsBoundLogin creates a LOGIN role with USAGE on convo and the grants
// given (%s is the role), no BYPASSRLS: row-level security shows it no row
// and lets it write none. Dropped when the test ends.
func rlsBoundLogin(t *testing.T, db *pgxpool.Pool, grants ...string) *pgx.Conn {
	t.Helper()
	name := "bound_" + strings.ReplaceAll(newID()[:13], "-", "")
	ident := pgx.Identifier{name}.Sanitize()
	password := newID()
	mustExec(t, db, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, ident, password))
	t.Cleanup(func() {
		ctx := context.Background()
		db.Exec(ctx, `DROP OWNED BY `+ident)
		db.Exec(ctx, `DROP ROLE `+ident)
	})
	mustExec(t, db, `GRANT USAGE ON SCHEMA convo TO `+ident)
	for _, g := range grants {
		mustExec(t, db, fmt.Sprintf(g, ident))
	}
	u, err := url.Parse(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestGuardsTellRowSecurityBoundRolesNothing: a role granted SELECT,
// INSERT and UPDATE on the tables, without BYPASSRLS, reads no row and
// may write none. The guards, which run as the owner role before
// row-level security's check, refuse it (42501) before they read a row,
// whatever owner it sets: no DETAIL of bob's message (its depth, siblings,
// branch, time), no conversation of a message id, and the same answer for
// a right (conversation, message) pair as for a wrong one. Nothing is
// written.
func TestGuardsTellRowSecurityBoundRolesNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	conn := rlsBoundLogin(t, db, `GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA convo TO %s`)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET convo.owner_id = 'bob'`); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, db)
	for _, c := range []struct {
		what, sql string
		args      []any
	}{
		{"a message under bob's", `INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
			VALUES ($1, gen_random_uuid(), $2, 'assistant', '[{"type": "text", "text": "x"}]', 0, 1, gen_random_uuid())`,
			[]any{bob.conv, bob.user}},
		{"a generation naming bob's message in alice's conversation", `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, model)
			VALUES ($1, gen_random_uuid(), $2, 'm')`, []any{alice.conv, bob.user}},
		{"a generation of the right pair", `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, model)
			VALUES ($1, gen_random_uuid(), $2, 'm')`, []any{bob.conv, bob.user}},
		{"a conversation for bob", `INSERT INTO convo.conversations (id, owner_id) VALUES (gen_random_uuid(), 'bob')`, nil},
	} {
		_, err := conn.Exec(ctx, c.sql, c.args...)
		requireSQLState(t, err, "42501")
		if pe, ok := err.(*pgconn.PgError); ok {
			for _, id := range []string{bob.conv, bob.user, bob.root} {
				if strings.Contains(pe.Message+pe.Detail+pe.Hint, id) {
					t.Errorf("%s: the refusal names %s: %s / %s", c.what, id, pe.Message, pe.Detail)
				}
			}
		}
	}
	requireFingerprint(t, db, "the refused writes of a role row-level security binds", before)
}

// TestEveryTableRefusesTruncate: TRUNCATE ignores row-level security, so a
// role granted it (a repair role given ALL on the tables, no superuser)
// would empty every owner's rows at once. Every table of convo, read from
// the catalog, refuses it (CV005), and nothing is removed: with
// convo.live_path emptied, path would answer an empty history.
func TestEveryTableRefusesTruncate(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	conn := rlsBoundLogin(t, db, `GRANT TRUNCATE ON ALL TABLES IN SCHEMA convo TO %s`)
	tables := queryRowsAs[string](t, db, `SELECT c.oid::regclass::text FROM pg_class c
		 WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('r', 'p')
		 ORDER BY 1`)
	if len(tables) < 10 {
		t.Fatalf("only %d tables found: %v", len(tables), tables)
	}
	before := fingerprint(t, db)
	ctx := context.Background()
	for _, table := range tables {
		// CASCADE: a table others reference is otherwise refused before
		// any trigger runs (0A000), which would prove nothing.
		_, err := conn.Exec(ctx, `TRUNCATE `+table+` CASCADE`)
		if err == nil {
			t.Errorf("TRUNCATE %s by a role that is no superuser went through", table)
			continue
		}
		requireSQLState(t, err, "CV005")
	}
	requireFingerprint(t, db, "the refused TRUNCATEs", before)
	if n := len(pathIDs(t, db, alice.conv)); n == 0 {
		t.Errorf("alice's path is empty")
	}
}

// TestReplicaGuardsCheckTheOwner: the repair role of replica_guard_test.go
// (BYPASSRLS, table privileges, replica mode) with owner alice set writes
// nothing of bob's outside the API, as messages_guard already refused: a
// generation in bob's conversation, a move of bob's head, a new title or
// archive state for his conversation are each CV002, a conversation created
// for him CV011 (as create_conversation answers), and nothing is written. Alice's own head move still works.
func TestReplicaGuardsCheckTheOwner(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	conn := repairLogin(t, db)
	ctx := context.Background()
	before := fingerprint(t, db)
	for _, c := range []struct{ what, sql string }{
		{"CV002 a message in bob's conversation", `INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
			SELECT $1, gen_random_uuid(), p.id, 'user', '[{"type": "text", "text": "x"}]', p.depth + 1, 1, p.branch_id
			  FROM convo.messages p WHERE p.conversation_id = $1 AND p.id = (SELECT head_message_id FROM convo.conversations WHERE id = $1)
			   AND $2::uuid IS NOT NULL`},
		{"CV002 a generation in bob's conversation", `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, model)
			VALUES ($1, gen_random_uuid(), $2, 'm')`},
		{"CV002 bob's generation ended", `UPDATE convo.generations SET state = 'cancelled', finished_at = clock_timestamp()
			WHERE conversation_id = $1 AND state = 'streaming' AND $2::uuid IS NOT NULL`},
		{"CV002 bob's head moved", `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`},
		{"CV002 bob's conversation renamed", `UPDATE convo.conversations SET title = 'renamed' WHERE id = $1 AND $2::uuid IS NOT NULL`},
		{"CV002 bob's conversation archived", `UPDATE convo.conversations SET archived = true WHERE id = $1 AND $2::uuid IS NOT NULL`},
		{"CV011 a conversation created for bob", `INSERT INTO convo.conversations (id, owner_id)
			SELECT gen_random_uuid(), 'bob' WHERE $1::uuid IS NOT NULL AND $2::uuid IS NOT NULL`},
	} {
		_, err := conn.Exec(ctx, c.sql, bob.conv, bob.user)
		if err == nil {
			t.Errorf("%s: accepted from a session whose owner is alice", c.what)
			continue
		}
		requireSQLState(t, err, c.what[:5])
	}
	requireFingerprint(t, db, "the refused writes to bob's rows", before)
	if _, err := conn.Exec(ctx, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, alice.conv, alice.user); err != nil {
		t.Fatalf("alice's own head move: %v", err)
	}
}
