package tests

import (
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// catalogObjects lists the schemas and relations of db outside the system
// ones, for telling that a command wrote nothing to a database.
func catalogObjects(t *testing.T, db *sql.DB) string {
	t.Helper()
	return queryStrings(t, db, `
		SELECT coalesce(string_agg(n.nspname || '.' || coalesce(c.relname, ''), ', ' ORDER BY n.nspname, c.relname), '')
		  FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid
		 WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'`)[0]
}

// requireNothingWritten fails unless db's schemas and relations are still
// before's.
func requireNothingWritten(t *testing.T, db *sql.DB, what, before string) {
	t.Helper()
	if after := catalogObjects(t, db); after != before {
		t.Fatalf("%s wrote to the database: before %q, after %q", what, before, after)
	}
}

// requireOneError fails unless stderr holds exactly one error line of the
// command, holding want, and no stack of lines after it before the usage.
func requireOneError(t *testing.T, r cliRun, want string) string {
	t.Helper()
	if n := strings.Count(r.stderr, "migrate: "); n != 1 {
		t.Fatalf("want one error line, got %d:\n%s", n, r.stderr)
	}
	line, _, _ := strings.Cut(r.stderr[strings.Index(r.stderr, "migrate: "):], "\n")
	if !strings.Contains(line, want) {
		t.Fatalf("want %q in the error line %q; stderr:\n%s", want, line, r.stderr)
	}
	if strings.HasSuffix(line, ":") || strings.HasSuffix(line, ": ") {
		t.Fatalf("the error line ends in a colon: %q", line)
	}
	return line
}

// TestCLIHelp: help, -h, --help and help VERB print the usage on standard
// output and exit 0; the usage lists every verb, export, restore and
// stop -purge among them, and names no tracker.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	every := []string{"  up ", "  down N | -all ", "  goto V ", "  version ", "  force V ", "  status ", "  verify ",
		"  export ID ", "  restore FILE ", "  import-chatgpt -owner OWNER [-json] FILE", "  import-openwebui -owner OWNER [-json] FILE",
		"  import-librechat -owner OWNER [-json] FILE", "  stop [-purge] ", "  help [VERB] ", "-purge", "-owner", "-database"}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		r := requireCLI(t, nil, 0, every, args...)
		if r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: go run ./cmd/migrate [-database URL] VERB") {
			t.Fatalf("migrate %v: stdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
		}
	}
	for verb, want := range map[string]string{
		"up":             "usage: go run ./cmd/migrate [-database URL] up\n",
		"goto":           "usage: go run ./cmd/migrate [-database URL] goto V [-force-data-loss]\n",
		"down":           "usage: go run ./cmd/migrate [-database URL] down N | -all [-force-data-loss]\n",
		"export":         "usage: go run ./cmd/migrate [-database URL] [-owner OWNER] export ID\n",
		"restore":        "usage: go run ./cmd/migrate [-database URL] [-owner OWNER] restore FILE\n",
		"stop":           "usage: go run ./cmd/migrate stop [-purge]\n",
		"import-chatgpt": "usage: go run ./cmd/migrate [-database URL] import-chatgpt -owner OWNER [-json] FILE\n",
	} {
		for _, args := range [][]string{{"help", verb}, {verb, "-h"}} {
			r := requireCLI(t, nil, 0, []string{want}, args...)
			if r.stderr != "" || strings.Count(r.stdout, "usage: ") != 1 {
				t.Fatalf("migrate %v: stdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "stop"}, {"help", "restore"}, {"help", "up"}} {
		r := runCLI(t, nil, args...)
		if regexp.MustCompile(`(?i)\bissue|#[0-9]`).MatchString(r.stdout) {
			t.Fatalf("migrate %v names a tracker:\n%s", args, r.stdout)
		}
	}
}

// TestCLIUsageErrors: every command line that cannot run as written exits
// 2, says why in one line, prints that verb's usage once (every verb's when
// it names none; for an unknown verb, the verbs' names only), and writes
// nothing to the database it names.
func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	d := []string{"-database", dbURL}
	const every = "usage: go run ./cmd/migrate [-database URL] VERB"
	const listOfVerbs = "(the list of verbs)"
	for _, c := range []struct {
		args       []string
		want, verb string // verb: whose usage follows; "" for every verb's; listOfVerbs for the verbs' names only
	}{
		{append([]string{"-bogus"}, append(d, "up")...), "flag provided but not defined: -bogus", "up"},
		{append(d, "up", "-bogus"), "flag provided but not defined: -bogus", "up"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus", ""},
		{append(d, "goto"), "goto needs the version V", "goto"},
		{append(d, "goto", "1", "2"), "goto takes only the version V, got 2: 1 2", "goto"},
		{append(d, "goto", "x"), `goto: V must be a version number, 0 to`, "goto"},
		{append(d, "goto", "-1"), `goto: V must be a version number, 0 to`, "goto"},
		{append(d, "goto", "99999999999"), `goto: V must be a version number, 0 to`, "goto"},
		{append(d, "force"), "force needs the version V", "force"},
		{append(d, "force", "-2"), `force: V must be a version number`, "force"},
		{append(d, "up", "extra"), "up takes no arguments, got 1: extra", "up"},
		{append(d, "status", "extra"), "status takes no arguments, got 1: extra", "status"},
		{append(d, "version", "a", "b"), "version takes no arguments, got 2: a b", "version"},
		{append(d, "verify", "x"), "verify takes no arguments, got 1: x", "verify"},
		{append(d, "down"), "down without N reverts every migration: pass -all", "down"},
		{append(d, "down", "0"), `down: N must be a positive number of migrations, got "0"`, "down"},
		{append(d, "down", "1", "2"), "down takes either N or -all, got: 1 2", "down"},
		{append(d, "down", "-all", "3"), "down takes either N or -all, got: 3", "down"},
		{append(d, "up", "-all"), "-all goes with down, not up", "up"},
		{append(d, "status", "-force-data-loss"), "-force-data-loss goes with down or goto, not status", "status"},
		{append(d, "up", "-purge"), "-purge goes with stop, not up", "up"},
		{append(d, "stop"), "stop works on the local server under .pgconvo/ only: it takes no -database", "stop"},
		{[]string{"stop", "now"}, "stop takes no arguments, got 1: now", "stop"},
		{[]string{"stop", "-database="}, "stop works on the local server under .pgconvo/ only: it takes no -database", "stop"},
		{[]string{"help", "-purge"}, "-purge goes with stop, not help", "help"},
		{append(d, "help"), "-database goes with every verb but stop and help, not help", "help"},
		{append(d, "export"), "export needs the conversation ID", "export"},
		{append(d, "export", "a", "b"), "export takes only the conversation ID, got 2: a b", "export"},
		{append(d, "export", "not-a-uuid"), `export: ID must be a conversation id (a uuid), got "not-a-uuid"`, "export"},
		{append(d, "export", "-all", "00000000-0000-0000-0000-000000000000"), "-all goes with down, not export", "export"},
		{append(d, "restore"), "restore needs the FILE export wrote", "restore"},
		{append(d, "import-chatgpt", "-owner", "o", "-all", "f.json"), "-all goes with down, not import-chatgpt", "import-chatgpt"},
		{append(d, "restore", "a", "b"), "restore takes only the FILE export wrote, got 2: a b", "restore"},
		{append(d, "bogus"), `unknown verb "bogus"`, listOfVerbs},
		{[]string{"bogus"}, `unknown verb "bogus"`, listOfVerbs},
		{[]string{"help", "bogus"}, `help: unknown verb "bogus"`, listOfVerbs},
		{append(d, "import-claude", "-owner", "o", "f.json"), `unknown verb "import-claude": the imports are import-chatgpt`, listOfVerbs},
		{[]string{"help", "up", "down"}, "help takes at most one VERB, got 2: up down", "help"},
		{d, "no verb given", ""},
	} {
		r := requireCLI(t, nil, 2, nil, c.args...)
		requireOneError(t, r, c.want)
		if r.stdout != "" {
			t.Fatalf("migrate %v wrote to stdout:\n%s", c.args, r.stdout)
		}
		if c.verb == listOfVerbs {
			// Not the whole usage: the verbs' names, and where the rest is.
			if strings.Contains(r.stderr, "usage: ") || !strings.Contains(r.stderr, "\nverbs: up, down, goto, version,") ||
				!strings.Contains(r.stderr, "import-librechat, stop, help") || strings.Count(r.stderr, "\n") > 6 {
				t.Fatalf("migrate %v: want the error, the list of verbs and no usage, in a few lines:\n%s", c.args, r.stderr)
			}
			continue
		}
		if n := strings.Count(r.stderr, "usage: "); n != 1 {
			t.Fatalf("migrate %v: the usage %d times, want once:\n%s", c.args, n, r.stderr)
		}
		want := every
		if c.verb != "" {
			want = "usage: go run ./cmd/migrate"
			if c.verb != "stop" && c.verb != "help" {
				want += " [-database URL]"
			}
			if c.verb == "export" || c.verb == "restore" {
				want += " [-owner OWNER]"
			}
			want += " " + c.verb
		}
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("migrate %v: want the usage %q in:\n%s", c.args, want, r.stderr)
		}
	}
	requireNothingWritten(t, db, "a usage error", before)
	requireCLI(t, nil, 0, []string{fmt.Sprintf("version 0 of %d: not migrated", latestVersion(t))}, append(d, "status")...)
	requireNothingWritten(t, db, "status", before)
}

// TestCLIEmptyDatabaseFlag: -database given empty (a variable that was
// not set, say) is refused in one line, exit 2, for every verb that takes
// it: it does not fall back to DATABASE_URL (set here, to a database it
// would migrate) or make a local server. -owner given empty is refused too.
func TestCLIEmptyDatabaseFlag(t *testing.T) {
	t.Parallel()
	db, dbURL := newEmptyDB(t)
	before := catalogObjects(t, db)
	const want = "migrate: -database is empty: give a URL, or leave -database out to use DATABASE_URL or the local server\n"
	for _, args := range [][]string{
		{"-database", "", "up"},
		{"-database=", "status"},
		{"version", "-database", ""},
		{"goto", "1", "-database="},
		{"-database", "", "-owner", "o", "import-chatgpt", "conversations.json"},
		{"-database", "", "export", "00000000-0000-0000-0000-000000000000"},
		{"-database", "", "restore", "conversation.json"},
	} {
		dir := t.TempDir()
		r := runCLIIn(t, dir, []string{"DATABASE_URL=" + dbURL}, args...)
		if r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Fatalf("migrate %q: exit %d, want 2 and the one line %q; stdout:\n%s\nstderr:\n%s", args, r.code, want, r.stdout, r.stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Fatalf("migrate %q made %s in the working directory", args, entries[0].Name())
		}
	}
	requireNothingWritten(t, db, "-database given empty", before)

	// -owner given empty is refused alike: it would read or write as no owner.
	for args, want := range map[string]string{
		"-owner  import-openwebui f.json": "give the owner to import the conversations for",
		"-owner  export " + newID():       "give the conversation's owner, or leave -owner out",
		"-owner  restore f.json":          "give the document's owner, or leave -owner out",
	} {
		args := append([]string{"-database", dbURL}, strings.Split(args, " ")...)
		r := runCLIIn(t, t.TempDir(), nil, args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "migrate: -owner is empty: "+want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Fatalf("migrate %q: exit %d, want 2 and one line with %q; stdout:\n%s\nstderr:\n%s", args, r.code, want, r.stdout, r.stderr)
		}
	}
	requireNothingWritten(t, db, "-owner given empty", before)
}
