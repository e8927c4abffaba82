package bench

import (
	"context"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// tinyConfig is the benchmark at a scale that runs in seconds: every
// workload, the chart and the large-input cases, a few of everything.
func tinyConfig() Config {
	cfg := DefaultConfig()
	cfg.Conversations = 6
	cfg.Length = 24
	cfg.Fsync = false
	cfg.Iterations = 8
	cfg.ManyClients = 4
	cfg.Phases = 1
	cfg.PhaseTime = 200 * time.Millisecond
	cfg.WriteConversations = 2
	cfg.ChartDepths = []int{12, 24, 48}
	cfg.ChartConversations = 2
	cfg.LargeScale = 0.01
	return cfg
}

// TestRunTiny runs the whole benchmark on a tiny scale, so that the
// command's code cannot rot: every row, chart point and growth case is
// measured and lands in the report and the chart.
func TestRunTiny(t *testing.T) {
	if _, err := localpg.FindBinaries(); err != nil {
		t.Fatalf("no PostgreSQL server binaries (install them, as .ci/run does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := tinyConfig()
	cfg.Log = testLog{t}
	var held string
	cfg.Hold = func(url string) {
		held = url
		checkFloorPieces(t, url)
		checkLedgerRows(t, url)
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(held, database) {
		t.Errorf("Hold got %q, want the URL of database %s", held, database)
	}
	if res.Messages < int64(cfg.Conversations*cfg.Length) {
		t.Errorf("%d messages loaded, want at least %d", res.Messages, cfg.Conversations*cfg.Length)
	}
	if len(res.Rows) != 15 {
		t.Errorf("%d rows, want one per workload of BENCHMARKS.md's table (8), 16 clients with convo.notify off, the sidebar's two pages, the wide flat list and path against it twice, the agent turn with the ledger's rows alone", len(res.Rows))
	}
	// The ablation: every piece of floor.sql timed (a piece whose statement
	// no longer fits its function fails the run), five workloads.
	workloads := map[string]int{}
	for _, f := range res.Floor {
		workloads[f.Workload]++
		if !(f.Micros > 0) {
			t.Errorf("ablation row %+v, want a positive median", f)
		}
	}
	var sum, total float64
	seen := map[string]bool{}
	for _, b := range res.Bytes {
		sum += b.PerMessage
		seen[b.Relation] = true
	}
	for _, row := range res.Rows {
		if row.Key == "bytes" {
			total = row.A
		}
	}
	if !seen["convo.messages"] || !seen["convo.messages_pkey"] || sum > total+0.5 || sum < total/2 {
		t.Errorf("bytes by relation %+v (sum %.0f), want the messages' table and key among them, summing to at most the bytes row's %.0f", res.Bytes, sum, total)
	}
	if len(workloads) != 5 || workloads["append"] != 15 || workloads["edit_and_resend"] != 15 || workloads["path, edited"] != 7 ||
		workloads["a tool call"] != 9 {
		t.Errorf("ablation rows by workload %v, want append and edit_and_resend 15 each, the two path reads 7 each, a tool call 9", workloads)
	}
	if len(res.Calls) != 4 {
		t.Errorf("%d call counts, want 4 (append, edit, tool turn, import)", len(res.Calls))
	}
	for _, c := range res.Calls {
		if c.Calls < 1 || c.Distinct < 1 || c.Distinct > c.Calls {
			t.Errorf("call count %q: %+v, want at least the API function itself", c.Call, c)
		}
		t.Logf("%s: %d calls of %d functions", c.Call, c.Calls, c.Distinct)
	}
	for _, row := range res.Rows {
		if !(row.A > 0 && row.B > 0 && row.Ratio > 0) || row.Samples == 0 {
			t.Errorf("row %q: %+v, want positive measures", row.Workload, row)
		}
	}
	// Every goal measured both ways: pgbench is beside the server binaries
	// wherever .ci/run installs them.
	if pgbenchPath() == "" {
		t.Fatalf("no pgbench beside the server binaries: %s", res.NoPgbench)
	}
	if len(res.Shaped) != len(goalOrder)-1 {
		t.Errorf("%d rows in the application's transaction shape, want one per goal but the bytes (%d)", len(res.Shaped), len(goalOrder)-1)
	}
	for _, row := range res.Shaped {
		if !(row.A > 0 && row.B > 0 && row.Ratio > 0) || row.Samples == 0 || goals[row.Key].goal != row.Goal {
			t.Errorf("shaped row %q: %+v, want positive measures and its goal", row.Key, row)
		}
	}
	if both := res.GoalsTable(); strings.Contains(both, "not measured") || strings.Count(both, "\n") != len(goalOrder)+2 {
		t.Errorf("the goals table misses a measure:\n%s", both)
	}
	if len(res.Chart) != len(cfg.ChartDepths) {
		t.Errorf("%d chart points, want %d", len(res.Chart), len(cfg.ChartDepths))
	}
	if len(res.Growth) != 7 {
		t.Errorf("%d growth cases, want 7", len(res.Growth))
	}
	for _, g := range res.Growth {
		if g.T1 <= 0 || g.T2 <= 0 || g.N2 != 4*g.N1 {
			t.Errorf("growth case %q: %+v", g.Case, g)
		}
	}

	md := res.Markdown("go run ./cmd/bench", "chart.svg")
	for _, want := range []string{"| workload | pgconvo | baseline | ratio | goal |", "`edit_and_resend`",
		"bytes per message", "## Every goal, both ways", "## What each piece costs", "| the search index |", "| `convo.messages_pkey` |", "![path latency against depth](chart.svg)", "| 4N / N | goal |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	svg := SVGChart(res.Chart, "path <against> depth")
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Errorf("the chart is not well-formed XML: %v\n%s", err, svg)
	}
	if n := strings.Count(svg, "<polyline"); n != 3 {
		t.Errorf("the chart has %d lines, want 3 (two trees and the flat list)", n)
	}
}

// testLog writes the run's progress to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestGrowthFactor: 4N taking 16 times as long as N is quadratic.
func TestGrowthFactor(t *testing.T) {
	g := Growth{N1: 10, N2: 40, T1: time.Second, T2: 16 * time.Second}
	if got := g.Factor(); got != 16 {
		t.Fatalf("Factor() = %v, want 16", got)
	}
}
