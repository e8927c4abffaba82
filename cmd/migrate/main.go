// Command migrate applies pgconvo's migrations, speaking golang-migrate's
// verbs:
//
//	go run ./cmd/migrate [-database URL] up
//	go run ./cmd/migrate [-database URL] down N | down -all
//	go run ./cmd/migrate [-database URL] goto V
//	go run ./cmd/migrate [-database URL] version
//	go run ./cmd/migrate [-database URL] force V
//	go run ./cmd/migrate [-database URL] status
//	go run ./cmd/migrate [-database URL] verify
//	go run ./cmd/migrate stop
//
// The database is -database, else $DATABASE_URL, else a local server this
// command starts (or reuses) under .pgconvo/ in the working directory from
// the PostgreSQL binaries installed on the machine. stop stops that server
// (stop-local is another name for it). Flags may come before or after the verb.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

// localDir is where the local server lives, relative to the working directory.
const localDir = ".pgconvo"

const usage = `usage: go run ./cmd/migrate [-database URL] VERB

verbs:
  up             apply every pending migration
  down N         revert the last N migrations
  down -all      revert every migration
  goto V         migrate up or down to version V
  version        print the current version
  force V        record version V as applied without running anything (0: none)
  status         list migrations, applied and pending
  verify         run convo.self_check() and print it; exit 1 if any check fails
  stop           stop the local server under .pgconvo/ (also: stop-local)

The database is -database, else $DATABASE_URL, else a local server under
.pgconvo/ that this command starts from the installed PostgreSQL binaries.

flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

// run parses args and does what they say.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	dbURL := fs.String("database", "", "database URL (postgres://...); default $DATABASE_URL, else the local server")
	all := fs.Bool("all", false, "with down: revert every migration")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	words, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(words) == 0 {
		fs.Usage()
		return errors.New("no verb given")
	}
	verb, rest := words[0], words[1:]

	if verb == "stop" || verb == "stop-local" {
		if err := wantArgs(verb, rest, 0); err != nil {
			return err
		}
		stopped, err := localpg.StopPersistent(ctx, localDir)
		if err != nil {
			return err
		}
		if stopped {
			fmt.Println("stopped the local server in", localDir)
		} else {
			fmt.Println("no local server is running in", localDir)
		}
		return nil
	}

	url, local, err := databaseURL(ctx, *dbURL)
	if err != nil {
		return err
	}
	m, err := migrator.Open(url)
	if err != nil {
		return err
	}
	defer m.Close()

	switch verb {
	case "up":
		if err := wantArgs(verb, rest, 0); err != nil {
			return err
		}
		if err := m.Up(ctx); err != nil {
			return err
		}
		if err := printVersion(ctx, m); err != nil {
			return err
		}
		if local {
			fmt.Printf("database: %s\nconnect:  psql '%s'\n", url, url)
		}
		return nil
	case "down":
		n := 0
		switch {
		case len(rest) == 0 && !*all:
			return errors.New("down without N reverts every migration: pass -all to mean it, or N for N steps")
		case len(rest) == 1 && !*all:
			if n, err = strconv.Atoi(rest[0]); err != nil || n < 1 {
				return fmt.Errorf("down: N must be a positive number, got %q", rest[0])
			}
		case len(rest) > 1 || (*all && len(rest) > 0):
			return errors.New("down takes either N or -all")
		}
		if err := m.Down(ctx, n); err != nil {
			return err
		}
		return printVersion(ctx, m)
	case "goto":
		if err := wantArgs(verb, rest, 1); err != nil {
			return err
		}
		v, err := strconv.ParseUint(rest[0], 10, 32)
		if err != nil {
			return fmt.Errorf("goto: V must be a version number, got %q", rest[0])
		}
		if err := m.Goto(ctx, uint(v)); err != nil {
			return err
		}
		return printVersion(ctx, m)
	case "version":
		if err := wantArgs(verb, rest, 0); err != nil {
			return err
		}
		return printVersion(ctx, m)
	case "force":
		if err := wantArgs(verb, rest, 1); err != nil {
			return err
		}
		v, err := strconv.Atoi(rest[0])
		if err != nil || v < -1 {
			return fmt.Errorf("force: V must be a version number, got %q", rest[0])
		}
		if err := m.Force(ctx, v); err != nil {
			return err
		}
		return printVersion(ctx, m)
	case "status":
		if err := wantArgs(verb, rest, 0); err != nil {
			return err
		}
		list, err := m.Status(ctx)
		if err != nil {
			return err
		}
		for _, mig := range list {
			state := "pending"
			switch {
			case mig.Dirty:
				state = "DIRTY"
			case mig.Applied:
				state = "applied"
			}
			fmt.Printf("%04d  %-8s %s\n", mig.Version, state, mig.Name)
		}
		return nil
	case "verify":
		if err := wantArgs(verb, rest, 0); err != nil {
			return err
		}
		return verify(ctx, url)
	default:
		fs.Usage()
		return fmt.Errorf("unknown verb %q", verb)
	}
}

// parseInterspersed parses flags wherever they appear among args and
// returns the other words in order, so that `up -database URL` works as well
// as `-database URL up`.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return words, nil
		}
		words = append(words, args[0])
		args = args[1:]
	}
}

// wantArgs fails unless verb got exactly n arguments.
func wantArgs(verb string, args []string, n int) error {
	if len(args) != n {
		return fmt.Errorf("%s takes %d argument(s), got %d: %s", verb, n, len(args), strings.Join(args, " "))
	}
	return nil
}

// databaseURL picks the database: the flag, else $DATABASE_URL, else the
// local server, which it starts if needed. local reports the last case.
func databaseURL(ctx context.Context, flagURL string) (url string, local bool, err error) {
	url = flagURL
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	if url != "" {
		if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
			return "", false, errors.New("the database URL must start with postgres:// or postgresql://")
		}
		return url, false, nil
	}
	p, err := localpg.EnsurePersistent(ctx, localDir)
	if err != nil {
		return "", false, fmt.Errorf("starting the local server (set -database or DATABASE_URL to use another): %w", err)
	}
	return p.URL, true, nil
}

// verify prints convo.self_check() as a table and fails if any check does.
func verify(ctx context.Context, url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("opening database: %w", err)
	}
	defer db.Close()
	checks, verr := migrator.Verify(ctx, db)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tOK\tDETAIL")
	for _, c := range checks {
		ok := "ok"
		if !c.OK {
			ok = "FAILED"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Name, ok, c.Detail)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return verr
}

// printVersion prints the database's version, with the way out when dirty.
func printVersion(ctx context.Context, m *migrator.Migrator) error {
	v, dirty, err := m.Version(ctx)
	if err != nil {
		return err
	}
	if dirty {
		fmt.Printf("version %d (dirty)\n", v)
		return &migrator.DirtyError{Version: v}
	}
	fmt.Printf("version %d\n", v)
	return nil
}
