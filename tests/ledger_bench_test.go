package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkLedgerCheck times convo_private.ledger_problems and self_check on
// one agent turn of n rounds (a user message, then n times an assistant
// message with one effectful call and the tool message with its result), for
// n = 200 and 4n = 800, each in a database of its own: the check must grow
// linearly with the turn, so the 800 row costs about four times the 200 row
// (BENCHMARKS.md). Run it with:
//
//	go test ./tests -run '^$' -bench LedgerCheck -benchtime 9x
func BenchmarkLedgerCheck(b *testing.B) {
	for _, n := range []int{200, 800} {
		db, conv := ledgerTurn(b, n)
		for _, q := range []struct{ what, sql string }{
			{"ledger_problems", `SELECT count(*) FROM convo_private.ledger_problems($1::uuid)`},
			{"self_check", `SELECT count(*) FROM convo.self_check() WHERE $1::text IS NOT NULL AND NOT ok`},
		} {
			b.Run(fmt.Sprintf("%s/rounds=%d", q.what, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					var bad int64
					if err := db.QueryRow(context.Background(), q.sql, conv).Scan(&bad); err != nil {
						b.Fatal(err)
					}
					if bad != 0 {
						b.Fatalf("%s found %d problems on a turn of %d rounds", q.what, bad, n)
					}
				}
			})
		}
	}
}

// ledgerTurn writes one agent turn of n rounds in a database of its own and
// returns the database and the conversation.
func ledgerTurn(b *testing.B, n int) (*pgxpool.Pool, string) {
	b.Helper()
	db := newDB(b)
	effRegisterPurchase(b, db, "buy", "tool_call", "1 hour")
	conv := createConversation(b, db, "owner-1", "You sell credits.")
	mustExec(b, db, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "Buy credits."}]')`, conv)
	mustExec(b, db, `SELECT count(*) FROM generate_series(1, $2::int) i,
		LATERAL (SELECT convo.append_message($1, 'assistant', jsonb_build_array(jsonb_build_object('type', 'tool_use',
		                 'id', 'call_' || i, 'name', 'buy', 'input', jsonb_build_object('amount_minor', i, 'currency', 'EUR'))))) a,
		LATERAL (SELECT convo.append_message($1, 'tool', jsonb_build_array(jsonb_build_object('type', 'tool_result',
		                 'tool_use_id', 'call_' || i, 'content', 'ok')))
		          WHERE a.append_message IS NOT NULL) r`, conv, n)
	requireCount(b, db, int64(n), `SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, conv)
	mustExec(b, db, `VACUUM ANALYZE`)
	return db, conv
}
