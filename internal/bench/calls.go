package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CallCount is how many function calls (PL/pgSQL and SQL functions that are
// not inlined: triggers, helpers, the API function itself) one API call
// makes, as PostgreSQL counts them with track_functions = all, and how many
// distinct functions they are.
type CallCount struct {
	Call     string
	Calls    int64
	Distinct int64
	Goal     string
}

// callCase is one API call to count, made as the application's role for
// the conversation's owner; target is the conversation's last user message
// on its path, found before counting.
type callCase struct {
	name, goal string
	call       func(ctx context.Context, tx pgx.Tx, conv conversation, target string) error
}

// callCases are the counted calls: a plain append, an edit, the assistant's
// tool turn with its decision read back, and an import of 12 messages.
func callCases() []callCase {
	call := "toolu_calls_" + strings.ReplaceAll(newUUID(), "-", "")
	return []callCase{
		{"a plain `append_message` (one text part)", "at most 4",
			func(ctx context.Context, tx pgx.Tx, conv conversation, _ string) error {
				_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv.id, textParts)
				return err
			}},
		{"`edit_and_resend` of the last user message", "",
			func(ctx context.Context, tx pgx.Tx, conv conversation, target string) error {
				_, err := tx.Exec(ctx, `SELECT convo.edit_and_resend($1, $2::uuid, $3::jsonb)`, conv.id, target, textParts)
				return err
			}},
		{"a tool turn: an assistant message with text and an effectful call, then `effect_for_call`", "",
			func(ctx context.Context, tx pgx.Tx, conv conversation, _ string) error {
				parts := `[{"type":"text","text":"Buying."},{"type":"tool_use","id":"` + call +
					`","name":"bench_purchase","input":{"amount_minor":700,"currency":"EUR"}}]`
				if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv.id, parts); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT * FROM convo.effect_for_call($1, $2)`, conv.id, call)
				return err
			}},
		{"`import_chatgpt` of a 12-message conversation", "",
			func(ctx context.Context, tx pgx.Tx, conv conversation, _ string) error {
				_, err := tx.Exec(ctx, `SELECT convo.import_chatgpt($1, $2::jsonb)`, conv.owner, twelveMessages())
				return err
			}},
	}
}

// twelveMessages is a ChatGPT conversation of 12 messages in one line.
func twelveMessages() string {
	var nodes []string
	parent := "null"
	for i := 1; i <= 12; i++ {
		role := map[bool]string{true: "user", false: "assistant"}[i%2 == 1]
		nodes = append(nodes, fmt.Sprintf(`"n%d": {"id": "n%d", "parent": %s, "children": [], "message": {"author": {"role": %q},
			"content": {"content_type": "text", "parts": ["message %d"]}, "create_time": %d}}`, i, i, parent, role, i, 1750000000+i))
		parent = fmt.Sprintf(`"n%d"`, i)
	}
	return `{"conversation_id": "calls-` + newUUID() + `", "title": "Twelve", "current_node": "n12", "mapping": {` +
		strings.Join(nodes, ", ") + `}}`
}

// callCounts counts the function calls of each callCases call on conv, in a
// transaction of the superuser's that switches to the application's role
// and names conv's owner. pg_stat_xact_user_functions is this backend's
// count not yet sent to the statistics (which can include earlier
// transactions of the same connection), so the count is the difference
// across the call: exact whatever else runs. The transaction rolls back:
// nothing it wrote stays.
func (r *run) callCounts(ctx context.Context, conv conversation) ([]CallCount, error) {
	var target string
	if err := r.env.admin.QueryRow(ctx, `SELECT message_id::text FROM convo.path($1) WHERE role = 'user'
		ORDER BY depth DESC LIMIT 1`, conv.id).Scan(&target); err != nil {
		return nil, fmt.Errorf("finding a user message to edit: %w", err)
	}
	var out []CallCount
	for _, c := range callCases() {
		tx, err := r.env.admin.Begin(ctx)
		if err != nil {
			return nil, err
		}
		n := CallCount{Call: c.name, Goal: c.goal}
		err = func() error {
			for _, st := range []string{`SET LOCAL track_functions = 'all'`, `SET LOCAL ROLE ` + appRole} {
				if _, err := tx.Exec(ctx, st); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, conv.owner); err != nil {
				return err
			}
			before, err := functionCalls(ctx, tx)
			if err != nil {
				return err
			}
			if err := c.call(ctx, tx, conv, target); err != nil {
				return err
			}
			after, err := functionCalls(ctx, tx)
			if err != nil {
				return err
			}
			for f, k := range after {
				if d := k - before[f]; d > 0 {
					n.Calls += d
					n.Distinct++
				}
			}
			return nil
		}()
		_ = tx.Rollback(ctx)
		if err != nil {
			return nil, fmt.Errorf("counting the calls of %s: %w", c.name, err)
		}
		r.logf("  %s: %d calls of %d functions", n.Call, n.Calls, n.Distinct)
		out = append(out, n)
	}
	return out, nil
}

// functionCalls is this backend's pending call count of each of pgconvo's
// functions, by function oid.
func functionCalls(ctx context.Context, tx pgx.Tx) (map[uint32]int64, error) {
	rows, err := tx.Query(ctx, `SELECT funcid, calls FROM pg_stat_xact_user_functions
		WHERE schemaname IN ('convo', 'convo_private')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uint32]int64{}
	for rows.Next() {
		var f uint32
		var k int64
		if err := rows.Scan(&f, &k); err != nil {
			return nil, err
		}
		out[f] = k
	}
	return out, rows.Err()
}

// CallTable is the call counts in Markdown.
func (res *Result) CallTable() string {
	var b strings.Builder
	b.WriteString("| call | PL/pgSQL and SQL function calls | distinct functions | goal |\n|---|---|---|---|\n")
	for _, c := range res.Calls {
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", c.Call, c.Calls, c.Distinct, c.Goal)
	}
	return b.String()
}
