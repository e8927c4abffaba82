package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgconvo/pgconvo/migrator"
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

// TestCLILocalServerStopAndPurge: without a database, a verb that only
// reads makes no local server (it says how to make one, and nothing is
// written); up makes one under .pgconvo/ (as root, with its files under
// /var/tmp when the postgres user cannot enter the test's directory, as
// here), and a reading verb starts it again once stopped; its URL is then
// refused with the way to start it; stop -purge stops it if it runs and
// removes everything it kept, in both places, and a second purge finds
// nothing to remove.
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

	v, err := migrator.Latest()
	if err != nil {
		t.Fatal(err)
	}
	latest := fmt.Sprintf("version %d\n", v)
	state := filepath.Join(dir, ".pgconvo")
	noServer := "there is no local server under .pgconvo/ yet: `go run ./cmd/migrate up` makes one and installs pgconvo, " +
		"or give a database with -database or DATABASE_URL"
	doc := filepath.Join(t.TempDir(), "conversation.json")
	if err := os.WriteFile(doc, []byte(`{"conversation": {"owner_id": "alice"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range [][]string{{"status"}, {"version"}, {"verify"}, {"down", "1"}, {"force", "1"},
		{"export", "00000000-0000-0000-0000-000000000001"}, {"restore", doc},
		{"-owner", "alice", "import-chatgpt", doc}} {
		r := run(1, nil, verb...)
		requireOneError(t, r, noServer)
		requireGone(t, state)
	}

	r := run(0, []string{"started now for this command", latest}, "up")
	m := localURL.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("up did not name the local server:\n%s", r.stdout)
	}
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

	// A reading verb starts the stopped server again (on the port it
	// recorded, or another if that one was taken meanwhile).
	run(0, []string{"stopped the local server in .pgconvo\n"}, "stop")
	r = run(0, []string{"(the local server in .pgconvo/, started now", latest}, "version")
	if m = localURL.FindStringSubmatch(r.stdout); m == nil {
		t.Fatalf("version did not name the local server:\n%s", r.stdout)
	}
	run(0, []string{"stopped the local server in .pgconvo\n"}, "stop")
	r = run(1, nil, "-database", m[1], "status")
	requireOneError(t, r, "that is the local server in .pgconvo/, and it is stopped: `go run ./cmd/migrate up` starts it")
	run(0, []string{"no local server is running in .pgconvo\n"}, "stop")

	// Purge a running server.
	run(0, []string{"(the local server in .pgconvo/, started now", latest}, "version")
	r = run(0, []string{"stopped the local server in .pgconvo\n"}, "stop", "-purge")
	for _, p := range places {
		if !strings.Contains(r.stdout, "removed "+p+"\n") {
			t.Fatalf("stop -purge does not say it removed %s:\n%s", p, r.stdout)
		}
		requireGone(t, p)
	}
	run(0, []string{"no local server data in .pgconvo: nothing to remove\n"}, "stop", "-purge")

	// Purge a stopped one; the next start is a fresh cluster.
	run(0, []string{"started now for this command", "version 0\n"}, "goto", "0")
	run(0, []string{"stopped the local server"}, "stop")
	r = run(0, nil, "stop", "-purge")
	if strings.Contains(r.stdout, "stopped") {
		t.Fatalf("stop -purge of a stopped server says it stopped one:\n%s", r.stdout)
	}
	for _, p := range places {
		requireGone(t, p)
	}
}
