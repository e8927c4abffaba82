package tests

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// localURL is the local server's URL as the first line of a command that
// used it prints it.
var localURL = regexp.MustCompile(`^database: (postgres://\S+) \(the local server in \.pgconvo/`)

// requireGone fails unless path does not exist.
func requireGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there (%v)", path, err)
	}
}

// TestCLILocalServerStopAndPurge: without a database the command starts a
// local server under .pgconvo/ (as root, with its files under /var/tmp
// when the postgres user cannot enter the test's directory, as here);
// once stopped, its URL is refused with the way to start it again; stop
// -purge stops it if it runs and removes everything it kept, in both
// places, and a second purge finds nothing to remove.
func TestCLILocalServerStopAndPurge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Cleanup(func() { runCLIIn(t, dir, nil, "stop", "-purge") })
	run := func(code int, want []string, args ...string) cliRun {
		t.Helper()
		r := runCLIIn(t, dir, nil, args...)
		all := r.stdout + r.stderr
		if r.code != code {
			t.Fatalf("migrate %s: exit code %d, want %d; output:\n%s", strings.Join(args, " "), r.code, code, all)
		}
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Fatalf("migrate %s: want %q in the output:\n%s", strings.Join(args, " "), w, all)
			}
		}
		return r
	}

	r := run(0, []string{"started now for this command", "version 0\n"}, "version")
	m := localURL.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("version did not name the local server:\n%s", r.stdout)
	}
	state := filepath.Join(dir, ".pgconvo")
	places := []string{state}
	if target, err := os.Readlink(filepath.Join(state, "server")); err == nil {
		if !strings.HasPrefix(target, "/var/tmp/pgconvo-") {
			t.Fatalf(".pgconvo/server links to %s, want a directory under /var/tmp", target)
		}
		places = append(places, target)
	} else if os.Geteuid() == 0 {
		t.Fatalf("as root in a directory the postgres user cannot enter, want .pgconvo/server to link elsewhere: %v", err)
	}
	data := filepath.Join(places[len(places)-1], "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		t.Fatalf("no data directory where the server keeps it: %v", err)
	}

	run(0, []string{"stopped the local server in .pgconvo\n"}, "stop")
	r = run(1, nil, "-database", m[1], "status")
	requireOneError(t, r, "that is the local server in .pgconvo/, and it is stopped: `go run ./cmd/migrate up` starts it")
	run(0, []string{"no local server is running in .pgconvo\n"}, "stop")

	// Purge a running server.
	run(0, []string{"(the local server in .pgconvo/, started now", "version 0\n"}, "version")
	r = run(0, []string{"stopped the local server in .pgconvo\n"}, "stop", "-purge")
	for _, p := range places {
		if !strings.Contains(r.stdout, "removed "+p+"\n") {
			t.Fatalf("stop -purge does not say it removed %s:\n%s", p, r.stdout)
		}
		requireGone(t, p)
	}
	run(0, []string{"no local server data in .pgconvo: nothing to remove\n"}, "stop", "-purge")

	// Purge a stopped one; the next start is a fresh cluster.
	run(0, []string{"started now for this command"}, "version")
	run(0, []string{"stopped the local server"}, "stop")
	r = run(0, nil, "stop", "-purge")
	if strings.Contains(r.stdout, "stopped") {
		t.Fatalf("stop -purge of a stopped server says it stopped one:\n%s", r.stdout)
	}
	for _, p := range places {
		requireGone(t, p)
	}
}
