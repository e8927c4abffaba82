package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes this machine: CPUs, their model and the memory.
func Machine() string {
	model, mem := "", ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf(", %.1f GiB memory", float64(kb)/(1<<20))
				break
			}
		}
		f.Close()
	}
	if model != "" {
		model = " (" + model + ")"
	}
	return fmt.Sprintf("%d CPUs%s%s", runtime.NumCPU(), model, mem)
}

// value prints a row's value in its unit.
func value(v float64, unit string) string {
	switch unit {
	case "µs":
		return fmtDuration(time.Duration(v * float64(time.Microsecond)))
	case "bytes":
		return fmt.Sprintf("%.0f B", v)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

// Table is the results table in Markdown: each row met or missed against
// its goal, the most its ratio may be.
func (res *Result) Table() string {
	var b strings.Builder
	b.WriteString("| workload | pgconvo | baseline | ratio | goal | result |\n|---|---|---|---|---|---|\n")
	for _, row := range res.Rows {
		fmt.Fprintf(&b, "| %s / %s | %s | %s | %.2fx | %s | %s |\n",
			row.Workload, row.Baseline, value(row.A, row.Unit), value(row.B, row.Unit), row.Ratio, row.Goal,
			verdict(row.Ratio, row.Goal, 1))
	}
	return b.String()
}

// GoalsTable is every workload with a goal, measured both ways: the Go
// pairs' ratio (the commit's flush as the run's fsync says, and the
// driver's round trips, on both sides) and the application's transaction
// shape's (pgbench -M prepared, fsync off), each met or missed against the
// goal.
func (res *Result) GoalsTable() string {
	byKey := func(rows []Row) map[string]Row {
		m := map[string]Row{}
		for _, r := range rows {
			if r.Key != "" {
				m[r.Key] = r
			}
		}
		return m
	}
	goRows, shaped := byKey(res.Rows), byKey(res.Shaped)
	cell := func(r Row, ok bool, goal string) string {
		if !ok {
			return "not measured"
		}
		return fmt.Sprintf("%.2fx (%s vs %s), %s", r.Ratio, value(r.A, r.Unit), value(r.B, r.Unit), verdict(r.Ratio, goal, 1))
	}
	var b strings.Builder
	fsync := map[bool]string{true: "fsync on", false: "fsync off"}[res.Config.Fsync]
	fmt.Fprintf(&b, "| workload / baseline | goal | Go pairs (%s) | the application's transaction shape (pgbench, fsync off) |\n|---|---|---|---|\n", fsync)
	for _, key := range goalOrder {
		g := goals[key]
		gr, gok := goRows[key]
		sr, sok := shaped[key]
		if key == "bytes" {
			// One measurement: the bytes do not depend on the way.
			sr, sok = gr, gok
		}
		fmt.Fprintf(&b, "| %s / %s | %s | %s | %s |\n", g.name, g.baseline, g.goal, cell(gr, gok, g.goal), cell(sr, sok, g.goal))
	}
	if res.NoPgbench != "" {
		b.WriteString("\n" + res.NoPgbench + ".\n")
	}
	return b.String()
}

// GrowthTable is the large-input cases in Markdown: each met or missed
// against its goal, the growth from N to 4N that linear (4x) or constant
// (1x) work has; a case meets it when it grows at most twice that, halfway
// (on a log scale) to the next power of N.
func (res *Result) GrowthTable() string {
	var b strings.Builder
	b.WriteString("| case | N | time | 4N | time | 4N / N | goal | result |\n|---|---|---|---|---|---|---|---|\n")
	for _, g := range res.Growth {
		name := g.Case
		if g.Note != "" {
			name += " (" + g.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %.1fx | %s | %s |\n", name, g.N1, fmtDuration(g.T1), g.N2, fmtDuration(g.T2),
			g.Factor(), g.Goal, verdict(g.Factor(), g.Goal, 2))
	}
	return b.String()
}

// verdict says whether got (a ratio) meets goal ("1.5x"): met when got is
// at most slack times the goal, missed otherwise, "no goal" when there is
// none or it does not read as a ratio.
func verdict(got float64, goal string, slack float64) string {
	limit, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(goal), "x"), 64)
	if err != nil || limit <= 0 {
		return "no goal"
	}
	if got <= limit*slack {
		return "met"
	}
	return "missed"
}

// Comparable says, when the run was smaller than the default, that its
// numbers cannot be compared with BENCHMARKS.md's, whose entries are
// default runs, and why; "" for a run at the default scale.
func (res *Result) Comparable() string {
	c, d := res.Config, DefaultConfig()
	var smaller []string
	for _, x := range []struct {
		what      string
		got, want float64
	}{
		{"conversations", float64(c.Conversations), float64(d.Conversations)},
		{"messages on each path", float64(c.Length), float64(d.Length)},
		{"pairs per connection", float64(c.Iterations), float64(d.Iterations)},
		{"connections per pair", float64(c.Clients), float64(d.Clients)},
		{"concurrent clients", float64(c.ManyClients), float64(d.ManyClients)},
		{"throughput phases", float64(c.Phases), float64(d.Phases)},
		{"seconds per phase", c.PhaseTime.Seconds(), d.PhaseTime.Seconds()},
		{"conversations written to", float64(c.WriteConversations), float64(d.WriteConversations)},
		{"conversations per chart depth", float64(c.ChartConversations), float64(d.ChartConversations)},
		{"large-input scale", c.LargeScale, d.LargeScale},
	} {
		if x.got < x.want {
			smaller = append(smaller, fmt.Sprintf("%s %s (default %s)", x.what, num(x.got), num(x.want)))
		}
	}
	if len(smaller) == 0 {
		return ""
	}
	return fmt.Sprintf("**Not comparable with BENCHMARKS.md.** This run is smaller than the default: %s. "+
		"Smaller data and fewer samples move the medians and ratios, so compare it only with runs of the same flags; "+
		"BENCHMARKS.md's entries are default runs (`go run ./cmd/bench`).\n", strings.Join(smaller, ", "))
}

// num prints n without a fraction when it has none.
func num(n float64) string {
	return strconv.FormatFloat(n, 'f', -1, 64)
}

// BytesTable is the bytes per message relation by relation, in Markdown.
func (res *Result) BytesTable() string {
	var b strings.Builder
	b.WriteString("| relation | bytes per message |\n|---|---|\n")
	for _, r := range res.Bytes {
		fmt.Fprintf(&b, "| `%s` | %.0f |\n", r.Relation, r.PerMessage)
	}
	return b.String()
}

// ChartTable is the chart's numbers in Markdown.
func (res *Result) ChartTable() string {
	var b strings.Builder
	b.WriteString("| messages on the path | `path`, never edited | `path`, an edit every 10 turns | flat list |\n|---|---|---|---|\n")
	for _, p := range res.Chart {
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", p.Depth, value(p.Linear, "µs"), value(p.Edited, "µs"), value(p.Flat, "µs"))
	}
	return b.String()
}

// Setup says what the run was: the data, the server and the method.
func (res *Result) Setup() string {
	c := res.Config
	return fmt.Sprintf(`Data: %d conversations whose live paths have %d messages of 200-character text (every other one edited every 10 turns, so %d branch points on its path; a tenth with a settled call of an effectful tool every 20 turns), %d messages in all, loaded through the API in %.0f s.

Server: %s, its own, started for the run.

Each latency pair runs on %d connections as a login member of convo_app, every transaction naming the owner first (SET LOCAL, as set_config('convo.owner_id', ..., true)); pgconvo and its baseline alternate, pair by pair, in the same run; a row shows medians over %d samples a side (an agent turn: %d) and their ratio, pgconvo over the baseline. The baselines are plain tables in a schema of their own, %s, with no trigger of pgconvo's.
`, c.Conversations, c.Length, max(c.Length-2, 0)/10+1, res.Messages, res.LoadTime.Seconds(),
		res.Server, c.Clients, c.Clients*c.Iterations, c.Clients*max(c.Iterations/4, 2), "`bench`")
}

// Markdown is the whole report: command, machine, setup, the table, the
// chart's numbers (and the SVG, as chartFile) and the growth cases.
func (res *Result) Markdown(command, chartFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# pgconvo benchmark\n\n`%s`, %s, %.0f s.\n\nMachine: %s.\n\n",
		command, time.Now().UTC().Format("2006-01-02 15:04 UTC"), res.Elapsed.Seconds(), Machine())
	if note := res.Comparable(); note != "" {
		b.WriteString(note + "\n")
	}
	b.WriteString(res.Setup() + "\n")
	b.WriteString("A row meets its goal when its ratio, pgconvo over the baseline (for throughput, the baseline's over pgconvo's), is at most the goal.\n\n")
	b.WriteString(res.Table())
	fmt.Fprintf(&b, "\n## Every goal, both ways\n\nThe same workloads in the application's transaction shape too: BEGIN, the owner set for the transaction (in one statement that also picks the conversation by number, on both sides), the call, COMMIT, sent by `pgbench -M prepared` as the login member of convo_app with fsync, synchronous_commit and full_page_writes off (for these rows only), so that what the database does is not diluted by the disk's flush and the driver's round trips. Each side runs the same count of transactions a client, alternating, in as many rounds as the throughput phases; a ratio is of the medians of every transaction's latency a side, from pgbench's per-transaction logs (many clients: of the rounds' throughputs, the baseline's over pgconvo's). Each pgbench client runs %d transactions first, uncounted, as its connection's warm-up: a new connection compiles each PL/pgSQL function and plans each of its statements afresh for its first five runs, where an application's pooled connection runs thousands.\n\n", pgbenchWarmup)
	b.WriteString(res.GoalsTable())
	b.WriteString("\n## What each piece costs\n\nEach write, an effectful call (beside the same message in text) and the path read timed in-server, as the login member of convo_app with the owner set, with one piece removed at a time (a function recreated without a statement, a constraint or an index dropped, a setting), inside a subtransaction that is rolled back; every piece in every round, in a rotated order. A piece's cost is pgconvo's median less the median without it; 'everything' removes every piece at once; 'bare' is the baseline: a write's bare statement, the same message in text for the effectful call, the flat list's rows made text as they would be sent for a read. The internal/bench/floor.sql file lists each piece's statements.\n")
	b.WriteString(res.FloorTable())
	b.WriteString("\n## Bytes per message, relation by relation\n\nThe bytes row's sum: each table, index and TOAST table of pgconvo's of a byte a message or more, over the messages stored.\n\n")
	b.WriteString(res.BytesTable())
	b.WriteString("\n## Function calls per API call\n\nCounted by PostgreSQL (`track_functions = all`, `pg_stat_xact_user_functions`) in one transaction each, as the application's role: every PL/pgSQL or SQL function of pgconvo's that runs, the API function, its helpers and every trigger function, once per call.\n\n")
	b.WriteString(res.CallTable())
	fmt.Fprintf(&b, "\n## `path` against depth\n\n![path latency against depth](%s)\n\n", chartFile)
	b.WriteString(res.ChartTable())
	b.WriteString("\n## Large inputs, N and 4N\n\nOne run each (a deep call: the median of 7, each after a user turn; `alternatives`: the median of 3), as the application. Linear work takes about 4x as long at 4N, quadratic about 16x; a call's cost should not depend on the conversation's depth at all (1x). A case meets its goal when 4N takes at most twice the goal's growth: halfway, on a log scale, to the next power of N.\n\n")
	b.WriteString(res.GrowthTable())
	return b.String()
}
