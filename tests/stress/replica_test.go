package stress

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/internal/pgtest"
	"github.com/pgconvo/pgconvo/migrator"
)

// replicaReads are the calls a streaming replica answers: every read of
// the API, as the application makes them (:conv the conversation, :user a
// user message with an alternative, :call a tool call id, :owner the
// owner), each as one text.
var replicaReads = []string{
	`SELECT json_agg(p ORDER BY p.depth)::text FROM convo.path(:conv) p`,
	`SELECT json_agg(p ORDER BY p.depth)::text FROM convo.path_at(:conv, now()) p`,
	`SELECT convo.head_at(:conv, now())::text`,
	`SELECT json_agg(h ORDER BY h.seq)::text FROM convo.head_history(:conv) h`,
	`SELECT json_agg(a ORDER BY a.created_at)::text FROM convo.alternatives(:conv, :user) a`,
	`SELECT convo.request_messages(:conv)::text`,
	`SELECT convo.request_messages(:conv, NULL, 'anthropic')::text`,
	`SELECT convo.request_digest(:conv)`,
	`SELECT row_to_json(e)::text FROM convo.effect_for_call(:conv, :call) e`,
	`SELECT convo.export_conversation(:conv)::text`,
	`SELECT json_agg(c ORDER BY c.last_activity_at DESC, c.conversation_id DESC)::text FROM convo.conversations(:owner) c`,
	`SELECT json_agg(o ORDER BY o.effect_id)::text FROM convo.orphaned_applied_effects o`,
	`SELECT json_agg(s)::text FROM convo.stale_pending_effects s`,
	`SELECT json_agg(g)::text FROM convo.stale_generations g`,
	`SELECT convo.args_errors('{"type": "object", "required": ["a"]}', '{}')::text`,
}

// TestReadsOnAReplica: a hot standby started from a primary with
// pg_basebackup -R answers every read of the API as the primary does, as
// the application (owner set with SET LOCAL) and for self_check as the
// reader; after a write on the primary it answers with the write once it has
// replayed that far (before, with what it had: replication lag); a write
// sent to it is refused (25006) and changes nothing anywhere.
func TestReadsOnAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, err := localpg.StartEphemeral(ctx, localpg.Options{MaxConnections: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop() })
	admin, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, st := range []string{`CREATE DATABASE pgconvo`} {
		if _, err := admin.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	m, err := migrator.Open(primary.URL("pgconvo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	m.Close()
	db, err := pgx.Connect(ctx, primary.URL("pgconvo"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	seed := []string{
		`CREATE ROLE replica_app LOGIN IN ROLE convo_app`,
		`CREATE ROLE replica_support LOGIN IN ROLE convo_reader`,
		`SELECT convo.register_tool('buy', true, '{"type": "object", "required": ["amount_minor", "currency"],
		   "properties": {"amount_minor": {"type": "integer", "minimum": 1}, "currency": {"type": "string"}}}',
		   p_idempotency_scope => 'fork_args', p_amount_arg => 'amount_minor', p_currency_arg => 'currency')`,
	}
	for _, st := range seed {
		if _, err := db.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	var conv, user, call string
	err = db.QueryRow(ctx, `
		WITH c AS (SELECT convo.create_conversation('owner-r', 'You sell credits.') AS id)
		SELECT c.id::text, convo.append_message(c.id, 'user', '[{"type": "text", "text": "Buy 500."}]')::text FROM c`).Scan(&conv, &user)
	if err != nil {
		t.Fatal(err)
	}
	call = "toolu_replica_1"
	for _, st := range []string{
		`SELECT convo.append_message($1, 'assistant', '[{"type": "tool_use", "id": "toolu_replica_1", "name": "buy",
		   "input": {"amount_minor": 500, "currency": "EUR"}}]')`,
		`SELECT convo.settle_effect($1, (SELECT effect_id FROM convo.effect_for_call($1, 'toolu_replica_1')), 'applied', 'ch_1')`,
		`SELECT convo.append_message($1, 'tool', '[{"type": "tool_result", "tool_use_id": "toolu_replica_1", "content": "ok"}]')`,
		`SELECT convo.set_title($1, 'Credits')`,
	} {
		if _, err := db.Exec(ctx, st, conv); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	if _, err := db.Exec(ctx, `SELECT convo.edit_and_resend($1, $2, '[{"type": "text", "text": "Buy 700."}]')`, conv, user); err != nil {
		t.Fatal(err)
	}
	// The edit is the user message on the path now; the first one is its
	// alternative.

	standby, err := primary.StartStandby(ctx, localpg.Options{MaxConnections: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop() }) // before the primary's: last in, first out
	requireReplayed := func() {
		t.Helper()
		if err := localpg.WaitReplayed(ctx, primary.URL("pgconvo"), standby.URL("pgconvo"), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	requireReplayed()
	appURL := func(s *localpg.Server, role string) string {
		return strings.Replace(s.URL("pgconvo"), "postgres@", role+"@", 1)
	}
	connect := func(url string) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	onPrimary, onStandby := connect(appURL(primary, "replica_app")), connect(appURL(standby, "replica_app"))
	var inRecovery bool
	if err := onStandby.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the standby is not in recovery (%v)", err)
	}
	read := func(c *pgx.Conn, query string) (string, error) {
		query, args := bindNamed(query, map[string]string{":conv": conv, ":user": user, ":call": call, ":owner": "owner-r"})
		var out *string
		err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-r', true)`); err != nil {
				return err
			}
			return tx.QueryRow(ctx, query, args...).Scan(&out)
		})
		if out == nil {
			return "NULL", err
		}
		return *out, err
	}
	requireSameAnswers := func(when string) {
		t.Helper()
		for _, q := range replicaReads {
			want, err := read(onPrimary, q)
			if err != nil {
				t.Fatalf("%s on the primary: %s: %v", when, q, err)
			}
			got, err := read(onStandby, q)
			if err != nil {
				t.Fatalf("%s on the standby: %s: %v", when, q, err)
			}
			if got != want {
				t.Errorf("%s: %s\n the standby: %s\n the primary: %s", when, q, got, want)
			}
			if want == "NULL" && !strings.Contains(q, "stale_") {
				t.Errorf("%s: %s answered nothing on the primary: the story should give it something to read", when, q)
			}
		}
	}
	requireSameAnswers("after the story")

	// self_check, as the reader, on both.
	for name, s := range map[string]*localpg.Server{"primary": primary, "standby": standby} {
		c := connect(appURL(s, "replica_support"))
		var failed int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM convo.self_check() WHERE NOT ok`).Scan(&failed); err != nil || failed != 0 {
			t.Fatalf("self_check on the %s: %d failed (%v)", name, failed, err)
		}
	}

	// A write on the primary: the standby shows it once it has replayed.
	err = pgx.BeginFunc(ctx, onPrimary, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-r', true)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', '[{"type": "text", "text": "Done."}]')`, conv)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	requireReplayed()
	requireSameAnswers("after a write on the primary")

	// A write sent to the standby is refused there, and nothing changes.
	before, err := read(onPrimary, `SELECT convo.export_conversation(:conv)::text`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = read(onStandby, `SELECT convo.append_message(:conv, 'user', '[{"type": "text", "text": "Hi"}]')::text`)
	pgtest.RequireSQLState(t, err, "25006")
	after, err := read(onPrimary, `SELECT convo.export_conversation(:conv)::text`)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.RequireEqual(t, "the primary after a write sent to the standby", after, before)
}

// bindNamed replaces each :name of values in query by a parameter, in the
// order met, and returns the query and its arguments.
func bindNamed(query string, values map[string]string) (string, []any) {
	var args []any
	var b strings.Builder
	for i := 0; i < len(query); {
		matched := false
		for name, v := range values {
			if strings.HasPrefix(query[i:], name) {
				args = append(args, v)
				fmt.Fprintf(&b, "$%d", len(args))
				i += len(name)
				matched = true
				break
			}
		}
		if !matched {
			b.WriteByte(query[i])
			i++
		}
	}
	return b.String(), args
}
