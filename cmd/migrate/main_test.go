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
