package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is how the usage spells the command.
const command = "go run ./cmd/migrate"

// verbDoc is one verb as the usage describes it.
type verbDoc struct {
	// name is the verb; args what follows it ("N | -all"); summary one
	// line for the list of verbs; more what `help VERB` adds.
	name, args, summary, more string
}

// dataLossNote is what down and goto say of -force-data-loss.
const dataLossNote = `It refuses to drop tables that hold rows (the conversations and the
ledger are a record), naming them, and changes nothing, unless given
-force-data-loss.`

// importNote is what the import verbs say of how they run.
const importNote = `The imports run as the application: connect as its login role (a member
of convo_app). Each conversation is a transaction of its own, through
convo.import_history; the summary lists each one, the export's id to
pgconvo's conversation id, imported or already present (a repeat writes
nothing); one the database refuses is reported (index, id, SQLSTATE,
DETAIL, HINT) and skipped. -json prints the summary as one JSON object
instead. They exit 1 if any was refused, 2 on a usage error.`

// verbs are the verbs in the order the usage lists them.
var verbs = []verbDoc{
	{name: "up", summary: "apply every pending migration",
		more: `It first checks that the connected role has every privilege the pending
migrations need (0003 creates roles: CREATEROLE, unless a superuser), and
refuses, changing nothing, when it lacks one.`},
	{name: "down", args: "N | -all", summary: "revert the last N migrations, or every one with -all",
		more: dataLossNote},
	{name: "goto", args: "V", summary: "migrate up or down to version V (0: revert every migration)",
		more: dataLossNote},
	{name: "version", summary: "print the current version (reads only)"},
	{name: "force", args: "V", summary: "record version V as applied without running anything (0: none)",
		more: `Use it to recover a dirty database (a migration that failed half way)
once the schema is repaired by hand.`},
	{name: "status", summary: "list migrations, applied and pending (reads only)",
		more: `It reads the migration history table when there is one and never creates
it: a database never migrated is version 0.`},
	{name: "distribute", summary: "spread a migrated database over its Citus workers (docs/scaling.md)",
		more: `Run it on the Citus coordinator, with the workers added (citus_add_node),
at the latest version, as a superuser or a member of convo_owner. It
creates pgconvo's roles on every worker, distributes the tables (a
conversation's rows on the node of its id, an owner's receipts on the node
of the owner) and routes the API so that each call that names a
conversation runs on the node that holds it. Run again, it does only what
is left; up on a distributed database keeps the routing.`},
	{name: "verify", summary: "run convo.self_check() and print it; exit 1 if any check fails",
		more: `Run it as a member of convo_reader (or convo_admin), as the role that
installed pgconvo (with CREATEROLE it becomes a member of convo_reader for
verify's read-only transaction only) or as a superuser, on a database
migrated to version 3 or later.`},
	{name: "export", args: "ID", summary: "print conversation ID as JSON: convo.export_conversation(ID)",
		more: `Standard output is the document alone: redirect it to a file
(` + command + ` -owner OWNER export ID > conversation.json).
-owner OWNER reads as that owner (SET LOCAL convo.owner_id), as an
application login (a member of convo_app) must; a member of convo_reader
or convo_admin may leave it out.`},
	{name: "restore", args: "FILE", summary: "restore an export into this database: convo.import_conversation",
		more: `Run it as a member of convo_admin. The owner is the document's
(conversation.owner_id); -owner OWNER must name the same one. The database
accepts only a history its API could have written, and writes nothing
otherwise (SQLSTATE CV011); restoring the same document again writes
nothing.`},
	{name: "import-chatgpt", args: "-owner OWNER [-json] FILE",
		summary: "import a ChatGPT export for OWNER: conversations.json, a conversations-NNN.json shard, a directory or .zip of shards, or one conversation",
		more:    importNote},
	{name: "import-openwebui", args: "-owner OWNER [-json] FILE",
		summary: "import an Open WebUI export (an array of chats, or one chat)", more: importNote},
	{name: "import-librechat", args: "-owner OWNER [-json] FILE",
		summary: "import a LibreChat export (one conversation, or an array)", more: importNote},
	{name: "stop", args: "[-purge]",
		summary: "stop the local server under .pgconvo/ (also: stop-local); -purge also removes its data",
		more: `-purge stops the server if it runs, then removes its data directory, log
and port, wherever they are (in .pgconvo/, or, when the server's OS user
cannot reach the working directory, in /var/tmp/pgconvo-<hash>), and
.pgconvo/ itself. The next command without a database starts an empty one.`},
	{name: "help", args: "[VERB]", summary: "print this, or what VERB does"},
}

// findVerb returns the verb named name (stop-local is stop), or nil.
func findVerb(name string) *verbDoc {
	if name == "stop-local" {
		name = "stop"
	}
	for i := range verbs {
		if verbs[i].name == name {
			return &verbs[i]
		}
	}
	return nil
}

// synopsis is the verb's usage line.
func (v *verbDoc) synopsis() string {
	s := "usage: " + command
	if v.name != "stop" && v.name != "help" {
		s += " [-database URL]"
	}
	s += " " + v.name
	if v.args != "" {
		s += " " + v.args
	}
	switch v.name {
	case "down", "goto":
		s += " [-force-data-loss]"
	case "export", "restore":
		s = strings.Replace(s, " "+v.name, " [-owner OWNER] "+v.name, 1)
	}
	return s
}

// printVerbUsage writes what `help VERB` prints.
func printVerbUsage(w io.Writer, v *verbDoc) {
	fmt.Fprintf(w, "%s\n\n%s.\n", v.synopsis(), capitalize(v.summary))
	if v.more != "" {
		fmt.Fprintf(w, "\n%s\n", v.more)
	}
	fmt.Fprintf(w, "\n`%s help` lists every verb and flag.\n", command)
}

// printUsage writes the whole usage: every verb, then every flag of fs.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [-database URL] VERB [ARGUMENTS]\n\nverbs:\n", command)
	for _, v := range verbs {
		head := v.name
		if v.args != "" {
			head += " " + v.args
		}
		lines := wrap(v.summary, 58)
		if len(head) > 15 {
			fmt.Fprintf(w, "  %s\n", head)
		} else {
			fmt.Fprintf(w, "  %-15s%s\n", head, lines[0])
			lines = lines[1:]
		}
		for _, l := range lines {
			fmt.Fprintf(w, "  %-15s%s\n", "", l)
		}
	}
	fmt.Fprintf(w, `
down and goto refuse to drop tables that hold rows (the conversations and
the ledger are a record) unless given -force-data-loss. up checks the
connected role's privileges first and refuses, changing nothing, when a
pending migration needs one it lacks.

%s

The database is -database, else $DATABASE_URL, else a local server under
.pgconvo/: up (or goto) makes one from the installed PostgreSQL binaries,
every verb starts it when it is stopped, stop stops it, stop -purge
removes it. -database given empty is refused (it falls back to neither).

Exit status: 0 done, 1 failed (the message says what to do), 2 a usage
error. `+"`%s help VERB`"+` says more of one verb.

flags:
`, importNote, command)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// capitalize returns s with its first letter upper-case.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// usageError is a command line that cannot run as written: exit code 2,
// the message, and the usage of verb (every verb's when verb is ""), or,
// for a verb that does not exist, the verbs' names (listVerbs), or nothing
// more when the message says all there is to do (oneLine).
type usageError struct {
	verb      string
	err       error
	listVerbs bool
	oneLine   bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for verb.
func usagef(verb, format string, args ...any) error {
	return &usageError{verb: verb, err: fmt.Errorf(format, args...)}
}

// unknownVerbf returns a usageError for a verb that does not exist: the
// verbs' names follow it, not the whole usage.
func unknownVerbf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...), listVerbs: true}
}

// printVerbList writes the verbs' names, and where to read more.
func printVerbList(w io.Writer) {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.name
	}
	lines := wrap("verbs: "+strings.Join(names, ", "), 76)
	fmt.Fprintf(w, "%s\n", strings.Join(lines, "\n  "))
	fmt.Fprintf(w, "`%s help` prints the whole usage; `help VERB`, one verb's.\n", command)
}
