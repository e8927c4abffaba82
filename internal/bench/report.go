package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
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

// Table is the results table in Markdown.
func (res *Result) Table() string {
	var b strings.Builder
	b.WriteString("| workload | pgconvo | baseline | ratio | goal |\n|---|---|---|---|---|\n")
	for _, row := range res.Rows {
		fmt.Fprintf(&b, "| %s / %s | %s | %s | %.2fx | %s |\n",
			row.Workload, row.Baseline, value(row.A, row.Unit), value(row.B, row.Unit), row.Ratio, row.Goal)
	}
	return b.String()
}

// GrowthTable is the large-input cases in Markdown.
func (res *Result) GrowthTable() string {
	var b strings.Builder
	b.WriteString("| case | N | time | 4N | time | 4N / N | goal |\n|---|---|---|---|---|---|---|\n")
	for _, g := range res.Growth {
		name := g.Case
		if g.Note != "" {
			name += " (" + g.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %.1fx | %s |\n", name, g.N1, fmtDuration(g.T1), g.N2, fmtDuration(g.T2), g.Factor(), g.Goal)
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
	fmt.Fprintf(&b, "# pgconvo benchmark\n\n`%s`, %s, %.0f s.\n\nMachine: %s.\n\n%s\n",
		command, time.Now().UTC().Format("2006-01-02 15:04 UTC"), res.Elapsed.Seconds(), Machine(), res.Setup())
	b.WriteString(res.Table())
	b.WriteString("\n## Function calls per API call\n\nCounted by PostgreSQL (`track_functions = all`, `pg_stat_xact_user_functions`) in one transaction each, as the application's role: every PL/pgSQL or SQL function of pgconvo's that runs, the API function, its helpers and every trigger function, once per call.\n\n")
	b.WriteString(res.CallTable())
	fmt.Fprintf(&b, "\n## `path` against depth\n\n![path latency against depth](%s)\n\n", chartFile)
	b.WriteString(res.ChartTable())
	b.WriteString("\n## Large inputs, N and 4N\n\nOne run each (a deep call: the median of 7, each after a user turn; `alternatives`: the median of 3), as the application. Linear work takes about 4x as long at 4N, quadratic about 16x; a call's cost should not depend on the conversation's depth at all (1x).\n\n")
	b.WriteString(res.GrowthTable())
	return b.String()
}
