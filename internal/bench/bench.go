// Package bench is pgconvo's benchmark: it starts a local PostgreSQL server
// of its own, loads synthetic conversations through the API, and times
// each workload (the path, the writes, an agent turn, a sidebar) beside the
// least work PostgreSQL must do for the same job, as an application runs
// it: a login member of convo_app, every transaction naming its owner first. Both sides of a pair run in the same
// run, alternating, so the ratios hold on a noisy machine. cmd/bench is its
// command line.
package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Config sizes a run. DefaultConfig is the command's default.
type Config struct {
	// Conversations and Length shape the synthetic data: Conversations
	// conversations whose live paths have Length messages.
	Conversations int
	Length        int
	// Fsync keeps fsync, synchronous_commit and full_page_writes on.
	Fsync bool
	// LoadWorkers is how many connections load at once (one a CPU).
	LoadWorkers int
	// Clients is how many connections run each latency pair at once;
	// Iterations how many pairs each runs (an agent turn a quarter as many).
	Clients, Iterations int
	// ManyClients append at once for PhaseTime in each of Phases phases a
	// side, the sides alternating.
	ManyClients int
	Phases      int
	PhaseTime   time.Duration
	// WriteConversations is how many of the conversations the write
	// workloads write to.
	WriteConversations int
	// ChartDepths are the path lengths of the chart, each read on
	// ChartConversations conversations of each shape.
	ChartDepths        []int
	ChartConversations int
	// LargeScale multiplies the N of every large-input case.
	LargeScale float64
	// Log receives progress.
	Log io.Writer
	// Hold, when set, is called with the database's superuser URL once
	// everything is measured, before the server stops: a caller that wants
	// to look at the data blocks in it.
	Hold func(url string)
}

// DefaultConfig is the benchmark as BENCHMARKS.md records it: 2,000
// conversations of depth 200 on 2 connections, fsync on.
func DefaultConfig() Config {
	return Config{
		Conversations:      2000,
		Length:             200,
		Fsync:              true,
		LoadWorkers:        max(2, runtime.NumCPU()),
		Clients:            2,
		Iterations:         1000,
		ManyClients:        16,
		Phases:             3,
		PhaseTime:          2 * time.Second,
		WriteConversations: 200,
		ChartDepths:        []int{50, 200, 1000},
		ChartConversations: 10,
		LargeScale:         1,
		Log:                io.Discard,
	}
}

// Result is everything a run measured.
type Result struct {
	Config   Config
	Server   string // PostgreSQL's version() and settings
	Messages int64  // messages stored after loading
	LoadTime time.Duration
	Rows     []Row
	// Shaped are the same workloads in the application's transaction
	// shape, measured by pgbench with fsync off (pgbench.go); none when
	// NoPgbench says why.
	Shaped    []Row
	NoPgbench string
	Chart     []Point
	Growth    []Growth
	Calls     []CallCount
	// Floor is the ablation (floor.sql): the writes, an effectful call and
	// the path read with one piece removed at a time.
	Floor []FloorCost
	// Bytes is the bytes row relation by relation.
	Bytes   []RelationBytes
	Elapsed time.Duration
}

type run struct {
	cfg       Config
	env       *env
	app, many *pgxpool.Pool
	// quiet is many with convo.notify off: no live-update notifications.
	quiet *pgxpool.Pool
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, format+"\n", args...)
}

// Run starts a server, loads the data and runs every workload, the chart's
// reads and the large-input cases, then stops the server and removes its
// files.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Conversations < 2 || cfg.Length < 2 || cfg.Clients < 1 || cfg.Iterations < 1 || cfg.ManyClients < 1 {
		return nil, fmt.Errorf("a run needs at least 2 conversations (one of each shape) of 2 messages and a client: %+v", cfg)
	}
	start := time.Now()
	r := &run{cfg: cfg}
	res := &Result{Config: cfg}
	e, err := startEnv(ctx, cfg.Fsync)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r.env = e
	if r.app, err = e.appPool(ctx, cfg.Clients); err != nil {
		return nil, err
	}
	defer r.app.Close()
	if r.many, err = e.appPool(ctx, cfg.ManyClients); err != nil {
		return nil, err
	}
	defer r.many.Close()
	if r.quiet, err = e.appPool(ctx, cfg.ManyClients, "convo.notify=off"); err != nil {
		return nil, err
	}
	defer r.quiet.Close()
	if err := e.admin.QueryRow(ctx, `SELECT version() || ', fsync ' || current_setting('fsync')
		|| ', synchronous_commit ' || current_setting('synchronous_commit')
		|| ', shared_buffers ' || current_setting('shared_buffers')`).Scan(&res.Server); err != nil {
		return nil, fmt.Errorf("reading the server's version: %w", err)
	}
	r.logf("server: %s (%.1f s)", res.Server, time.Since(start).Seconds())

	convs := shapes(cfg.Conversations)
	loadStart := time.Now()
	if err := r.load(ctx, convs, cfg.Length, "conversations"); err != nil {
		return nil, err
	}
	var linear, edited []conversation
	for _, c := range convs {
		if c.editEvery == 0 {
			linear = append(linear, c)
		} else {
			edited = append(edited, c)
		}
	}
	writes := convs[:min(cfg.WriteConversations, len(convs))]
	if err := r.copyToBaselines(ctx, convs, writes); err != nil {
		return nil, err
	}
	if _, err := e.admin.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return nil, fmt.Errorf("vacuuming after loading: %w", err)
	}
	res.LoadTime = time.Since(loadStart)
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM convo.messages`).Scan(&res.Messages); err != nil {
		return nil, err
	}
	r.logf("loaded %d messages in %.1f s (with the baselines' copies and VACUUM ANALYZE)", res.Messages, res.LoadTime.Seconds())
	bytes, err := r.bytesRow(ctx)
	if err != nil {
		return nil, err
	}
	if res.Bytes, err = r.relationBytes(ctx); err != nil {
		return nil, err
	}

	r.logf("function calls per API call")
	if res.Calls, err = r.callCounts(ctx, writes[0]); err != nil {
		return nil, err
	}

	r.logf("reads, %d clients, %d pairs each", cfg.Clients, cfg.Iterations)
	rows, err := r.reads(ctx, linear, edited)
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	r.logf("a sidebar")
	if rows, err = r.sidebar(ctx); err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	// The chart and the application-shaped reads before the writes, which
	// change the paths of the conversations they write to (and not their
	// flat copies).
	r.logf("path against depth")
	if res.Chart, err = r.chartPoints(ctx, linear, edited); err != nil {
		return nil, err
	}
	// Each written conversation's last user message, which the edits edit
	// again and again (it gathers siblings), on both sides.
	targets := map[string]string{}
	for _, c := range writes {
		var id string
		if err := e.admin.QueryRow(ctx, `SELECT message_id::text FROM convo.path($1) WHERE role = 'user'
			ORDER BY depth DESC LIMIT 1`, c.id).Scan(&id); err != nil {
			return nil, fmt.Errorf("finding a user message to edit: %w", err)
		}
		targets[c.id] = id
	}
	sizes := map[string]int{"linear": len(linear), "edited": len(edited), "writes": len(writes)}
	if err := r.savePicks(ctx, map[string][]conversation{"linear": linear, "edited": edited, "writes": writes}, targets); err != nil {
		return nil, err
	}
	if pgbenchPath() == "" {
		res.NoPgbench = "no pgbench beside the server binaries (Debian's postgresql-15 package has it): the application's transaction shape was not measured"
		r.logf("%s", res.NoPgbench)
	} else {
		r.logf("reads in the application's transaction shape (pgbench -M prepared, fsync off)")
		if rows, err = r.shaped(ctx, sizes, false); err != nil {
			return nil, err
		}
		res.Shaped = append(res.Shaped, rows...)
	}
	// Before the writes, which grow the paths the reads read; everything
	// the ablation writes is rolled back.
	rounds := min(max(cfg.Iterations/30, 1), 10)
	r.logf("what each piece costs: %d rounds of %d calls a piece, in-server", rounds, len(writes))
	if res.Floor, err = r.floorCosts(ctx, rounds, len(writes)); err != nil {
		return nil, err
	}
	r.logf("writes on %d conversations", len(writes))
	if rows, err = r.writes(ctx, writes, targets); err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	res.Rows = append(res.Rows, bytes)
	if res.NoPgbench == "" {
		r.logf("writes in the application's transaction shape (pgbench -M prepared, fsync off)")
		if rows, err = r.shaped(ctx, sizes, true); err != nil {
			return nil, err
		}
		res.Shaped = append(res.Shaped, rows...)
	}
	r.logf("large inputs, N and 4N")
	if res.Growth, err = r.large(ctx); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	if cfg.Hold != nil {
		cfg.Hold(e.url)
	}
	return res, nil
}
