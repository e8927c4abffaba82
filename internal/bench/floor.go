package bench

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strings"
)

// floorSQL is the ablation of floor.sql: each write, an effectful call and
// the path read timed in-server with one piece removed at a time.
//
//go:embed floor.sql
var floorSQL string

// FloorCost is one row of the ablation: a workload's median in-server time
// with a piece removed ("pgconvo": nothing removed, "everything": every
// piece at once, "bare": the baseline's statement).
type FloorCost struct {
	Workload, Piece string
	Micros          float64
}

// floorCosts runs floor.sql's ablation on the bench's conversations (the
// picks pgbench uses), as the application's login role: rounds rounds of
// calls calls a piece, each round a transaction, the tables the writes
// touch vacuumed after each. Every piece it removes and every row it writes
// is rolled back. It answers each piece's median, in floor_pieces' order.
func (r *run) floorCosts(ctx context.Context, rounds, calls int) ([]FloorCost, error) {
	if _, err := r.env.admin.Exec(ctx, floorSQL); err != nil {
		return nil, fmt.Errorf("creating the ablation's functions: %w", err)
	}
	samples := map[[2]string][]float64{}
	var order [][2]string
	for round := 1; round <= rounds; round++ {
		rows, err := r.env.admin.Query(ctx, `SELECT workload, piece, us FROM bench.floor_round($1, $2, $3, $4::jsonb)`,
			round, calls, appRole, textParts)
		if err != nil {
			return nil, fmt.Errorf("the ablation: %w", err)
		}
		for rows.Next() {
			var k [2]string
			var us float64
			if err := rows.Scan(&k[0], &k[1], &us); err != nil {
				rows.Close()
				return nil, err
			}
			if _, ok := samples[k]; !ok {
				order = append(order, k)
			}
			samples[k] = append(samples[k], us)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("the ablation: %w", err)
		}
		// The rolled-back rows' index entries, gone before the next round.
		if _, err := r.env.admin.Exec(ctx, `VACUUM (INDEX_CLEANUP ON) convo.messages, convo.conversations,
			convo.conversation_head_log, convo.live_path, convo_private.message_search, convo.keyed_parts,
			convo.tool_effects, convo.tool_effect_calls, convo.tool_effect_events, bench.messages,
			bench.conversations, bench.head_log`); err != nil {
			return nil, fmt.Errorf("vacuuming after an ablation round: %w", err)
		}
	}
	out := make([]FloorCost, 0, len(order))
	for _, k := range order {
		s := samples[k]
		sort.Float64s(s)
		out = append(out, FloorCost{Workload: k[0], Piece: k[1], Micros: (s[(len(s)-1)/2] + s[len(s)/2]) / 2})
	}
	return out, nil
}

// floorGoals ties each ablated workload to its goal's key, for the
// allowance: what the goal leaves over the baseline in the application's
// transaction shape.
var floorGoals = map[string]string{
	"append": "append", "edit_and_resend": "edit", "path, never edited": "path-linear", "path, edited": "path-edited",
	"a tool call": "agent",
}

// FloorTable is the ablation in Markdown: for each workload, its time with
// each piece removed and what the piece costs (the difference from
// pgconvo's), also as a share of the baseline's statement; then what the
// goal allows over the baseline in the application's transaction shape
// (pgbench), beside what pgconvo costs over it in-server.
func (res *Result) FloorTable() string {
	var b strings.Builder
	shaped := map[string]Row{}
	for _, r := range res.Shaped {
		shaped[r.Key] = r
	}
	byWorkload := map[string][]FloorCost{}
	var order []string
	for _, f := range res.Floor {
		if _, ok := byWorkload[f.Workload]; !ok {
			order = append(order, f.Workload)
		}
		byWorkload[f.Workload] = append(byWorkload[f.Workload], f)
	}
	for _, w := range order {
		var all, bare float64
		for _, f := range byWorkload[w] {
			switch f.Piece {
			case "pgconvo":
				all = f.Micros
			case "bare":
				bare = f.Micros
			}
		}
		fmt.Fprintf(&b, "\n**%s**: pgconvo %s in-server, the baseline %s.", w, value(all, "µs"), value(bare, "µs"))
		if s, ok := shaped[floorGoals[w]]; ok {
			g := goals[floorGoals[w]]
			limit := 0.0
			fmt.Sscanf(strings.TrimSuffix(g.goal, "x"), "%g", &limit)
			if floorGoals[w] == "agent" {
				// The call is one of the turn's four transactions.
				fmt.Fprintf(&b, " In the application's shape (pgbench) the turn in text took %s, so the goal (%s) leaves the agent turn %s over it; it took %s over it there. This call is one of its four transactions; in-server it cost %s more than the same message in text.",
					value(s.B, "µs"), g.goal, value((limit-1)*s.B, "µs"), value(s.A-s.B, "µs"), value(all-bare, "µs"))
				if rows, ok := shaped["agent-rows"]; ok {
					fmt.Fprintf(&b, " With the ledger's rows alone, nothing decided (agent-rows), the turn took %s over its text turn there (%.2fx), %.0f%% of what the goal leaves.",
						value(rows.A-rows.B, "µs"), rows.Ratio, 100*(rows.A-rows.B)/((limit-1)*rows.B))
				}
			} else {
				fmt.Fprintf(&b, " In the application's shape (pgbench) the baseline took %s, so the goal (%s) leaves pgconvo %s over it; it took %s over it there, and %s in-server.",
					value(s.B, "µs"), g.goal, value((limit-1)*s.B, "µs"), value(s.A-s.B, "µs"), value(all-bare, "µs"))
			}
		}
		b.WriteString("\n\n| piece removed | median | the piece's cost | as a share of the baseline |\n|---|---|---|---|\n")
		for _, f := range byWorkload[w] {
			cost, share := "", ""
			if f.Piece != "pgconvo" && f.Piece != "bare" && bare > 0 {
				cost = value(all-f.Micros, "µs")
				share = fmt.Sprintf("%.0f%%", 100*(all-f.Micros)/bare)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.Piece, value(f.Micros, "µs"), cost, share)
		}
	}
	return b.String()
}
