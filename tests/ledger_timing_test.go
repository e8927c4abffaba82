package tests

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestLedgerProblemsTimingByHand measures ledger_problems and self_check on
// one agent turn of n rounds (a user message, then n times an assistant
// message with one effectful call and the tool message with its result),
// for n = 200 and 800, each in a database of its own, the two measured in
// turn 9 times (the fastest and the median of each reported). It asserts
// nothing about time and runs only by hand (BENCHMARKS.md):
//
//	PGCONVO_LEDGER_TIMING=1 go test ./tests -run TestLedgerProblemsTimingByHand -count=1 -v
func TestLedgerProblemsTimingByHand(t *testing.T) {
	if os.Getenv("PGCONVO_LEDGER_TIMING") == "" {
		t.Skip("a measurement, run by hand: set PGCONVO_LEDGER_TIMING=1")
	}
	type turn struct {
		n    int
		db   *pgxpool.Pool
		conv string
		runs map[string][]time.Duration
	}
	var turns []*turn
	for _, n := range []int{200, 800} {
		db := newDB(t)
		effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
		conv := createConversation(t, db, "owner-1", "You sell credits.")
		start := time.Now()
		mustExec(t, db, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "Buy credits."}]')`, conv)
		mustExec(t, db, `SELECT count(*) FROM generate_series(1, $2::int) i,
			LATERAL (SELECT convo.append_message($1, 'assistant', jsonb_build_array(jsonb_build_object('type', 'tool_use',
			                 'id', 'call_' || i, 'name', 'buy', 'input', jsonb_build_object('amount_minor', i, 'currency', 'EUR'))))) a,
			LATERAL (SELECT convo.append_message($1, 'tool', jsonb_build_array(jsonb_build_object('type', 'tool_result',
			                 'tool_use_id', 'call_' || i, 'content', 'ok')))
			          WHERE a.append_message IS NOT NULL) r`, conv, n)
		t.Logf("n = %d: the turn written in %v", n, time.Since(start).Round(time.Millisecond))
		requireCount(t, db, int64(n), `SELECT count(*) FROM convo.tool_effect_calls WHERE conversation_id = $1`, conv)
		mustExec(t, db, `VACUUM ANALYZE`)
		turns = append(turns, &turn{n: n, db: db, conv: conv, runs: map[string][]time.Duration{}})
	}
	queries := []struct{ what, sql string }{
		{"ledger_problems", `SELECT count(*) FROM convo_private.ledger_problems($1::uuid)`},
		{"self_check", `SELECT count(*) FROM convo.self_check() WHERE $1::text IS NOT NULL AND NOT ok`},
	}
	for i := 0; i < 9; i++ {
		for _, tn := range turns {
			for _, q := range queries {
				start := time.Now()
				var bad int64
				if err := tn.db.QueryRow(context.Background(), q.sql, tn.conv).Scan(&bad); err != nil {
					t.Fatal(err)
				}
				tn.runs[q.what] = append(tn.runs[q.what], time.Since(start))
				if bad != 0 {
					t.Fatalf("%s found %d problems", q.what, bad)
				}
			}
		}
	}
	for _, q := range queries {
		for _, tn := range turns {
			runs := tn.runs[q.what]
			sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
			t.Logf("%s, n = %d: fastest %v, median %v", q.what, tn.n, runs[0].Round(time.Millisecond/10),
				runs[len(runs)/2].Round(time.Millisecond/10))
		}
	}
}
