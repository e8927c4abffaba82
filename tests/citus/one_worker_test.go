package citus

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// remoteLog is one connection of an application login whose transactions
// log the commands Citus sends to other nodes (citus.log_remote_commands),
// as NOTICEs kept here.
type remoteLog struct {
	conn    *pgx.Conn
	notices []*pgconn.Notice
}

func newRemoteLog(t *testing.T, app *pgxpool.Pool) *remoteLog {
	t.Helper()
	l := &remoteLog{}
	cfg := app.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { l.notices = append(l.notices, n) }
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.conn = conn
	t.Cleanup(func() { conn.Close(context.Background()) })
	return l
}

// serverPort is the port in a remote command's detail: "on server
// user@127.0.0.1:PORT connectionId: N".
var serverPort = regexp.MustCompile(`^on server \S+:(\d+) connectionId: \d+`)

// call runs query (one text column, one row) as owner in a transaction of
// its own, logging the commands Citus sends, and returns the value, the
// distinct ports of the nodes the commands went to, and the commands.
func (l *remoteLog) call(t *testing.T, owner, query string, args ...any) (v string, ports, issued []string) {
	t.Helper()
	ctx := context.Background()
	l.notices = nil
	var value *string
	err := pgx.BeginFunc(ctx, l.conn, func(tx pgx.Tx) error {
		for _, s := range []string{
			`SET LOCAL convo.owner_id = '` + strings.ReplaceAll(owner, "'", "''") + `'`,
			`SET LOCAL client_min_messages = notice`,
			`SET LOCAL citus.log_remote_commands = on`,
		} {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, query, args...).Scan(&value)
	})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	seen := map[string]bool{}
	for _, n := range l.notices {
		cmd, ok := strings.CutPrefix(n.Message, "issuing ")
		if !ok {
			continue
		}
		issued = append(issued, cmd)
		m := serverPort.FindStringSubmatch(n.Detail)
		if m == nil {
			t.Fatalf("%s: a remote command without its server: %q, %q", query, n.Message, n.Detail)
		}
		if !seen[m[1]] {
			seen[m[1]] = true
			ports = append(ports, m[1])
		}
	}
	sort.Strings(ports)
	if value != nil {
		v = *value
	}
	return v, ports, issued
}

// onOne runs query as call does and requires that its commands went to
// exactly one node, as one command between the transaction's BEGIN and
// COMMIT, the delegated function's call, committed in one phase.
func (l *remoteLog) onOne(t *testing.T, owner, query string, args ...any) string {
	t.Helper()
	v, ports, issued := l.call(t, owner, query, args...)
	var problems, calls []string
	if len(ports) != 1 {
		problems = append(problems, fmt.Sprintf("ran on %d nodes (ports %v), want one", len(ports), ports))
	}
	for _, cmd := range issued {
		switch {
		case strings.HasPrefix(cmd, "PREPARE TRANSACTION"), strings.HasPrefix(cmd, "COMMIT PREPARED"):
			problems = append(problems, "committed in two phases: "+cmd)
		case !strings.HasPrefix(cmd, "BEGIN TRANSACTION") && cmd != "COMMIT":
			calls = append(calls, cmd)
		}
	}
	if len(calls) != 1 || !strings.Contains(calls[0], "_delegated(") {
		problems = append(problems, fmt.Sprintf("not handed whole to the node: %d commands", len(calls)))
	}
	if problems != nil {
		t.Errorf("%s: %s; it issued:\n%s", query, strings.Join(problems, "; "), strings.Join(issued, "\n"))
	}
	return v
}

// TestConversationCallsRunOnOneWorker calls, as an application login with
// the owner set, every API function that names a conversation on a
// distributed database, each in a transaction of its own, and requires
// that Citus sent its commands to one worker and committed there in one
// phase: each call is handed whole to the node holding the conversation.
func TestConversationCallsRunOnOneWorker(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "20 seconds")
	distribute(t, n)
	l := newRemoteLog(t, pgtest.LoginAs(t, n.pool, "convo_app"))
	const owner = "alice"

	conv := pgtest.NewID()
	// create_conversation is the exception: it calls the owner's node (to
	// check and hold the owner), then the conversation's, which may be
	// another one, and then commits in two phases.
	l.call(t, owner, `SELECT convo.create_conversation($1, 'be brief', '{}', $2)::text`, owner, conv)

	t.Run("tree", func(t *testing.T) {
		q := l.onOne(t, owner, `SELECT convo.append_message($1, 'user', $2)::text`, conv, textParts("hi"))
		a := l.onOne(t, owner, `SELECT convo.append_message($1, 'assistant', $2)::text`, conv, textParts("hello"))
		l.onOne(t, owner, `SELECT convo.edit_and_resend($1, $2, $3)::text`, conv, q, textParts("hey"))
		l.onOne(t, owner, `SELECT convo.regenerate($1, $2, $3)::text`, conv, a, textParts("hello again"))
		l.onOne(t, owner, `SELECT convo.move_head($1, $2)::text`, conv, a)
		l.onOne(t, owner, `SELECT count(*)::text FROM convo.path($1)`, conv)
		l.onOne(t, owner, `SELECT count(*)::text FROM convo.path_at($1, now())`, conv)
		l.onOne(t, owner, `SELECT convo.head_at($1, now())::text`, conv)
		l.onOne(t, owner, `SELECT count(*)::text FROM convo.head_history($1)`, conv)
		l.onOne(t, owner, `SELECT count(*)::text FROM convo.alternatives($1, $2)`, conv, q)
		l.onOne(t, owner, `SELECT convo.request_messages($1)::text`, conv)
		l.onOne(t, owner, `SELECT convo.request_digest($1)`, conv)
		l.onOne(t, owner, `SELECT convo.set_title($1, 'greeting')::text`, conv)
		l.onOne(t, owner, `SELECT convo.archive_conversation($1)::text`, conv)
		l.onOne(t, owner, `SELECT convo.unarchive_conversation($1)::text`, conv)
		gen := l.onOne(t, owner, `SELECT convo.begin_generation($1, $2, 'model-a')::text`, conv, a)
		l.onOne(t, owner, `SELECT convo.complete_generation($1, $2, $3)::text`, conv, gen, textParts("hi there"))
		gen = l.onOne(t, owner, `SELECT convo.begin_generation($1, $2, 'model-a')::text`, conv, a)
		l.onOne(t, owner, `SELECT convo.fail_generation($1, $2, 'timeout')::text`, conv, gen)
		gen = l.onOne(t, owner, `SELECT convo.begin_generation($1, $2, 'model-a')::text`, conv, a)
		l.onOne(t, owner, `SELECT convo.cancel_generation($1, $2)::text`, conv, gen)
	})

	// A purchase settled, then compensated; the same purchase on a
	// regenerated branch held for confirmation and confirmed; once more,
	// declined.
	t.Run("ledger", func(t *testing.T) {
		buy := l.onOne(t, owner, `SELECT convo.append_message($1, 'assistant', $2)::text`, conv,
			pgtest.EffToolUses(pgtest.EffBuy("call-1", "purchase", 500)))
		effect := l.onOne(t, owner, `SELECT effect_id::text FROM convo.effect_for_call($1, 'call-1')`, conv)
		l.onOne(t, owner, `SELECT convo.settle_effect($1, $2::uuid, 'applied', 'ch_1', 200)::text`, conv, effect)
		l.onOne(t, owner, `SELECT convo.compensate_effect($1, $2::uuid, 're_1')::text`, conv, effect)
		for i, decide := range []string{"confirm_effect", "decline_effect"} {
			call := fmt.Sprintf("call-%d", i+2)
			l.onOne(t, owner, `SELECT convo.regenerate($1, $2, $3)::text`, conv, buy,
				pgtest.EffToolUses(pgtest.EffBuy(call, "purchase", 500)))
			held := l.onOne(t, owner, `SELECT effect_id::text FROM convo.effect_for_call($1, $2)`, conv, call)
			l.onOne(t, owner, `SELECT convo.`+decide+`($1, $2::uuid, 'alice')::text`, conv, held)
		}
	})
}
