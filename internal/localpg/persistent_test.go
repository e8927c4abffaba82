package localpg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// persistentDir returns a fresh directory for a persistent server, in a
// parent the server's OS user can enter (so no /var/tmp fallback is made),
// and stops the server and removes everything when the test ends. Without
// server binaries it fails, as the tests package does.
func persistentDir(t *testing.T) string {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		t.Fatalf("no PostgreSQL server binaries (install them, as .ci/run does): %v", err)
	}
	parent, err := os.MkdirTemp("", "pgconvo-persistent-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, ".pgconvo")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := StopPersistent(ctx, dir); err != nil {
			t.Errorf("stopping the server in %s: %v", dir, err)
		}
		os.RemoveAll(parent)
	})
	return dir
}

// requirePing fails the test unless the server at port answers.
func requirePing(t *testing.T, dir string) {
	t.Helper()
	port, ok := runningPort(filepath.Join(dir, "data"))
	if !ok {
		t.Fatalf("no server is running in %s", dir)
	}
	if err := ping(context.Background(), port); err != nil {
		t.Fatal(err)
	}
}

// TestEnsurePersistentConcurrent is two `migrate up` at once in a fresh
// clone: one initdbs and starts the server while the other waits on the
// lock file, then reuses it.
func TestEnsurePersistentConcurrent(t *testing.T) {
	dir := persistentDir(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]*Persistent, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = EnsurePersistent(ctx, dir)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EnsurePersistent #%d: %v", i+1, err)
		}
	}
	a, b := results[0], results[1]
	if a.URL != b.URL {
		t.Fatalf("two URLs for one server: %s and %s", a.URL, b.URL)
	}
	if a.Started == b.Started || a.Initialized == b.Initialized || a.Started != a.Initialized {
		t.Fatalf("want exactly one call to initdb and start the server: %+v, %+v", a, b)
	}
	requirePing(t, dir)

	again, err := EnsurePersistent(ctx, dir)
	if err != nil || again.Started || again.URL != a.URL {
		t.Fatalf("a third call should reuse the server: %+v, %v", again, err)
	}
}

// TestEnsurePersistentAfterKill kills the postmaster with SIGKILL, as an
// OOM killer or a crashed machine would, and requires the next call to see
// that the postmaster.pid it left is stale and start the server again
// within seconds (the dead postmaster may stay a zombie, which signals as
// alive).
func TestEnsurePersistentAfterKill(t *testing.T) {
	dir := persistentDir(t)
	ctx := context.Background()
	first, err := EnsurePersistent(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	pid, _, ok := readPostmasterPID(dataDir)
	if !ok {
		t.Fatal("no postmaster.pid after starting")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Go on as soon as the postmaster is dead, a zombie or gone: waiting
	// for it to be reaped would hide what a zombie does.
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || bytes.Contains(stat, []byte(") Z ")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	start := time.Now()
	second, err := EnsurePersistent(ctx, dir)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	if took > 15*time.Second {
		t.Fatalf("recovering took %v, want under 15s", took)
	}
	if !second.Started || second.Initialized || second.URL != first.URL {
		t.Fatalf("want the server restarted on its data and port: %+v, first %+v", second, first)
	}
	requirePing(t, dir)
	t.Logf("recovered in %v", took)
}

// TestPidAlive: a pid that does not exist is not alive. With /proc, this
// process is not either (it is no postgres); without /proc, pidAlive falls
// back to kill(pid, 0), which finds it.
func TestPidAlive(t *testing.T) {
	if pidAlive(1 << 30) {
		t.Fatal("a pid that does not exist counts as alive")
	}
	_, procErr := os.Stat("/proc/self/stat")
	if got, want := pidAlive(os.Getpid()), procErr != nil; got != want {
		t.Fatalf("pidAlive(this test binary) = %v, want %v (with /proc: %v)", got, want, procErr == nil)
	}
}

// TestPurgeRefusesAPlantedFallback: PurgePersistent removes nothing it did
// not make: a link planted where the /var/tmp fallback of dir would be is
// refused, and what it points at stays; with nothing there, a purge has
// nothing to do.
func TestPurgeRefusesAPlantedFallback(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, ".pgconvo")
	if p, err := PurgePersistent(ctx, dir); err != nil || p.Stopped || len(p.Removed) != 0 {
		t.Fatalf("purging nothing: %+v, %v", p, err)
	}
	victim := t.TempDir()
	keep := filepath.Join(victim, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	alt := fallbackDir(abs)
	if err := os.Symlink(victim, alt); err != nil { // /var/tmp is anyone's to write in
		t.Fatalf("planting %s: %v", alt, err)
	}
	t.Cleanup(func() { os.Remove(alt) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(alt, filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	if _, err := PurgePersistent(ctx, dir); err == nil || !strings.Contains(err.Error(), "is not a directory this command made") {
		t.Fatalf("purge of a planted %s: %v, want its refusal", alt, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the purge reached what the planted link points at: %v", err)
	}
}

// TestPurgeWaitsForProcessesThatAreExiting: a process still in the data
// directory for a moment after the server stopped (as a server process is
// on a loaded machine, after pg_ctl stop returns) is waited for, not taken
// for a stuck one that makes the purge refuse.
func TestPurgeWaitsForProcessesThatAreExiting(t *testing.T) {
	dir := persistentDir(t)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	lingering := exec.Command("sleep", "0.7")
	lingering.Dir = data
	if err := lingering.Start(); err != nil {
		t.Fatal(err)
	}
	go lingering.Wait() // Reaped when it exits, so it leaves no zombie.
	if left := processesIn(data); len(left) != 1 {
		t.Fatalf("processes in %s: %v, want the one just started", data, left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := PurgePersistent(ctx, dir)
	if err != nil {
		t.Fatalf("purge with a process that exits in a moment: %v", err)
	}
	if len(p.Removed) != 1 || p.Removed[0] != dir {
		t.Fatalf("removed %v, want %s", p.Removed, dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after the purge: %v", dir, err)
	}
}
