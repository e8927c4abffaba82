package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// The application's transaction shape, measured by pgbench: each
// transaction is BEGIN, the owner set for it, the one call, COMMIT, sent by
// pgbench -M prepared as the login member of convo_app, with fsync,
// synchronous_commit and full_page_writes off, so that the CPU the
// database spends counts and not the disk. The Go pairs (the table above
// it) keep the commit's flush and the driver's round trips on both sides,
// which dilutes the ratios; these rows leave only what the database does.
//
// A pgbench variable holds numbers only, so a transaction picks its
// conversation by number from bench.picks, in the statement that sets the
// owner (one statement where the application sends SET LOCAL): the same
// statement on both sides.

// picksTable numbers the conversations of each set for pgbench.
const picksTable = `
CREATE TABLE bench.picks (
    set_name        text NOT NULL,
    k               int  NOT NULL,
    conversation_id uuid NOT NULL,
    owner_id        text NOT NULL,
    target_id       uuid,
    PRIMARY KEY (set_name, k)
);
GRANT SELECT ON bench.picks TO ` + appRole

// shapedText is one text part, as the Go pairs' textParts; no colon in it is
// followed by a name, which pgbench would read as a variable.
var shapedText = `'[{"type": "text", "text": "` + text + `"}]'::jsonb`

// pick is the first two statements of every script: a random conversation
// of set, its owner named for the transaction.
func pick(set string, n int) string {
	return fmt.Sprintf("\\set k random(1, %d)\n", n) + again(set)
}

// pickOwn is pick where no two of clients clients ever write to one
// conversation at once (as the Go pairs' own): each client's own share of
// set's n.
func pickOwn(set string, n, clients int) string {
	return fmt.Sprintf("\\set k 1 + :client_id + %d * random(0, %d)\n", clients, max(n/clients-1, 0)) + again(set)
}

// again begins a transaction on the conversation the script picked last:
// the next of an agent turn's.
func again(set string) string {
	return fmt.Sprintf(`BEGIN;
SELECT set_config('convo.owner_id', owner_id, true) AS owner, conversation_id AS c, target_id AS t
  FROM bench.picks WHERE set_name = '%s' AND k = :k \gset
`, set)
}

// shapedScripts are the pgbench scripts of each pair, pgconvo's and the
// baseline's, by set: l never edited, e edited, w the conversations
// written to.
func shapedScripts(sizes map[string]int, clients int) []shapedPair {
	l, e, w := sizes["linear"], sizes["edited"], sizes["writes"]
	read := func(set string, n int, query string) string {
		return pick(set, n) + query + ";\nCOMMIT;\n"
	}
	const path = `SELECT * FROM convo.path(:c)`
	const flat = `SELECT seq, role, parts, created_at FROM bench.flat WHERE conversation_id = :c ORDER BY seq`
	wide := strings.ReplaceAll(wideRead, "$1", ":c")
	appendAPI := `SELECT convo.append_message(:c, 'user', ` + shapedText + `)`
	appendBase := strings.NewReplacer("$1", ":c", "$2", "'user'", "$3", shapedText).Replace(appendFloor)
	editAPI := `SELECT convo.edit_and_resend(:c, :t, ` + shapedText + `)`
	editBase := strings.NewReplacer("$1", ":c", "$2", ":t", "$3", shapedText).Replace(editFloor)
	write := func(query string) string {
		return pickOwn("writes", w, clients) + query + ";\nCOMMIT;\n"
	}
	many := func(query string) string {
		return pick("writes", w) + query + ";\nCOMMIT;\n"
	}
	tx := func(first bool, role string) string {
		begin := again("writes")
		if first {
			begin = pickOwn("writes", w, clients)
		}
		return begin + `SELECT convo.append_message(:c, '` + role + `', ` + shapedText + ");\nCOMMIT;\n"
	}
	// The agent turn: user text; the tool_use and its decision, which must
	// be execute (\gset fails the client on no row); the settlement and the
	// tool result; the answer. A random amount keeps each call's scope key
	// its own, as the Go pair's does.
	turn := tx(true, "user") + again("writes") + `\set call random(1, 1000000000000)
SELECT convo.append_message(:c, 'assistant', jsonb_build_array(jsonb_build_object('type', 'tool_use',
       'id', 'toolu_' || :call::bigint, 'name', 'bench_purchase',
       'input', jsonb_build_object('amount_minor', :call::bigint, 'currency', 'EUR'))));
SELECT effect_id AS effect FROM convo.effect_for_call(:c, 'toolu_' || :call::bigint) WHERE decision = 'execute' \gset
COMMIT;
` + again("writes") + `SELECT convo.settle_effect(:c, :effect, 'applied', p_external_ref => 'ch_' || :call::bigint);
SELECT convo.append_message(:c, 'tool', jsonb_build_array(jsonb_build_object('type', 'tool_result',
       'tool_use_id', 'toolu_' || :call::bigint, 'content', '` + text + `')));
COMMIT;
` + tx(false, "assistant")
	textTurn := tx(true, "user") + tx(false, "assistant") + tx(false, "tool") + tx(false, "assistant")
	return []shapedPair{
		{key: "path-linear", a: read("linear", l, path), b: read("linear", l, flat)},
		{key: "path-edited", a: read("edited", e, path), b: read("edited", e, flat)},
		{key: "flat-wide", a: read("linear", l, wide), b: read("linear", l, flat)},
		{key: "path-linear-wide", a: read("linear", l, path), b: read("linear", l, wide)},
		{key: "path-edited-wide", a: read("edited", e, path), b: read("edited", e, wide)},
		{key: "path_at", a: read("edited", e, `SELECT * FROM convo.path_at(:c, now())`), b: read("edited", e, path)},
		{key: "edit", a: write(editAPI), b: write(editBase), write: true},
		{key: "append", a: write(appendAPI), b: write(appendBase), write: true},
		{key: "append-many", a: many(appendAPI), b: many(appendBase), write: true, many: true},
		{key: "append-many-quiet", a: many(appendAPI), b: many(appendBase), write: true, many: true, quiet: true},
		{key: "agent", a: turn, b: textTurn, write: true, turn: true},
		{key: "agent-rows", a: turn, b: textTurn, write: true, turn: true, ledgerRows: true},
	}
}

// shapedPair is one pair of pgbench scripts.
type shapedPair struct {
	key, a, b   string
	write, many bool // a write's script is one call on a written conversation; many: ManyClients at once
	quiet, turn bool // quiet: convo.notify off; turn: the scripts are whole agent turns
	ledgerRows  bool // the ledger's rows alone in place of pgconvo's decision (withLedgerRows)
}

// savePicks numbers the sets' conversations for the scripts, and the edit's
// target (the last user message) of each conversation written to.
func (r *run) savePicks(ctx context.Context, sets map[string][]conversation, targets map[string]string) error {
	if _, err := r.env.admin.Exec(ctx, picksTable); err != nil {
		return fmt.Errorf("creating bench.picks: %w", err)
	}
	for name, set := range sets {
		for k, c := range set {
			var target any
			if t, ok := targets[c.id]; ok && name == "writes" {
				target = t
			}
			if _, err := r.env.admin.Exec(ctx, `INSERT INTO bench.picks VALUES ($1, $2, $3, $4, $5)`,
				name, k+1, c.id, c.owner, target); err != nil {
				return fmt.Errorf("numbering the conversations for pgbench: %w", err)
			}
		}
	}
	return nil
}

// pgbenchPath is the pgbench beside the server binaries, or "" without one.
func pgbenchPath() string {
	dir, err := localpg.FindBinaries()
	if err != nil {
		return ""
	}
	p := filepath.Join(dir, "pgbench")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// shaped measures the reads' pairs or the writes' (writes) in the application's transaction shape: the
// server switched to fsync off for the while (and back), each pair's sides
// alternating in Phases rounds of the same count of transactions a client.
// Latency rows compare the medians of every transaction's latency a side
// (pgbench's per-transaction logs), throughput rows the medians of the
// rounds' transactions per second.
func (r *run) shaped(ctx context.Context, sizes map[string]int, writes bool) ([]Row, error) {
	bin := pgbenchPath()
	if bin == "" {
		return nil, fmt.Errorf("no pgbench beside the server binaries (Debian: the postgresql-15 package has it)")
	}
	if r.cfg.Fsync {
		if err := r.setFsync(ctx, false); err != nil {
			return nil, err
		}
		defer r.setFsync(context.WithoutCancel(ctx), true)
	}
	dir, err := os.MkdirTemp("", "pgconvo-pgbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable", r.env.srv.Port(), database, appRole)
	rounds := max(r.cfg.Phases, 1)
	var rows []Row
	for _, p := range shapedScripts(sizes, r.cfg.Clients) {
		if p.write != writes {
			continue
		}
		clients, count := r.cfg.Clients, max(r.cfg.Iterations/rounds, 2)
		if p.many {
			clients, count = r.cfg.ManyClients, max(r.cfg.Iterations/rounds, 2)
		}
		if p.turn {
			count = max(count/4, 2)
		}
		var as, bs []pgbenchRun
		measure := func() error {
			for round := 0; round < rounds; round++ {
				order := []string{p.a, p.b}
				if round%2 == 1 {
					order = []string{p.b, p.a}
				}
				for i, script := range order {
					res, err := runPgbench(ctx, bin, dir, conninfo, script, clients, count, p.quiet)
					if err != nil {
						return fmt.Errorf("pgbench, %s: %w", p.key, err)
					}
					if (i == 0) == (round%2 == 0) {
						as = append(as, res)
					} else {
						bs = append(bs, res)
					}
				}
			}
			return nil
		}
		if p.ledgerRows {
			err = r.withLedgerRows(ctx, measure)
		} else {
			err = measure()
		}
		if err != nil {
			return nil, err
		}
		row := shapedRow(p, as, bs, count*clients*rounds)
		r.logRow(row)
		rows = append(rows, row)
	}
	return rows, nil
}

// setFsync turns fsync, synchronous_commit and full_page_writes on or off
// for the whole server (each is reloadable) and waits for the reload.
func (r *run) setFsync(ctx context.Context, on bool) error {
	v := map[bool]string{true: "on", false: "off"}[on]
	for _, s := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		if _, err := r.env.admin.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", s, v)); err != nil {
			return fmt.Errorf("setting %s %s: %w", s, v, err)
		}
	}
	if _, err := r.env.admin.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return fmt.Errorf("reloading the configuration: %w", err)
	}
	// A new connection reads the reloaded file; wait until one says so.
	for i := 0; i < 100; i++ {
		var got string
		if err := r.env.admin.QueryRow(ctx, `SELECT current_setting('fsync')`).Scan(&got); err != nil {
			return err
		}
		if got == v {
			return nil
		}
		r.env.admin.Reset()
	}
	return fmt.Errorf("fsync is still not %s after a reload", v)
}

// pgbenchRun is what one pgbench run measured past each connection's
// warm-up: every transaction's latency (from its per-transaction log) and
// the throughput.
type pgbenchRun struct {
	latencies []float64 // µs
	tps       float64
}

// pgbenchWarmup is how many transactions each pgbench client runs first,
// uncounted: a new connection compiles each PL/pgSQL function at its first
// call and plans each of its statements afresh for its first five runs, and
// an agent turn runs most of its statements once (a new connection's first
// turn took 10 to 15 times a later one's, its next six up to 3 times). An application's pooled
// connection runs thousands of transactions, as the Go pairs' pools do.
const pgbenchWarmup = 10

var pgbenchDone = regexp.MustCompile(`number of transactions actually processed: (\d+)/(\d+)`)

// runPgbench runs script on clients connections, pgbenchWarmup and then
// count transactions (of the script) each, and reads the latency of every
// transaction past the warm-up and the throughput from the instant every
// client had finished its warm-up to the run's end. A run that did not
// process every transaction (a client that failed) is an error, with
// pgbench's output.
func runPgbench(ctx context.Context, bin, dir, conninfo, script string, clients, count int, quiet bool) (pgbenchRun, error) {
	f, err := os.CreateTemp(dir, "script-*.sql")
	if err != nil {
		return pgbenchRun{}, err
	}
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return pgbenchRun{}, err
	}
	f.Close()
	logs, err := os.MkdirTemp(dir, "log-")
	if err != nil {
		return pgbenchRun{}, err
	}
	cmd := exec.CommandContext(ctx, bin, "-n", "-M", "prepared", "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(min(clients, 4)), "-t", strconv.Itoa(pgbenchWarmup+count), "-f", f.Name(),
		"-l", "--log-prefix", filepath.Join(logs, "tx"), conninfo)
	cmd.Dir = logs
	cmd.Env = os.Environ()
	if quiet {
		cmd.Env = append(cmd.Env, "PGOPTIONS=-c convo.notify=off")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return pgbenchRun{}, fmt.Errorf("%w: %s", err, tail(out, 20))
	}
	if done := pgbenchDone.FindSubmatch(out); done == nil || string(done[1]) != string(done[2]) {
		return pgbenchRun{}, fmt.Errorf("not every transaction was processed: %s", tail(out, 20))
	}
	// Each line of a per-transaction log: client, its transaction's number,
	// latency in µs, script, and the epoch seconds and µs at which
	// the transaction ended.
	files, err := filepath.Glob(filepath.Join(logs, "tx.*"))
	if err != nil {
		return pgbenchRun{}, err
	}
	// A client's transactions are in its thread's log, in their order.
	seen, warmEnd := map[int]int{}, map[int]float64{}
	var ends []float64 // when each measured transaction ended
	var res pgbenchRun
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return pgbenchRun{}, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			fs := strings.Fields(line)
			if len(fs) < 6 {
				continue
			}
			var v [6]float64
			for i := range v {
				if i == 3 {
					continue // the script's number
				}
				if v[i], err = strconv.ParseFloat(fs[i], 64); err != nil {
					return pgbenchRun{}, fmt.Errorf("pgbench's log %s: %q: %w", name, line, err)
				}
			}
			client, end := int(v[0]), v[4]+v[5]/1e6
			seen[client]++
			if seen[client] <= pgbenchWarmup {
				warmEnd[client] = max(warmEnd[client], end)
				continue
			}
			res.latencies = append(res.latencies, v[2])
			ends = append(ends, end)
		}
	}
	if len(res.latencies) != clients*count || len(warmEnd) != clients {
		return pgbenchRun{}, fmt.Errorf("pgbench's logs hold %d transactions past %d clients' warm-ups, want %d", len(res.latencies), len(warmEnd), clients*count)
	}
	// From the last warm-up's end to the last transaction's: the client
	// that warmed up last ran measured transactions after it, so the while
	// holds at least one.
	from, to, n := 0.0, 0.0, 0
	for _, e := range warmEnd {
		from = max(from, e)
	}
	for _, e := range ends {
		to = max(to, e)
		if e > from {
			n++
		}
	}
	res.tps = float64(n) / (to - from)
	return res, nil
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// shapedRow makes a row of a pair's rounds: the medians of every
// transaction's latency a side (for many clients, of the rounds'
// throughputs).
func shapedRow(p shapedPair, as, bs []pgbenchRun, samples int) Row {
	median := func(v []float64) float64 {
		v = append([]float64(nil), v...)
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	all := func(rs []pgbenchRun) (lat, tps []float64) {
		for _, r := range rs {
			lat, tps = append(lat, r.latencies...), append(tps, r.tps)
		}
		return lat, tps
	}
	la, ta := all(as)
	lb, tb := all(bs)
	g := goals[p.key]
	if p.many {
		a, b := median(ta), median(tb)
		return Row{Key: p.key, Workload: g.name + fmt.Sprintf(" (throughput; median latency %.0f µs vs %.0f µs)", median(la), median(lb)),
			Baseline: g.baseline, A: a, B: b, Unit: "tx/s", Ratio: b / a, Samples: samples, Goal: g.goal}
	}
	a, b := median(la), median(lb)
	return Row{Key: p.key, Workload: g.name, Baseline: g.baseline, A: a, B: b, Unit: "µs", Ratio: a / b, Samples: samples, Goal: g.goal}
}
