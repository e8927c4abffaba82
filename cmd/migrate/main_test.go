package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// TestMaskURL: a password, in the user part or a parameter, never reaches
// the output.
func TestMaskURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app@db:5432/x?sslmode=require":              "postgres://app@db:5432/x?sslmode=require",
		"postgres://app:s3cret@db/x":                            "postgres://app:xxxxx@db/x",
		"postgres://app@db/x?password=s3cret&sslmode=disable":   "postgres://app@db/x?password=xxxxx&sslmode=disable",
		"postgresql://app:p%40ss@db/x?password=s3cret":          "postgresql://app:xxxxx@db/x?password=xxxxx",
		"postgres://postgres:@127.0.0.1:5432/x?sslmode=disable": "postgres://postgres:@127.0.0.1:5432/x?sslmode=disable",
	} {
		if got := maskURL(in); got != want {
			t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseInterspersed: flags go anywhere, and a negative number after
// the verb is an argument.
func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	db := fs.String("database", "", "")
	force := fs.Bool("force-data-loss", false, "")
	words, err := parseInterspersed(fs, []string{"force", "-1", "-database", "postgres://x", "down", "-force-data-loss", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(words, " ") != "force -1 down 2" || *db != "postgres://x" || !*force {
		t.Fatalf("words %q, database %q, force %v", words, *db, *force)
	}
}

// TestLocalServerError: without server binaries, the CLI says to install
// PostgreSQL or give a database, naming the CLI's variable.
func TestLocalServerError(t *testing.T) {
	t.Parallel()
	err := localServerError(fmt.Errorf("looking: %w", localpg.ErrNoBinaries))
	for _, want := range []string{"no PostgreSQL server binaries found", "apt-get install postgresql", "-database or DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("want %q in: %v", want, err)
		}
	}
	if !errors.Is(err, localpg.ErrNoBinaries) {
		t.Fatalf("%v does not wrap ErrNoBinaries", err)
	}
}

// TestUsageListsEveryVerb: the usage names every verb the command runs,
// with its arguments, and every flag; help VERB exists for each.
func TestUsageListsEveryVerb(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printUsage(&b, newFlags(new(options)))
	usage := b.String()
	for _, v := range []string{"up", "down N | -all", "goto V", "version", "force V", "status", "verify", "export ID",
		"restore FILE", "import-chatgpt -owner OWNER [-json] FILE", "import-openwebui -owner OWNER [-json] FILE",
		"import-librechat -owner OWNER [-json] FILE", "stop [-purge]", "help [VERB]"} {
		if !strings.Contains(usage, "\n  "+v+" ") && !strings.Contains(usage, "\n  "+v+"\n") {
			t.Errorf("the usage lists no %q:\n%s", v, usage)
		}
	}
	for _, f := range []string{"-database", "-owner", "-all", "-force-data-loss", "-purge"} {
		if !strings.Contains(usage, "  "+f+" ") && !strings.Contains(usage, "  "+f+"\n") {
			t.Errorf("the usage lists no flag %s", f)
		}
	}
	for _, v := range verbs {
		var b strings.Builder
		printVerbUsage(&b, &v)
		if !strings.HasPrefix(b.String(), "usage: go run ./cmd/migrate") || strings.Count(b.String(), "usage: ") != 1 {
			t.Errorf("help %s:\n%s", v.name, b.String())
		}
		if strings.Contains(strings.ToLower(b.String()), "issue") {
			t.Errorf("help %s names a tracker:\n%s", v.name, b.String())
		}
	}
	if findVerb("stop-local") == nil || findVerb("stop-local").name != "stop" {
		t.Error("stop-local is not stop")
	}
}

// TestReportExitCodes: a usage error exits 2 and prints its message once,
// then the verb's usage once (an unknown verb: the verbs' names, no usage);
// any other error exits 1 with its message.
func TestReportExitCodes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if code := report(usagef("goto", "goto needs the version V"), &b); code != 2 {
		t.Fatalf("usage error: exit %d", code)
	}
	out := b.String()
	if !strings.HasPrefix(out, "migrate: goto needs the version V\n\nusage: go run ./cmd/migrate [-database URL] goto V") ||
		strings.Count(out, "goto needs") != 1 || strings.Count(out, "usage: ") != 1 {
		t.Fatalf("usage error printed:\n%s", out)
	}
	b.Reset()
	if code := report(unknownVerbf("unknown verb %q", "bogus"), &b); code != 2 ||
		!strings.HasPrefix(b.String(), "migrate: unknown verb \"bogus\"\nverbs: up, down,") || strings.Contains(b.String(), "usage: ") {
		t.Fatalf("unknown verb: exit %d, printed:\n%s", code, b.String())
	}
	b.Reset()
	if code := report(errors.New("boom"), &b); code != 1 || b.String() != "migrate: boom\n" {
		t.Fatalf("error: exit %d, printed %q", code, b.String())
	}
	if code := report(nil, &b); code != 0 {
		t.Fatalf("success: exit %d", code)
	}
}

// TestShellQuote: a word the shell reads as written stays bare; anything
// else, a URL above all, is quoted.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"pgconvo": "pgconvo", "my-db_2": "my-db_2", "it's": `'it'\''s'`,
		"postgres://a@b/c": "'postgres://a@b/c'", "/tmp/conversations.json": "/tmp/conversations.json", "": ""} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
