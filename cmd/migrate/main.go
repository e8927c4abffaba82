// Command migrate applies pgconvo's migrations, speaking golang-migrate's
// verbs, and carries the DBA's verbs that go with them:
//
//	go run ./cmd/migrate [-database URL] up
//	go run ./cmd/migrate [-database URL] down N | down -all [-force-data-loss]
//	go run ./cmd/migrate [-database URL] goto V [-force-data-loss]
//	go run ./cmd/migrate [-database URL] version
//	go run ./cmd/migrate [-database URL] force V
//	go run ./cmd/migrate [-database URL] status
//	go run ./cmd/migrate [-database URL] verify
//	go run ./cmd/migrate [-database URL] [-owner OWNER] export ID > conversation.json
//	go run ./cmd/migrate [-database URL] [-owner OWNER] restore FILE
//	go run ./cmd/migrate [-database URL] -owner OWNER import-chatgpt FILE
//	go run ./cmd/migrate [-database URL] -owner OWNER import-openwebui FILE
//	go run ./cmd/migrate [-database URL] -owner OWNER import-librechat FILE
//	go run ./cmd/migrate stop [-purge]
//	go run ./cmd/migrate help [VERB]
//
// The database is -database, else $DATABASE_URL, else a local server under
// .pgconvo/ in the working directory: up (or goto) makes it from the
// PostgreSQL binaries installed on the machine, and every verb starts it
// when it is stopped; a verb that only reads never makes one. stop stops
// that server (stop-local is another name for it); stop -purge also
// removes its data. -database given empty is refused: it falls back to
// neither.
// Flags may come before or after the verb. Every verb but stop, help and
// export first names the database it works on (export names it on
// standard error: its standard output is the document alone).
//
// up checks first that the connected role may run every pending migration
// and refuses, changing nothing, when it lacks a privilege; down and goto
// refuse to drop tables that hold rows unless given -force-data-loss;
// status, version and verify only read. export prints
// convo.export_conversation(ID); restore hands a file of it to
// convo.import_conversation. import-chatgpt, import-openwebui and
// import-librechat import a whole export for an owner (internal/chatimport),
// one conversation per transaction.
//
// Exit status: 0 done; 1 failed, with one line saying what to do; 2 a
// usage error, with the verb's usage.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pgconvo/pgconvo/internal/chatimport"
	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// localDir is where the local server lives, relative to the working directory.
const localDir = ".pgconvo"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:])
	stop()
	os.Exit(report(err, os.Stderr))
}

// report writes err, if any, to w as the command's last words, and returns
// the exit code: 2 for a usage error, which the verb's usage follows (the
// verbs' names, for an unknown verb).
func report(err error, w io.Writer) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(w, "migrate:", ue.err)
		if ue.listVerbs {
			printVerbList(w)
		}
		if ue.listVerbs || ue.oneLine {
			return 2
		}
		fmt.Fprintln(w)
		if v := findVerb(ue.verb); v != nil {
			printVerbUsage(w, v)
		} else {
			printUsage(w, newFlags(new(options)))
		}
		return 2
	default:
		fmt.Fprintln(w, "migrate:", err)
		return 1
	}
}

// options are the command's flags.
type options struct {
	dbURL, owner                string
	all, forceLoss, purge, json bool
	given                       map[string]bool // the flags on the command line, by name, whatever their value
}

// newFlags returns the command's flag set, parsing into o. It prints
// nothing: run reports its errors, once.
func newFlags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.dbURL, "database", "", "the database URL (postgres://...); default $DATABASE_URL, else the local server under .pgconvo/")
	fs.BoolVar(&o.all, "all", false, "with down: revert every migration")
	fs.BoolVar(&o.forceLoss, "force-data-loss", false, "with down or goto: drop tables even when they hold rows")
	fs.StringVar(&o.owner, "owner", "", "with an import verb (required), export or restore: the owner whose conversations these are")
	fs.BoolVar(&o.purge, "purge", false, "with stop: also remove the local server's data and .pgconvo/")
	fs.BoolVar(&o.json, "json", false, "with an import verb: print the summary as one JSON object")
	return fs
}

// run parses args and does what they say.
func run(ctx context.Context, args []string) error {
	var o options
	fs := newFlags(&o)
	words, err := parseInterspersed(fs, args)
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	verbName := ""
	if len(words) > 0 {
		verbName = words[0]
	}
	if errors.Is(err, flag.ErrHelp) {
		return help(verbName, fs)
	}
	if err != nil {
		if findVerb(verbName) == nil {
			verbName = firstVerb(args)
		}
		return &usageError{verb: verbName, err: err}
	}
	if len(words) == 0 {
		return usagef("", "no verb given: name one of the verbs below")
	}
	rest := words[1:]
	if verbName == "help" {
		if err := flagsGoWith(verbName, o); err != nil {
			return err
		}
		if len(rest) > 1 {
			return usagef("help", "help takes at most one VERB, got %d: %s", len(rest), strings.Join(rest, " "))
		}
		topic := ""
		if len(rest) == 1 {
			topic = rest[0]
			if findVerb(topic) == nil {
				return unknownVerbf("help: unknown verb %q", topic)
			}
		}
		return help(topic, fs)
	}
	if format, ok := strings.CutPrefix(verbName, "import-"); ok {
		if findVerb(verbName) == nil {
			return unknownVerbf("unknown verb %q: the imports are import-chatgpt, import-openwebui and import-librechat", verbName)
		}
		if err := flagsGoWith(verbName, o, "database", "owner", "json"); err != nil {
			return err
		}
		return importExport(ctx, format, o.owner, o.dbURL, o.json, rest)
	}
	v := findVerb(verbName)
	if v == nil {
		return unknownVerbf("unknown verb %q", verbName)
	}
	switch v.name {
	case "stop":
		if err := flagsGoWith(verbName, o, "purge"); err != nil {
			return err
		}
		if err := noArgs(verbName, rest); err != nil {
			return err
		}
		return stopLocal(ctx, o.purge)
	case "export", "restore":
		if err := flagsGoWith(verbName, o, "database", "owner"); err != nil {
			return err
		}
		if v.name == "export" {
			return exportConversation(ctx, o, rest)
		}
		return restoreConversation(ctx, o, rest)
	}
	allowed := []string{"database"}
	switch v.name {
	case "down":
		allowed = append(allowed, "all", "force-data-loss")
	case "goto":
		allowed = append(allowed, "force-data-loss")
	}
	if err := flagsGoWith(verbName, o, allowed...); err != nil {
		return err
	}
	return migrateVerb(ctx, v.name, o, rest)
}

// help prints the usage, or verb's, on standard output.
func help(verb string, fs *flag.FlagSet) error {
	if v := findVerb(verb); v != nil && v.name != "help" {
		printVerbUsage(os.Stdout, v)
		return nil
	}
	printUsage(os.Stdout, fs)
	return nil
}

// firstVerb returns the first of args that names a verb, or "".
func firstVerb(args []string) string {
	for _, a := range args {
		if findVerb(a) != nil {
			return a
		}
	}
	return ""
}

// flagsGoWith fails, as a usage error, when a flag was given that verb does
// not take (allowed names those it does), or -database or -owner was given
// empty.
func flagsGoWith(verb string, o options, allowed ...string) error {
	goesWith := map[string]string{
		"database":        "every verb but stop and help",
		"owner":           "an import verb, export or restore",
		"all":             "down",
		"force-data-loss": "down or goto",
		"purge":           "stop",
		"json":            "an import verb",
	}
	for _, name := range []string{"database", "owner", "all", "force-data-loss", "purge", "json"} {
		if !o.given[name] || contains(allowed, name) {
			continue
		}
		if name == "database" && verb == "stop" {
			return usagef(verb, "%s works on the local server under %s/ only: it takes no -database", verb, localDir)
		}
		return usagef(verb, "-%s goes with %s, not %s", name, goesWith[name], verb)
	}
	// Given empty (an unset shell variable, say), it must not fall back to
	// DATABASE_URL or the local server: that is another database.
	if o.given["database"] && o.dbURL == "" {
		return &usageError{verb: verb, oneLine: true,
			err: errors.New("-database is empty: give a URL, or leave -database out to use DATABASE_URL or the local server")}
	}
	// Likewise -owner: given empty it would read or write as no owner.
	if o.given["owner"] && o.owner == "" {
		instead := "give the owner to import the conversations for"
		switch verb {
		case "export":
			instead = "give the conversation's owner, or leave -owner out to read as a member of convo_reader or convo_admin"
		case "restore":
			instead = "give the document's owner, or leave -owner out to restore for the owner the document names"
		}
		return &usageError{verb: verb, oneLine: true, err: fmt.Errorf("-owner is empty: %s", instead)}
	}
	return nil
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// noArgs fails, as a usage error, when verb got arguments.
func noArgs(verb string, args []string) error {
	if len(args) > 0 {
		return usagef(verb, "%s takes no arguments, got %d: %s", verb, len(args), strings.Join(args, " "))
	}
	return nil
}

// oneArg returns verb's one argument, what, or a usage error.
func oneArg(verb, what string, args []string) (string, error) {
	switch len(args) {
	case 1:
		return args[0], nil
	case 0:
		return "", usagef(verb, "%s needs %s", verb, what)
	default:
		return "", usagef(verb, "%s takes only %s, got %d: %s", verb, what, len(args), strings.Join(args, " "))
	}
}

// stopLocal stops the local server, and with purge removes its data.
func stopLocal(ctx context.Context, purge bool) error {
	if !purge {
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
	p, err := localpg.PurgePersistent(ctx, localDir)
	if p != nil && p.Stopped {
		fmt.Println("stopped the local server in", localDir)
	}
	if err != nil {
		return err
	}
	for _, d := range p.Removed {
		fmt.Println("removed", d)
	}
	if len(p.Removed) == 0 {
		fmt.Printf("no local server data in %s: nothing to remove\n", localDir)
	}
	return nil
}

// migrateVerb runs up, down, goto, version, force, status or verify.
func migrateVerb(ctx context.Context, verb string, o options, rest []string) error {
	latest, err := migrator.Latest()
	if err != nil {
		return err
	}
	// Check the arguments before starting a server or connecting.
	var n int
	var v int64
	switch verb {
	case "up", "version", "status", "verify", "distribute":
		err = noArgs(verb, rest)
	case "down":
		switch {
		case len(rest) == 0 && !o.all:
			err = usagef(verb, "down without N reverts every migration: pass -all to mean it, or N for N steps")
		case len(rest) == 1 && !o.all:
			if n, err = strconv.Atoi(rest[0]); err != nil || n < 1 {
				err = usagef(verb, "down: N must be a positive number of migrations, got %q", rest[0])
			}
		case len(rest) > 1 || (o.all && len(rest) > 0):
			err = usagef(verb, "down takes either N or -all, got: %s", strings.Join(rest, " "))
		}
	case "goto", "force":
		var word string
		if word, err = oneArg(verb, "the version V", rest); err == nil {
			if v, err = strconv.ParseInt(word, 10, 32); err != nil || v < 0 && !(verb == "force" && v == -1) {
				err = usagef(verb, "%s: V must be a version number, 0 to %d, got %q", verb, latest, word)
			}
		}
	}
	if err != nil {
		return err
	}

	db, err := chooseDatabase(ctx, o.dbURL, verb == "up" || verb == "goto")
	if err != nil {
		return err
	}
	fmt.Println("database:", db.describe())
	conn, err := openDB(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close() // the Migrator closes it too, when there is one: closing twice is harmless

	switch verb {
	case "status":
		return printStatus(ctx, conn, db)
	case "version":
		h, err := readHistory(ctx, conn, db)
		if h != nil && h.Dirty {
			fmt.Printf("version %d (dirty)\n", h.Version)
		}
		if err != nil {
			return err
		}
		fmt.Printf("version %d\n", h.Version)
		return nil
	case "verify":
		return verify(ctx, conn, db)
	case "distribute":
		return distribute(ctx, conn)
	}

	// Another command may be migrating this database right now: wait for
	// it (its lock) before reading the history, which it marks dirty while
	// it runs, and hold the lock until the checks below are done.
	release, err := migrator.HoldMigrationLock(ctx, conn)
	if err != nil {
		return err
	}
	h, err := readHistory(ctx, conn, db)
	// force is how a dirty database is repaired: it runs on one.
	if err != nil && !(verb == "force" && h != nil && h.Dirty) {
		release()
		return err
	}
	// What the verb would run, to check the privileges it needs first.
	var to uint
	check := true
	switch verb {
	case "up":
		to = latest
	case "down":
		to = h.Version - min(uint(n), h.Version)
		if o.all {
			to = 0
		}
		check = o.all || uint(n) <= h.Version // else Down refuses, naming the versions
	case "goto":
		to = uint(v)
		check = to <= latest // else Goto refuses, naming the migrations
	case "force":
		check = false // runs no migration
	}
	if check {
		if err := migrator.CheckPrivileges(ctx, conn, h, to); err != nil {
			release()
			var pe *migrator.PrivilegeError
			if errors.As(err, &pe) {
				return fmt.Errorf("%s refused, nothing was changed: %w", strings.Join(append([]string{verb}, rest...), " "), err)
			}
			return err
		}
	}
	release() // golang-migrate takes it again to migrate

	m, err := migrator.New(conn)
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
		what := "down -all"
		if n > 0 {
			what = fmt.Sprintf("down %d", n)
		}
		if !o.forceLoss && uint(n) <= h.Version {
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
		if !o.forceLoss {
			if err := refuseDataLoss(ctx, m, "goto "+rest[0], uint(v)); err != nil {
				return err
			}
		}
		if err := m.Goto(ctx, uint(v)); err != nil {
			return err
		}
		noChange()
		return printVersion(ctx, m)
	default: // force
		if err := m.Force(ctx, int(v)); err != nil {
			return err
		}
		return printVersion(ctx, m)
	}
}

// readHistory reads the migration history without writing anything, and
// fails with the way out when the database is dirty.
func readHistory(ctx context.Context, conn *sql.DB, db *database) (*migrator.History, error) {
	h, err := migrator.ReadHistory(ctx, conn)
	if err != nil {
		return nil, err
	}
	if h.Dirty {
		return h, &migrator.DirtyError{Version: h.Version, DatabaseArg: db.arg}
	}
	return h, nil
}

// importExport runs import-chatgpt, import-openwebui or import-librechat
// (format chatgpt, openwebui or librechat): it prints the summary, and
// fails if any conversation was refused.
func importExport(ctx context.Context, format, owner, flagURL string, asJSON bool, args []string) error {
	verb := "import-" + format
	if len(args) != 1 {
		return usagef(verb, "%s takes one FILE, got %d: %s", verb, len(args), strings.Join(args, " "))
	}
	if owner == "" {
		return usagef(verb, "%s needs -owner OWNER, the owner to import the conversations for", verb)
	}
	db, err := chooseDatabase(ctx, flagURL, false)
	if err != nil {
		return err
	}
	out := os.Stdout
	if asJSON {
		out = os.Stderr // stdout holds the JSON only
	}
	fmt.Fprintln(out, "database:", db.describe())
	conn, err := connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	opt := chatimport.Options{Format: format, Owner: owner, Path: args[0]}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		opt.Progress = os.Stderr
	}
	sum, err := chatimport.Run(ctx, conn, opt)
	if sum != nil {
		if asJSON {
			if err := sum.PrintJSON(os.Stdout); err != nil {
				return err
			}
		} else {
			sum.Print(os.Stdout)
		}
	}
	var fileErr *chatimport.FileError
	switch {
	case errors.As(err, &fileErr) && sum == nil:
		return fmt.Errorf("%s: %w; nothing was imported", verb, err)
	case err != nil:
		return fmt.Errorf("%s stopped: %w", verb, err)
	case len(sum.Refused) > 0 && sum.Imported+sum.Present == 0:
		return fmt.Errorf("%s: every conversation was refused (%d, listed above): nothing was imported", verb, len(sum.Refused))
	case len(sum.Refused) > 0:
		return fmt.Errorf("%s: %d of %d conversations refused (listed above); the other %d are imported or were already there",
			verb, len(sum.Refused), sum.Total(), sum.Imported+sum.Present)
	}
	return nil
}

// parseInterspersed parses flags wherever they appear among args and
// returns the other words in order, so that `up -database URL` works as well
// as `-database URL up`. A negative number after the verb is a word
// (force -1), not a flag. On an error it returns the words met before it.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return words, err
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
		return fmt.Errorf("%s refused: %w; nothing was changed; -force-data-loss goes down without this check", what, err)
	}
	return nil
}

// printStatus prints every migration with its state, and the version. It
// only reads.
// distribute runs migrator.Distribute and says what it did.
func distribute(ctx context.Context, conn *sql.DB) error {
	unkept, err := migrator.Distribute(ctx, conn)
	if err != nil {
		return err
	}
	for _, fk := range unkept {
		fmt.Println("foreign key not kept (its rows are on different nodes):", fk)
	}
	d, err := migrator.ReadDistribution(ctx, conn)
	if err != nil {
		return err
	}
	fmt.Println("distribution:", d)
	return nil
}

func printStatus(ctx context.Context, conn *sql.DB, db *database) error {
	all, err := migrator.List(pgconvosql.Migrations)
	if err != nil {
		return err
	}
	h, err := migrator.ReadHistory(ctx, conn)
	if err != nil {
		return err
	}
	v, dirty := h.Version, h.Dirty
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tNAME\tSTATE")
	pending := 0
	for _, mig := range all {
		state := "pending"
		switch {
		case dirty && mig.Version == v:
			state = "dirty (failed half way)"
		case mig.Version <= v:
			state = "applied"
		default:
			pending++
		}
		fmt.Fprintf(w, "%04d\t%s\t%s\n", mig.Version, mig.Name, state)
	}
	latest := all[len(all)-1].Version
	if v > latest {
		fmt.Fprintf(w, "%04d\t?\tapplied, and not in this checkout\n", v)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if d, err := migrator.ReadDistribution(ctx, conn); err != nil {
		return err
	} else if d.Citus {
		fmt.Println("distribution:", d)
	}
	switch {
	case dirty:
		return &migrator.DirtyError{Version: v, DatabaseArg: db.arg}
	case v > latest:
		fmt.Printf("version %d: newer than this checkout, whose latest is %d\n", v, latest)
	case v == 0:
		fmt.Printf("version 0 of %d: not migrated, %d pending (`%s` applies them)\n", latest, pending, db.command("up"))
	case pending > 0:
		fmt.Printf("version %d of %d, %d pending\n", v, latest, pending)
	default:
		fmt.Printf("version %d of %d: up to date\n", v, latest)
	}
	return nil
}

// verify prints convo.self_check() as a table and fails if any check does.
func verify(ctx context.Context, conn *sql.DB, db *database) error {
	// A role that may not read the history (a member of convo_reader, say)
	// may still verify: only a history that says "too early" stops it.
	if h, err := migrator.ReadHistory(ctx, conn); err == nil && h.Version < 3 {
		state := "not migrated"
		if h.Version > 0 {
			state = "before 0003_trust"
		}
		return fmt.Errorf("the database is at version %d (%s): verify runs convo.self_check(), which 0003_trust brings; "+
			"migrate first with `%s`", h.Version, state, db.command("up"))
	}
	checks, verr := migrator.Verify(ctx, conn)
	if errors.Is(verr, migrator.ErrNoSelfCheck) {
		return fmt.Errorf("this database has no convo.self_check(), which 0003_trust brings: migrate it first with `%s`", db.command("up"))
	}
	if len(checks) == 0 {
		return verr
	}
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
