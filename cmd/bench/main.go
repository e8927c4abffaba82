// Command bench runs pgconvo's benchmark: it starts a PostgreSQL
// server of its own in a temporary directory, loads synthetic conversations,
// times every workload beside its bare-SQL baseline as the application runs
// it, and writes a Markdown table and an SVG chart.
//
//	go run ./cmd/bench                 # the default: 2,000 conversations of depth 200, fsync on
//	go run ./cmd/bench -fsync=false    # commits that do not wait for the disk
//	go run ./cmd/bench -scale 0.25     # a quarter of the conversations
//	go run ./cmd/bench -load 100000    # only the long load and crash runs, by acknowledged calls
//	go run ./cmd/bench -import 10000   # only the import of a generated 10,000-conversation export
//
// The load and crash runs are the tests TestLoad and TestCrashRecovery
// (tests/stress/load_test.go), which go test runs to 2,000 and 500
// acknowledged calls; -load N runs them to N acknowledged calls (the crash
// run to N/4, with a crash every 500 of them), through go test, so the checks that follow
// the load (every acknowledged call present once, linear chains, heads equal
// to their last log rows, self_check clean) are the same code. -import N
// runs TestImportCLIThroughput the same way: migrate import-chatgpt on a
// generated export of N conversations, on a server of its own, fsync on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgconvo/pgconvo/internal/bench"
)

func main() {
	err := run(os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2) // run has said why, with the usage.
	default:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// errUsage is a command line the flags cannot parse.
var errUsage = errors.New("usage error")

// about is the one line -h prints before the flags.
const about = `bench times pgconvo's API against bare-SQL baselines on a PostgreSQL server of its own, and writes a Markdown report and an SVG chart.`

func run(args []string) error {
	start := time.Now()
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the errors and the usage, once
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: go run ./cmd/bench [flags]\n\n%s\n\nflags:\n", about)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	scale := fs.Float64("scale", 1, "multiply the number of conversations (2,000 at 1); below 1 the report cannot be compared with BENCHMARKS.md")
	fs.IntVar(&cfg.Length, "length", cfg.Length, "messages on each conversation's live path")
	fs.BoolVar(&cfg.Fsync, "fsync", cfg.Fsync, "keep fsync, synchronous_commit and full_page_writes on (-fsync=false: commits do not wait for the disk)")
	fs.IntVar(&cfg.Iterations, "iterations", cfg.Iterations, "pairs each connection runs per latency workload (an agent turn: a quarter as many)")
	fs.Float64Var(&cfg.LargeScale, "large", cfg.LargeScale, "multiply the N of the large-input cases")
	keep := fs.Bool("keep", false, "keep the server running after the run, until interrupted, to look at the data")
	out := fs.String("out", "bench-results.md", "write the Markdown report here; the SVG chart goes beside it, as .svg")
	load := fs.Int("load", 0, "instead of the benchmark, run the load test to this many acknowledged calls and the crash test to a quarter as many (100000 for about a minute of load)")
	imports := fs.Int("import", 0, "instead of the benchmark, time migrate import-chatgpt on a generated export of this many conversations")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(os.Stdout)
			return nil
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n\n", err)
		usage(os.Stderr)
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: takes flags only, got: %s\n\n", strings.Join(fs.Args(), " "))
		usage(os.Stderr)
		return errUsage
	}
	if *load > 0 {
		return runLoad(*load)
	}
	if *imports > 0 {
		return runImport(*imports)
	}
	cfg.Conversations = max(int(float64(cfg.Conversations)**scale), 2)
	cfg.WriteConversations = min(cfg.WriteConversations, cfg.Conversations)
	cfg.Log = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *keep {
		cfg.Hold = func(url string) {
			fmt.Printf("the server stays up until interrupted (Ctrl-C): psql '%s'\n", url)
			<-ctx.Done()
		}
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	svgPath := strings.TrimSuffix(*out, filepath.Ext(*out)) + ".svg"
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("making the report's directory: %w", err)
	}
	command := "go run ./cmd/bench"
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}
	chart := bench.SVGChart(res.Chart, fmt.Sprintf("path against depth (%s)", fsyncLabel(cfg.Fsync)))
	if err := os.WriteFile(svgPath, []byte(chart), 0o644); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	res.Elapsed = time.Since(start)
	report := res.Markdown(command, filepath.Base(svgPath))
	if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	fmt.Printf("\n%s\n%s\n%s\nWhat each piece costs (in-server, one removed at a time):\n%s\n\n%s\n%s\nwrote %s and %s; %.0f s in all\n",
		res.Setup(), res.Table(), res.GoalsTable(), res.FloorTable(), res.ChartTable(), res.GrowthTable(), *out, svgPath, res.Elapsed.Seconds())
	if note := res.Comparable(); note != "" {
		fmt.Print(strings.ReplaceAll(note, "**", ""))
	}
	return nil
}

// runLoad runs TestLoad to n acknowledged calls, then TestCrashRecovery to
// n/4 with one crash for every 500 of them, one after the other (each has
// the machine to itself), printing their logs (throughput per 10-second
// window, crashes, the checks) as they go.
func runLoad(n int) error {
	crashes := max(3, n/4/500)
	for _, test := range []string{"TestLoad", "TestCrashRecovery"} {
		cmd := exec.Command("go", "test", "./tests/stress", "-count=1", "-v", "-timeout", "60m", "-run", "^"+test+"$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PGCONVO_LOAD_CALLS=%d", n), fmt.Sprintf("PGCONVO_CRASHES=%d", crashes))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("running %s with PGCONVO_LOAD_CALLS=%d PGCONVO_CRASHES=%d\n", strings.Join(cmd.Args, " "), n, crashes)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", test, err)
		}
	}
	return nil
}

// runImport runs TestImportCLIThroughput on n generated conversations,
// printing its log (the summary's conversations and messages per second).
func runImport(n int) error {
	cmd := exec.Command("go", "test", "./tests", "-count=1", "-v", "-timeout", "60m", "-run", "^TestImportCLIThroughput$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PGCONVO_IMPORT_CONVERSATIONS=%d", n))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Printf("running %s with PGCONVO_IMPORT_CONVERSATIONS=%d\n", strings.Join(cmd.Args, " "), n)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the import run: %w", err)
	}
	return nil
}

func fsyncLabel(on bool) string {
	if on {
		return "fsync on"
	}
	return "fsync off"
}
