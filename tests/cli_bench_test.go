package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgconvo/pgconvo/internal/bench"
)

// runBench builds cmd/bench and runs it with args, returning its output
// and exit code.
func runBench(t *testing.T, args ...string) cliRun {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bench")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bench").CombinedOutput(); err != nil {
		t.Fatalf("building cmd/bench: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cliRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// TestBenchHelp: -h exits 0 and says in one line what the command does
// before the flags; no flag text names a tracker; an unknown flag or an
// argument is a usage error, said once.
func TestBenchHelp(t *testing.T) {
	t.Parallel()
	r := runBench(t, "-h")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("bench -h: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 5 || lines[0] != "usage: go run ./cmd/bench [flags]" || lines[1] != "" ||
		!strings.HasPrefix(lines[2], "bench times pgconvo's API") || lines[3] != "" || lines[4] != "flags:" {
		t.Fatalf("bench -h should start with the usage, one line on what it does, then the flags:\n%s", r.stdout)
	}
	for _, flag := range []string{"-scale", "-length", "-fsync", "-iterations", "-large", "-keep", "-out", "-load", "-import"} {
		if !strings.Contains(r.stdout, "  "+flag+" ") && !strings.Contains(r.stdout, "  "+flag+"\n") {
			t.Fatalf("bench -h lists no %s:\n%s", flag, r.stdout)
		}
	}
	if regexp.MustCompile(`(?i)\bissue|#[0-9]`).MatchString(r.stdout) {
		t.Fatalf("bench -h names a tracker:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"-bogus"}, {"extra"}} {
		r := runBench(t, args...)
		if r.code != 2 || strings.Count(r.stderr, "bench: ") != 1 || strings.Count(r.stderr, "usage: ") != 1 || r.stdout != "" {
			t.Fatalf("bench %v: exit %d, want 2 with one error and the usage once; stdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestBenchReportVerdicts: the report marks each row and each large-input
// case met or missed against its goal, and a run smaller than the default
// says it cannot be compared with BENCHMARKS.md (a default run does not).
func TestBenchReportVerdicts(t *testing.T) {
	t.Parallel()
	res := &bench.Result{Config: bench.DefaultConfig(),
		Rows: []bench.Row{
			{Workload: "fast", Baseline: "b", A: 140, B: 100, Unit: "µs", Ratio: 1.4, Samples: 1, Goal: "1.5x"},
			{Workload: "exact", Baseline: "b", A: 150, B: 100, Unit: "µs", Ratio: 1.5, Samples: 1, Goal: "1.5x"},
			{Workload: "slow", Baseline: "b", A: 300, B: 100, Unit: "µs", Ratio: 3, Samples: 1, Goal: "2x"},
			{Workload: "free", Baseline: "b", A: 1, B: 1, Unit: "µs", Ratio: 1, Samples: 1},
		},
		Growth: []bench.Growth{
			{Case: "linear", N1: 10, N2: 40, T1: time.Second, T2: 5 * time.Second, Goal: "4x"},
			{Case: "quadratic", N1: 10, N2: 40, T1: time.Second, T2: 16 * time.Second, Goal: "4x"},
			{Case: "constant", N1: 10, N2: 40, T1: time.Second, T2: 1500 * time.Millisecond, Goal: "1x"},
			{Case: "linear, wanted constant", N1: 10, N2: 40, T1: time.Second, T2: 4 * time.Second, Goal: "1x"},
		},
	}
	table := res.Table()
	for _, want := range []string{"| workload | pgconvo | baseline | ratio | goal | result |",
		"| fast / b | 140 µs | 100 µs | 1.40x | 1.5x | met |", "| exact / b | 150 µs | 100 µs | 1.50x | 1.5x | met |",
		"| slow / b | 300 µs | 100 µs | 3.00x | 2x | missed |", "| free / b | 1 µs | 1 µs | 1.00x |  | no goal |"} {
		if !strings.Contains(table, want) {
			t.Fatalf("want %q in the table:\n%s", want, table)
		}
	}
	growth := res.GrowthTable()
	for _, want := range []string{"| 4N / N | goal | result |", "| linear | 10 | 1.00 s | 40 | 5.00 s | 5.0x | 4x | met |",
		"| quadratic | 10 | 1.00 s | 40 | 16.00 s | 16.0x | 4x | missed |", "| 1.5x | 1x | met |",
		"| linear, wanted constant | 10 | 1.00 s | 40 | 4.00 s | 4.0x | 1x | missed |"} {
		if !strings.Contains(growth, want) {
			t.Fatalf("want %q in the growth table:\n%s", want, growth)
		}
	}
	if note := res.Comparable(); note != "" {
		t.Fatalf("a default run says: %s", note)
	}
	if md := res.Markdown("go run ./cmd/bench", "c.svg"); strings.Contains(md, "Not comparable") {
		t.Fatalf("a default run's report says it is not comparable:\n%s", md)
	}
	res.Config.Conversations, res.Config.LargeScale = 500, 0.5
	md := res.Markdown("go run ./cmd/bench -scale 0.25 -large 0.5", "c.svg")
	for _, want := range []string{"**Not comparable with BENCHMARKS.md.** This run is smaller than the default: " +
		"conversations 500 (default 2000), large-input scale 0.5 (default 1).", "| slow / b | 300 µs | 100 µs | 3.00x | 2x | missed |"} {
		if !strings.Contains(md, want) {
			t.Fatalf("want %q in the report:\n%s", want, md)
		}
	}
	if _, err := os.Stat("../BENCHMARKS.md"); err != nil {
		t.Fatalf("the report names BENCHMARKS.md, which is not there: %v", err)
	}
}
