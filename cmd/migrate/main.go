// Command migrate applies pgconvo's migrations, speaking golang-migrate's
// verbs:
//
//	go run ./cmd/migrate [-database URL] up
//	go run ./cmd/migrate [-database URL] down N | down -all [-force-data-loss]
//	go run ./cmd/migrate [-database URL] goto V [-force-data-loss]
//	go run ./cmd/migrate [-database URL] version
//	go run ./cmd/migrate [-database URL] force V
//	go run ./cmd/migrate [-database URL] status
//	go run ./cmd/migrate [-database URL] verify
//	go run ./cmd/migrate stop
//	go run ./cmd/migrate [-database URL] -owner OWNER import-chatgpt FILE
//	go run ./cmd/migrate [-database URL] -owner OWNER import-openwebui FILE
//	go run ./cmd/migrate [-database URL] -owner OWNER import-librechat FILE
//
// The database is -database, else $DATABASE_URL, else a local server this
// command starts (or reuses) under .pgconvo/ in the working directory from
// the PostgreSQL binaries installed on the machine. stop stops that server
// (stop-local is another name for it). Flags may come before or after the verb.
// Every verb but stop first names the database it works on; down and goto
// refuse to drop tables that hold rows unless given -force-data-loss.
// import-chatgpt, import-openwebui and import-librechat import a whole
// export for an owner (internal/chatimport), one conversation per
// transaction; they exit 1 if
// any conversation was refused, 2 on a usage error.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/chatimport"
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
  goto V         migrate up or down to version V (0: revert every migration)
  version        print the current version
  force V        record version V as applied without running anything (0: none)
  status         list migrations, applied and pending
  verify         run convo.self_check() and print it; exit 1 if any check fails
  stop           stop the local server under .pgconvo/ (also: stop-local)
  import-chatgpt -owner OWNER FILE
                 import a ChatGPT export for OWNER: conversations.json, a
                 conversations-NNN.json shard, a directory or .zip of shards,
                 or one conversation
  import-openwebui -owner OWNER FILE
                 import an Open WebUI export (an array of chats, or one chat)
  import-librechat -owner OWNER FILE
                 import a LibreChat export (one conversation, or an array)

down and goto refuse to drop tables that hold rows (the conversations and
the ledger are a record) unless given -force-data-loss.

The imports run as the application: connect as its login role (a member
of convo_app). Each conversation is a transaction of its own; one the
database refuses is reported (index, id, SQLSTATE, DETAIL) and skipped.
They exit 1 if any was refused, 2 on a usage error.

The database is -database, else $DATABASE_URL, else a local server under
.pgconvo/ that this command starts from the installed PostgreSQL binaries.

flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run parses args and does what they say.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	dbURL := fs.String("database", "", "database URL (postgres://...); default $DATABASE_URL, else the local server")
	all := fs.Bool("all", false, "with down: revert every migration")
	forceLoss := fs.Bool("force-data-loss", false, "with down or goto: drop tables even when they hold rows")
	owner := fs.String("owner", "", "with import-chatgpt, import-openwebui or import-librechat: the owner to import for (required)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	words, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return usageError{err}
	}
	if len(words) == 0 {
		fs.Usage()
		return errors.New("no verb given")
	}
	verb, rest := words[0], words[1:]
	if *all && verb != "down" {
		return fmt.Errorf("-all goes with down, not %s", verb)
	}
	if *forceLoss && verb != "down" && verb != "goto" {
		return fmt.Errorf("-force-data-loss goes with down or goto, not %s", verb)
	}
	format, isImport := strings.CutPrefix(verb, "import-")
	if isImport {
		return importExport(ctx, format, *owner, *dbURL, rest, fs.Usage)
	}
	if *owner != "" {
		return fmt.Errorf("-owner goes with an import verb, not %s", verb)
	}

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
	switch verb {
	case "up", "down", "goto", "version", "force", "status", "verify":
	default:
		fs.Usage()
		return fmt.Errorf("unknown verb %q", verb)
	}
	// Check the arguments before starting a server or connecting.
	var n int
	var v int64
	switch verb {
	case "up", "version", "status", "verify":
		err = wantArgs(verb, rest, 0)
	case "down":
		switch {
		case len(rest) == 0 && !*all:
			err = errors.New("down without N reverts every migration: pass -all to mean it, or N for N steps")
		case len(rest) == 1 && !*all:
			if n, err = strconv.Atoi(rest[0]); err != nil || n < 1 {
				err = fmt.Errorf("down: N must be a positive number, got %q", rest[0])
			}
		case len(rest) > 1 || (*all && len(rest) > 0):
			err = errors.New("down takes either N or -all")
		}
	case "goto", "force":
		if err = wantArgs(verb, rest, 1); err == nil {
			if v, err = strconv.ParseInt(rest[0], 10, 32); err != nil || v < 0 && !(verb == "force" && v == -1) {
				err = fmt.Errorf("%s: V must be a version number, got %q", verb, rest[0])
			}
		}
	}
	if err != nil {
		return err
	}

	db, err := chooseDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	fmt.Println("database:", db.describe())
	m, err := migrator.Open(db.url)
	if err != nil {
		return err
	}
	defer m.Close()
	m.DatabaseArg = db.arg
	steps := 0
	m.OnStep(func(s migrator.Step) {
		steps++
		fmt.Println(s)
	})
	noChange := func() {
		if steps == 0 {
			fmt.Println("no change")
		}
	}

	switch verb {
	case "up":
		if err := m.Up(ctx); err != nil {
			return err
		}
		noChange()
		if err := printVersion(ctx, m); err != nil {
			return err
		}
		if db.local != nil {
			fmt.Printf("connect:  psql '%s'\n", db.url)
		}
		return nil
	case "down":
		cur, _, err := m.Version(ctx)
		if err != nil {
			return err
		}
		what, to := "down -all", uint(0)
		if n > 0 {
			what = fmt.Sprintf("down %d", n)
			to = cur - min(uint(n), cur) // Down refuses more steps than are applied.
		}
		if !*forceLoss && uint(n) <= cur {
			if err := refuseDataLoss(ctx, m, what, to); err != nil {
				return err
			}
		}
		if err := m.Down(ctx, n); err != nil {
			return err
		}
		noChange()
		return printVersion(ctx, m)
	case "goto":
		if !*forceLoss {
			if err := refuseDataLoss(ctx, m, "goto "+rest[0], uint(v)); err != nil {
				return err
			}
		}
		if err := m.Goto(ctx, uint(v)); err != nil {
			return err
		}
		noChange()
		return printVersion(ctx, m)
	case "version":
		return printVersion(ctx, m)
	case "force":
		if err := m.Force(ctx, int(v)); err != nil {
			return err
		}
		return printVersion(ctx, m)
	case "status":
		return printStatus(ctx, m)
	default: // verify
		return verify(ctx, db.url)
	}
}

// usageError is a command line the flags or an import verb cannot parse:
// exit code 2.
type usageError struct{ error }

// importExport runs import-chatgpt, import-openwebui or import-librechat
// (format chatgpt, openwebui or librechat): it prints the summary, and
// fails if any conversation was refused.
func importExport(ctx context.Context, format, owner, flagURL string, args []string, usage func()) error {
	if format != "chatgpt" && format != "openwebui" && format != "librechat" {
		usage()
		return usageError{fmt.Errorf("unknown verb import-%s", format)}
	}
	if len(args) != 1 {
		return usageError{fmt.Errorf("import-%s takes one FILE, got %d: %s", format, len(args), strings.Join(args, " "))}
	}
	if owner == "" {
		return usageError{fmt.Errorf("import-%s needs -owner OWNER, the owner to import the conversations for", format)}
	}
	db, err := chooseDatabase(ctx, flagURL)
	if err != nil {
		return err
	}
	fmt.Println("database:", db.describe())
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	opt := chatimport.Options{Format: format, Owner: owner, Path: args[0]}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		opt.Progress = os.Stderr
	}
	sum, err := chatimport.Run(ctx, conn, opt)
	if sum != nil {
		sum.Print(os.Stdout)
	}
	switch {
	case err != nil:
		return fmt.Errorf("import-%s stopped: %w", format, err)
	case len(sum.Refused) > 0:
		return fmt.Errorf("import-%s: %d of %d conversations refused (listed above); the others are imported",
			format, len(sum.Refused), sum.Conversations())
	}
	return nil
}

// parseInterspersed parses flags wherever they appear among args and
// returns the other words in order, so that `up -database URL` works as well
// as `-database URL up`. A negative number after the verb is a word
// (force -1), not a flag.
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
		for len(args) > 0 && negativeNumber.MatchString(args[0]) {
			words = append(words, args[0])
			args = args[1:]
		}
	}
}

// negativeNumber matches a word like -1.
var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// wantArgs fails unless verb got exactly n arguments.
func wantArgs(verb string, args []string, n int) error {
	if len(args) != n {
		return fmt.Errorf("%s takes %d argument(s), got %d: %s", verb, n, len(args), strings.Join(args, " "))
	}
	return nil
}

// database is the database a command works on, and where it came from.
type database struct {
	// url is the URL to connect with.
	url string
	// arg is the -database argument that repeats this choice in a command
	// to paste, spelled for the shell; empty for the local server.
	arg string
	// from says where url came from: "-database" or "DATABASE_URL".
	from string
	// local is the local server, when that is the database.
	local *localpg.Persistent
}

// chooseDatabase picks the database: the flag, else $DATABASE_URL, else
// the local server, which it starts if needed.
func chooseDatabase(ctx context.Context, flagURL string) (*database, error) {
	db := &database{url: flagURL, from: "-database", arg: shellQuote(maskURL(flagURL))}
	if db.url == "" {
		db.url, db.from, db.arg = os.Getenv("DATABASE_URL"), "DATABASE_URL", `"$DATABASE_URL"`
	}
	if db.url != "" {
		if !strings.HasPrefix(db.url, "postgres://") && !strings.HasPrefix(db.url, "postgresql://") {
			return nil, fmt.Errorf("the database URL (%s) must start with postgres:// or postgresql://", db.from)
		}
		return db, nil
	}
	local, err := localpg.EnsurePersistent(ctx, localDir)
	if err != nil {
		return nil, localServerError(err)
	}
	return &database{url: local.URL, local: local}, nil
}

// localServerError says why there is no local server, and what to do.
func localServerError(err error) error {
	if errors.Is(err, localpg.ErrNoBinaries) {
		return fmt.Errorf("%w: %s, or give a database with -database or DATABASE_URL", err, localpg.InstallHint)
	}
	return fmt.Errorf("starting the local server (give -database or DATABASE_URL to use another database): %w", err)
}

// describe names the database for the first line of output: its URL with
// any password masked, and where the choice came from.
func (db *database) describe() string {
	switch {
	case db.local == nil:
		return fmt.Sprintf("%s (from %s)", maskURL(db.url), db.from)
	case db.local.Started:
		return fmt.Sprintf("%s (the local server in %s/, started now for this command; "+
			"`go run ./cmd/migrate stop` stops it)", db.url, localDir)
	default:
		return fmt.Sprintf("%s (the local server in %s/)", db.url, localDir)
	}
}

// maskURL returns rawURL with its password, in the user part or a
// password= parameter, replaced by xxxxx.
func maskURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if q := u.Query(); q.Get("password") != "" {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	if password, _ := u.User.Password(); password != "" {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// shellQuote quotes s for a POSIX shell; "" stays "".
func shellQuote(s string) string {
	if s == "" {
		return ""
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// refuseDataLoss fails, naming the tables and their rows, when migrating
// down to version to would drop tables that hold rows.
func refuseDataLoss(ctx context.Context, m *migrator.Migrator, what string, to uint) error {
	err := m.CheckDataLoss(ctx, to)
	var loss *migrator.DataLossError
	if errors.As(err, &loss) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s refused: going from version %d to %d would drop tables that hold rows:\n", what, loss.From, loss.To)
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, t := range loss.Tables {
			more, noun := "", "rows"
			if t.AtLeast {
				more = "at least "
			} else if t.Rows == 1 {
				noun = "row"
			}
			fmt.Fprintf(w, "  %s\t%s%d %s\n", t.Table, more, t.Rows, noun)
		}
		w.Flush()
		b.WriteString("nothing was changed. The conversations and the ledger are a record: back them up, " +
			"then run the same command with -force-data-loss to drop them.")
		return errors.New(b.String())
	}
	if err != nil {
		return fmt.Errorf("%s refused: %w\nnothing was changed; -force-data-loss goes down without this check", what, err)
	}
	return nil
}

// printStatus prints every migration with its state, and the version.
func printStatus(ctx context.Context, m *migrator.Migrator) error {
	list, err := m.Status(ctx)
	if err != nil {
		return err
	}
	v, dirty, err := m.Version(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tNAME\tSTATE")
	pending := 0
	for _, mig := range list {
		state := "pending"
		switch {
		case mig.Dirty:
			state = "dirty (failed half way)"
		case mig.Applied:
			state = "applied"
		default:
			pending++
		}
		fmt.Fprintf(w, "%04d\t%s\t%s\n", mig.Version, mig.Name, state)
	}
	latest := list[len(list)-1].Version
	if v > latest {
		fmt.Fprintf(w, "%04d\t?\tapplied, and not in this checkout\n", v)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case dirty:
		return &migrator.DirtyError{Version: v, DatabaseArg: m.DatabaseArg}
	case v > latest:
		fmt.Printf("version %d: newer than this checkout, whose latest is %d\n", v, latest)
	case pending > 0:
		fmt.Printf("version %d of %d, %d pending\n", v, latest, pending)
	default:
		fmt.Printf("version %d of %d: up to date\n", v, latest)
	}
	return nil
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
		return &migrator.DirtyError{Version: v, DatabaseArg: m.DatabaseArg}
	}
	fmt.Printf("version %d\n", v)
	return nil
}
