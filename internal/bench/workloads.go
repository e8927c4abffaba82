package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Row is one line of the results table: a workload, pgconvo's median and
// its baseline's, and their ratio (pgconvo over the baseline: above 1 is
// slower or bigger).
type Row struct {
	Key      string // the goal's, in goals; "" for a row without one there
	Workload string
	Baseline string
	A, B     float64 // medians (or throughputs, or sizes) in Unit
	Unit     string
	Ratio    float64
	Samples  int // per side
	Goal     string
}

// goal is a workload's name, baseline and goal: the most its ratio may be.
type goal struct{ name, baseline, goal string }

// goals are the workloads measured both ways, the Go pairs and the
// application's transaction shape (pgbench), by key, with the goal each
// way is held to.
var goals = map[string]goal{
	"path-linear":       {"`path`, never edited", "a flat `(conversation_id, seq)` list of the same rows", "1.2x"},
	"path-edited":       {"`path`, an edit every 10 turns", "the same flat list", "1.3x"},
	"path-linear-wide":  {"`path`, never edited", "the flat list with `path`'s ten columns", "1.2x"},
	"path-edited-wide":  {"`path`, an edit every 10 turns", "the flat list with `path`'s ten columns", "1.3x"},
	"flat-wide":         {"the flat list with `path`'s ten columns (never-edited conversations)", "the flat list of four (seq, role, parts, created_at)", ""},
	"path_at":           {"`path_at` at the latest instant (edited conversations)", "`path`", "1.3x"},
	"edit":              {"`edit_and_resend`", "minimal SQL: lock, insert the sibling, move the head, log it; one statement", "2x"},
	"append":            {"`append_message`", "minimal SQL: lock, insert the child, move the head, log it; one statement", "2x"},
	"append-many":       {"`append_message`, many clients", "the minimal append, as many clients", "2x"},
	"append-many-quiet": {"`append_message`, many clients, `convo.notify` off", "the minimal append, as many clients", "2x"},
	"agent":             {"an agent turn with an effectful tool call (4 transactions)", "the same 4 transactions, text in place of the call and the result", "1.3x"},
	"agent-rows":        {"the same agent turn with the ledger's rows alone (nothing decided: no argument check, fork point, key rule or re-run lookup; a plain statement a row)", "the same 4 transactions in text", ""},
	"bytes":             {"bytes per message, every table, index and copy (after VACUUM)", "the flat list", "2x"},
}

// goalOrder is the order the both-ways table prints them in.
var goalOrder = []string{"path-linear", "path-edited", "flat-wide", "path-linear-wide", "path-edited-wide", "path_at", "edit", "append", "append-many", "append-many-quiet", "agent", "agent-rows", "bytes"}

// spread picks the conversation of a client's iteration from set, spread
// over the whole set and differing between clients.
func spread(set []conversation, client, clients, i int) conversation {
	k := (uint64(i)*uint64(clients) + uint64(client)) * 2654435761
	return set[k%uint64(len(set))]
}

// own picks the conversation of a client's iteration so that, with an even
// number of conversations, no two clients write to one at once.
func own(set []conversation, client, clients, i int) conversation {
	return set[(i*clients+client)%len(set)]
}

// readRow times a read of each picked conversation by pgconvo (query a)
// and by the baseline (query b), alternating; the row holds key's goal
// (none for "").
func (r *run) readRow(ctx context.Context, key, name, baseline string, set []conversation, a, b string) (Row, error) {
	clients := r.cfg.Clients
	read := func(query string) step {
		return func(ctx context.Context, conn *pgx.Conn, client, i int) error {
			c := spread(set, client, clients, i)
			return inOwnerTx(ctx, conn, c.owner, func(tx pgx.Tx) error { return readAll(ctx, tx, query, c.id) })
		}
	}
	s, err := alternate(ctx, r.app, clients, r.cfg.Iterations, read(a), read(b))
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", name, err)
	}
	row := latencyRow(name, baseline, s, goals[key].goal)
	row.Key = key
	return row, nil
}

// latencyRow makes a row of medians from a pair's samples.
func latencyRow(name, baseline string, s sides, goal string) Row {
	a, b := median(s.a), median(s.b)
	return Row{Workload: name, Baseline: baseline, A: us(a), B: us(b), Unit: "µs",
		Ratio: float64(a) / float64(b), Samples: len(s.a), Goal: goal}
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// reads times path on never-edited and on edited conversations against
// the flat list, the flat list with path's ten columns against the flat
// list of four (what the contract's columns cost any store), path against
// that wide flat list (what the tree costs beyond them), and path_at at the
// latest instant against path.
func (r *run) reads(ctx context.Context, linear, edited []conversation) ([]Row, error) {
	const path = `SELECT * FROM convo.path($1)`
	var rows []Row
	for _, w := range []struct {
		key, name, baseline string
		set                 []conversation
		a, b                string
	}{
		{"path-linear", fmt.Sprintf("`path`, depth %d, never edited", r.cfg.Length), "flat `(conversation_id, seq)` list of the same rows",
			linear, path, flatRead},
		{"path-edited", fmt.Sprintf("`path`, depth %d, an edit every 10 turns", r.cfg.Length), "the same flat list",
			edited, path, flatRead},
		{"flat-wide", goals["flat-wide"].name, goals["flat-wide"].baseline, linear, wideRead, flatRead},
		{"path-linear-wide", fmt.Sprintf("`path`, depth %d, never edited", r.cfg.Length), goals["path-linear-wide"].baseline,
			linear, path, wideRead},
		{"path-edited-wide", fmt.Sprintf("`path`, depth %d, an edit every 10 turns", r.cfg.Length), goals["path-edited-wide"].baseline,
			edited, path, wideRead},
		{"path_at", "`path_at` at the latest instant (edited conversations)", "`path`",
			edited, `SELECT * FROM convo.path_at($1, now())`, path},
	} {
		row, err := r.readRow(ctx, w.key, w.name, w.baseline, w.set, w.a, w.b)
		if err != nil {
			return nil, err
		}
		r.logf("  %s: %.0f µs vs %.0f µs, %.2fx", row.Workload, row.A, row.B, row.Ratio)
		rows = append(rows, row)
	}
	return rows, nil
}

// writes times edit_and_resend, append_message (2 and 16 clients) and an
// agent turn with an effectful tool call, each beside its floor, on the
// conversations of set (copied to the write baseline's tables).
func (r *run) writes(ctx context.Context, set []conversation, targets map[string]string) ([]Row, error) {
	clients := r.cfg.Clients
	var rows []Row
	fsync := "fsync on"
	if !r.cfg.Fsync {
		fsync = "fsync off"
	}

	// edit_and_resend: each conversation's last user message (targets),
	// edited again and again (it gathers siblings), on both sides.
	edit := func(query string) step {
		return func(ctx context.Context, conn *pgx.Conn, client, i int) error {
			c := own(set, client, clients, i)
			return inOwnerTx(ctx, conn, c.owner, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, query, c.id, targets[c.id], textParts)
				return err
			})
		}
	}
	s, err := alternate(ctx, r.app, clients, r.cfg.Iterations, edit(`SELECT convo.edit_and_resend($1, $2, $3::jsonb)`), edit(editFloor))
	if err != nil {
		return nil, fmt.Errorf("edit_and_resend: %w", err)
	}
	goal := map[bool]string{false: "2x", true: "1.5x"}[r.cfg.Fsync]
	rows = append(rows, latencyRow("`edit_and_resend` ("+fsync+")", goals["edit"].baseline, s, goal))
	rows[len(rows)-1].Key = "edit"
	r.logRow(rows[len(rows)-1])

	appendStep := func(pick func([]conversation, int, int, int) conversation, clients int, query string) step {
		return func(ctx context.Context, conn *pgx.Conn, client, i int) error {
			c := pick(set, client, clients, i)
			return inOwnerTx(ctx, conn, c.owner, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, query, c.id, "user", textParts)
				return err
			})
		}
	}
	const appendAPI = `SELECT convo.append_message($1, $2, $3::jsonb)`
	s, err = alternate(ctx, r.app, clients, r.cfg.Iterations,
		appendStep(own, clients, appendAPI), appendStep(own, clients, appendFloor))
	if err != nil {
		return nil, fmt.Errorf("append_message: %w", err)
	}
	rows = append(rows, latencyRow("`append_message` ("+fsync+")", goals["append"].baseline, s, goal))
	rows[len(rows)-1].Key = "append"
	r.logRow(rows[len(rows)-1])

	for _, p := range []struct {
		key   string
		pool  *pgxpool.Pool
		label string
	}{{"append-many", r.many, ""}, {"append-many-quiet", r.quiet, ", `convo.notify` off"}} {
		row, err := r.manyClients(ctx, p.pool, p.label, set,
			appendStep(spread, r.cfg.ManyClients, appendAPI), appendStep(spread, r.cfg.ManyClients, appendFloor))
		if err != nil {
			return nil, err
		}
		row.Key = p.key
		rows = append(rows, row)
		r.logRow(row)
	}

	row, err := r.agentTurns(ctx, set)
	row.Key = "agent"

	if err != nil {
		return nil, err
	}
	rows = append(rows, row)
	r.logRow(row)

	// The same turn's floor: how much of the goal's allowance the ledger's
	// rows take before anything is decided.
	if err := r.withLedgerRows(ctx, func() error {
		row, err = r.agentTurns(ctx, set)
		return err
	}); err != nil {
		return nil, err
	}
	g := goals["agent-rows"]
	row.Key, row.Workload, row.Baseline, row.Goal = "agent-rows", g.name, g.baseline, g.goal
	rows = append(rows, row)
	r.logRow(row)
	return rows, nil
}

// manyClients runs a and b on ManyClients connections of pool over the same
// conversations, in alternating phases, and compares their throughputs.
// label says how pool differs from the others.
func (r *run) manyClients(ctx context.Context, pool *pgxpool.Pool, label string, set []conversation, a, b step) (Row, error) {
	var as, bs []time.Duration
	var ta, tb time.Duration
	for phase := 0; phase < 2*r.cfg.Phases; phase++ {
		s, t := a, &ta
		if phase%2 == 1 {
			s, t = b, &tb
		}
		start := time.Now()
		samples, err := throughput(ctx, pool, r.cfg.ManyClients, r.cfg.PhaseTime, s, phase*1_000_000)
		if err != nil {
			return Row{}, fmt.Errorf("append_message with %d clients: %w", r.cfg.ManyClients, err)
		}
		*t += time.Since(start)
		if phase%2 == 0 {
			as = append(as, samples...)
		} else {
			bs = append(bs, samples...)
		}
	}
	qa, qb := float64(len(as))/ta.Seconds(), float64(len(bs))/tb.Seconds()
	return Row{
		Workload: fmt.Sprintf("`append_message`, %d clients on the same %d conversations%s (throughput; median latency %.0f µs vs %.0f µs)",
			r.cfg.ManyClients, len(set), label, us(median(as)), us(median(bs))),
		Baseline: fmt.Sprintf("the minimal append, %d clients", r.cfg.ManyClients),
		A:        qa, B: qb, Unit: "appends/s", Ratio: qb / qa, Samples: min(len(as), len(bs)), Goal: "2x",
	}, nil
}

// agentTurns times an agent turn with an effectful tool call, as the
// README's agent loop runs it (user text; the assistant's tool_use and the
// effect_for_call decision, committed before the request would leave; the
// settlement and the tool result; the answer: four transactions), beside
// the same four transactions with text in place of the call and the result.
func (r *run) agentTurns(ctx context.Context, set []conversation) (Row, error) {
	clients := r.cfg.Clients
	const appendAPI = `SELECT convo.append_message($1, $2, $3::jsonb)`
	turn := func(effect bool) step {
		return func(ctx context.Context, conn *pgx.Conn, client, i int) error {
			c := own(set, client, clients, i)
			do := func(role, parts string, more func(tx pgx.Tx) error) error {
				return inOwnerTx(ctx, conn, c.owner, func(tx pgx.Tx) error {
					if more != nil {
						if err := more(tx); err != nil {
							return err
						}
					}
					if role == "" {
						return nil
					}
					_, err := tx.Exec(ctx, appendAPI, c.id, role, parts)
					return err
				})
			}
			if err := do("user", textParts, nil); err != nil {
				return err
			}
			if !effect {
				for _, role := range []string{"assistant", "tool", "assistant"} {
					if err := do(role, textParts, nil); err != nil {
						return err
					}
				}
				return nil
			}
			call := "toolu_" + newUUID()
			var effectID string
			use := `[{"type":"tool_use","id":"` + call + `","name":"bench_purchase","input":{"amount_minor":` +
				strconv.Itoa(100+i) + `,"currency":"EUR"}}]`
			if err := inOwnerTx(ctx, conn, c.owner, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, appendAPI, c.id, "assistant", use); err != nil {
					return err
				}
				var decision string
				if err := tx.QueryRow(ctx, `SELECT effect_id::text, decision FROM convo.effect_for_call($1, $2)`, c.id, call).
					Scan(&effectID, &decision); err != nil {
					return err
				}
				if decision != "execute" {
					return fmt.Errorf("tool call %s: decision %s, want execute", call, decision)
				}
				return nil
			}); err != nil {
				return err
			}
			result := `[{"type":"tool_result","tool_use_id":"` + call + `","content":"` + text + `"}]`
			if err := do("tool", result, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3)`, c.id, effectID, "ch_"+call)
				return err
			}); err != nil {
				return err
			}
			return do("assistant", textParts, nil)
		}
	}
	s, err := alternate(ctx, r.app, clients, max(r.cfg.Iterations/4, 2), turn(true), turn(false))
	if err != nil {
		return Row{}, fmt.Errorf("agent turn: %w", err)
	}
	return latencyRow("an agent turn with an effectful tool call: user text; `tool_use` + `effect_for_call`; `settle_effect` + tool result; answer (4 transactions)",
		"the same 4 transactions, text in place of the call and the result", s, "1.3x"), nil
}

// logRow prints a row as it is measured.
func (r *run) logRow(row Row) {
	r.logf("  %s: %.0f %s vs %.0f %s, %.2fx", row.Workload, row.A, row.Unit, row.B, row.Unit, row.Ratio)
}

// bytesRow compares the bytes per message of pgconvo (every table, index
// and TOAST relation of both its schemas, over the messages stored) with the
// flat list's (over its rows), both after VACUUM. convo.conversations and
// convo.live_path are compacted first (VACUUM FULL): the loader moves each
// head a few hundred times in one transaction, each move updating the
// conversation's row and its last segment's, leaving as many dead row
// versions, where an application's one move a transaction leaves them to
// be pruned at once.
func (r *run) bytesRow(ctx context.Context) (Row, error) {
	if _, err := r.env.admin.Exec(ctx, `VACUUM FULL convo.conversations, convo.live_path`); err != nil {
		return Row{}, fmt.Errorf("compacting convo.conversations and convo.live_path: %w", err)
	}
	var a, b float64
	err := r.env.admin.QueryRow(ctx, `
		SELECT (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
		         WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND c.relkind IN ('r', 'p', 'm'))
		       / (SELECT count(*) FROM convo.messages),
		       pg_total_relation_size('bench.flat') / (SELECT count(*) FROM bench.flat)::numeric`).Scan(&a, &b)
	if err != nil {
		return Row{}, fmt.Errorf("measuring bytes per message: %w", err)
	}
	g := goals["bytes"]
	row := Row{Key: "bytes", Workload: g.name, Baseline: g.baseline, A: a, B: b, Unit: "bytes", Ratio: a / b, Samples: 1, Goal: g.goal}
	r.logRow(row)
	return row, nil
}

// RelationBytes is one relation's bytes over the messages stored.
type RelationBytes struct {
	Relation   string
	PerMessage float64
}

// relationBytes is bytesRow's sum relation by relation (each table, index
// and TOAST table of convo and convo_private), those of a byte a message
// or more, largest first.
func (r *run) relationBytes(ctx context.Context) ([]RelationBytes, error) {
	rows, err := r.env.admin.Query(ctx, `
		SELECT coalesce(t.relnamespace::regnamespace || '.' || t.relname || ' (TOAST)', c.oid::regclass::text),
		       pg_relation_size(c.oid) / (SELECT count(*) FROM convo.messages)::float8 AS per_message
		  FROM pg_class c
		  LEFT JOIN pg_class t ON t.reltoastrelid = c.oid
		 WHERE coalesce(t.relnamespace, c.relnamespace) IN ('convo'::regnamespace, 'convo_private'::regnamespace)
		   AND c.relkind IN ('r', 'i', 't', 'm', 'p')
		   AND pg_relation_size(c.oid) >= (SELECT count(*) FROM convo.messages)
		 ORDER BY 2 DESC`)
	if err != nil {
		return nil, fmt.Errorf("measuring each relation's bytes: %w", err)
	}
	defer rows.Close()
	var out []RelationBytes
	for rows.Next() {
		var b RelationBytes
		if err := rows.Scan(&b.Relation, &b.PerMessage); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
