// Command newmigration writes the next numbered migration from the object
// files that changed:
//
//	go run ./cmd/newmigration NAME
//
// An object file (in a domain's folder, sql/DOMAIN/: api/, schema convo's
// functions; private/, convo_private's, the machinery; views/; triggers/;
// one object each, opening with a "-- name: why" comment) whose text is not
// in any migration (sql/migrations) yet is new or changed. The up migration
// runs as the migrating role, never as the owner role (preamble), re-creates
// each of them (PL/pgSQL functions first, then SQL-bodied functions, whose
// bodies are checked at creation, then views, then triggers) below a marked
// place for table changes, which are written by hand, hands what it created
// to the owner role and re-applies the documented grants (postamble). The
// down migration restores the previous text of the changed ones, taken from
// the latest migration that holds it, in the same order, then drops the new
// objects, and ends the same way. With nothing changed it writes nothing.
// The drift test (tests/migrations_test.go) then proves the result.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

func main() {
	if len(os.Args) != 2 || !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: go run ./cmd/newmigration NAME   (NAME in lower snake case)")
		os.Exit(2)
	}
	if err := run("sql", os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "newmigration:", err)
		os.Exit(1)
	}
}

// object is one object file.
type object struct {
	kind, name, text string // kind: functions, views or triggers
}

// run writes dir/NNNN_name.up.sql and .down.sql for the changed objects.
func run(dir, name string) error {
	objects, err := readObjects(dir)
	if err != nil {
		return err
	}
	history, err := migrator.List(pgconvosql.Migrations)
	if err != nil {
		return err
	}
	var ups []string // migration texts, oldest first
	for _, m := range history {
		body, err := os.ReadFile(filepath.Join(dir, "migrations", fmt.Sprintf("%04d_%s.up.sql", m.Version, m.Name)))
		if err != nil {
			return fmt.Errorf("reading migration %d: %w", m.Version, err)
		}
		ups = append(ups, string(body))
	}
	up, down := plan(objects, ups)
	if up == nil {
		fmt.Println("no object file changed: nothing to write")
		return nil
	}
	next := uint(len(history) + 1)
	base := filepath.Join(dir, "migrations", fmt.Sprintf("%04d_%s", next, name))
	upText, downText := texts(fmt.Sprintf("%04d_%s", next, name), up, down)
	for path, text := range map[string]string{base + ".up.sql": upText, base + ".down.sql": downText} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists already", path)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		fmt.Println("wrote", path)
	}
	return nil
}

// plan returns the up and down statements for the objects whose text is in
// none of the migrations ups, or nil when there are none.
func plan(objects []object, ups []string) (up, down []string) {
	var changed []object
	for _, o := range objects {
		if !inAny(ups, o.text) {
			changed = append(changed, o)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	rank := func(o object) int {
		switch {
		case (o.kind == "functions" || o.kind == "private") && !sqlBodied(o.text):
			return 0
		case o.kind == "functions" || o.kind == "private":
			return 1
		case o.kind == "views":
			return 2
		}
		return 3
	}
	sort.SliceStable(changed, func(i, j int) bool { return rank(changed[i]) < rank(changed[j]) })
	changed = callsFirst(changed, func(o object) bool { return rank(o) == 1 })
	var drops []string
	listed, creatorIsNew := false, false
	for _, o := range changed {
		up = append(up, strings.TrimSpace(o.text))
		if prev := previous(ups, o); prev != "" {
			down = append(down, prev)
		} else {
			drops = append([]string{drop(o)}, drops...)
			creatorIsNew = creatorIsNew || o.name == createTriggers
		}
		listed = listed || o.name == triggerList
	}
	// The package's triggers are created from one list: a migration that
	// changes it creates them again, and so does its down with the list it
	// restores (unless the function that creates them goes with it).
	if listed {
		up = append(up, createTriggersCall)
		if !creatorIsNew {
			down = append(down, createTriggersCall)
		}
	}
	return up, append(down, drops...)
}

// triggerList (convo_private.package_triggers) is the list the package's
// triggers are created from, by createTriggers.
const (
	triggerList        = "package_triggers"
	createTriggers     = "create_triggers"
	createTriggersCall = "SELECT convo_private." + createTriggers + "();"
)

// callsFirst reorders the objects for which among holds so that each comes
// after the others of them it calls (a SQL-bodied function's body is
// checked when it is created); the rest keep their places.
func callsFirst(objects []object, among func(object) bool) []object {
	var idx []int
	for i, o := range objects {
		if among(o) {
			idx = append(idx, i)
		}
	}
	calls := func(a, b object) bool {
		return a.name != b.name && regexp.MustCompile(`\bconvo(_private)?\.`+regexp.QuoteMeta(b.name)+`\(`).MatchString(a.text)
	}
	var order []object
	placed := map[string]bool{}
	var place func(o object, seen map[string]bool)
	place = func(o object, seen map[string]bool) {
		if placed[o.name] || seen[o.name] {
			return
		}
		seen[o.name] = true
		for _, i := range idx {
			if calls(o, objects[i]) {
				place(objects[i], seen)
			}
		}
		placed[o.name] = true
		order = append(order, o)
	}
	for _, i := range idx {
		place(objects[i], map[string]bool{})
	}
	out := append([]object(nil), objects...)
	for k, i := range idx {
		out[i] = order[k]
	}
	return out
}

// objectKinds names, for each kind of object folder a domain holds, the
// kind the plan works with.
var objectKinds = []struct{ folder, kind string }{
	{"api", "functions"}, {"private", "private"}, {"views", "views"}, {"triggers", "triggers"},
}

// readObjects reads every object file under dir: dir/DOMAIN/api (schema
// convo's functions), private (convo_private's), views and triggers, each
// kind sorted by file name: an object's name is its file's, whatever
// domain holds it.
func readObjects(dir string) ([]object, error) {
	var objects []object
	for _, k := range objectKinds {
		paths, err := filepath.Glob(filepath.Join(dir, "*", k.folder, "*.sql"))
		if err != nil {
			return nil, err
		}
		sort.Slice(paths, func(i, j int) bool { return filepath.Base(paths[i]) < filepath.Base(paths[j]) })
		for _, p := range paths {
			body, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", p, err)
			}
			objects = append(objects, object{k.kind, strings.TrimSuffix(filepath.Base(p), ".sql"), string(body)})
		}
	}
	return objects, nil
}

// inAny reports whether text stands whole in one of the migrations.
func inAny(ups []string, text string) bool {
	for _, u := range ups {
		if strings.Contains(u, strings.TrimSpace(text)) {
			return true
		}
	}
	return false
}

// sqlBodied reports whether a function's body is SQL-standard (checked when
// it is created, so it must come after what it calls).
func sqlBodied(text string) bool {
	return strings.Contains(text, "BEGIN ATOMIC") || regexp.MustCompile(`(?m)^RETURN `).MatchString(text)
}

// previous returns the object's text in the latest migration that holds it:
// from its "-- name:" opening comment to the next object's, or "". The text
// must create that very object (a trigger and its function often share a
// name, and a comment line of another object may begin with the name).
func previous(ups []string, o object) string {
	head := regexp.MustCompile(`(?m)^-- ` + regexp.QuoteMeta(o.name) + `: `)
	next := regexp.MustCompile(`(?m)^\n-- ([a-z0-9_]+: |[A-Z])`)
	creates := regexp.MustCompile(map[string]string{
		"functions": `CREATE OR REPLACE FUNCTION convo\.`,
		"private":   `CREATE OR REPLACE FUNCTION convo_private\.`,
		"views":     `CREATE OR REPLACE VIEW convo\.`,
		"triggers":  `CREATE OR REPLACE TRIGGER `,
	}[o.kind] + regexp.QuoteMeta(o.name) + `[\s(]`)
	for i := len(ups) - 1; i >= 0; i-- {
		for _, loc := range head.FindAllStringIndex(ups[i], -1) {
			rest := ups[i][loc[0]:]
			if end := next.FindStringIndex(rest[1:]); end != nil {
				rest = rest[:end[0]+1]
			}
			if creates.MatchString(rest) {
				return strings.TrimSpace(rest)
			}
		}
	}
	return ""
}

// texts returns the up and down migration named name (NNNN_name) for the
// statements plan returned.
func texts(name string, up, down []string) (upText, downText string) {
	// The migration that brings hand_over_objects drops it going down: after
	// it has run, since the postamble calls it.
	last := ""
	for i, d := range down {
		if d == "DROP FUNCTION convo_private."+handOver+";" {
			down = append(down[:i:i], down[i+1:]...)
			last = "-- " + handOver + " is new in this migration: it goes once it has run.\n" + d + "\n\n"
			break
		}
	}
	upText = fmt.Sprintf("-- %s: WHY THIS MIGRATION (one or two lines).\n\n%s\n"+
		"-- Table changes, written by hand, go here, above the objects that use them.\n\n%s\n\n%s",
		name, preamble, strings.Join(up, "\n\n"), postamble)
	objects := ""
	if len(down) > 0 {
		objects = strings.Join(down, "\n\n") + "\n\n"
	}
	downText = fmt.Sprintf("-- %s down: reverses %s.up.sql.\n\n%s\n%s"+
		"-- Reverse the table changes here, below the objects.\n\n%s",
		name, name, preamble, objects, strings.Replace(postamble, revokeMarker, last+revokeMarker, 1))
	return upText, downText
}

// handOver names the function (sql/access/private/hand_over_objects.sql)
// that gives the owner role what a migration created.
const handOver = "hand_over_objects"

// preamble lets a migrating role that is not a superuser create in
// pgconvo's schemas and hand objects to the owner role convo_owner (see
// sql/migrations/0003_trust.up.sql): it becomes a member of it for the transaction.
// The migration never acts as convo_owner: on Citus DDL reaches the workers
// over new connections as the current role, and convo_owner cannot log in.
const preamble = `-- Create as the migrating role, never as the owner role convo_owner, which
-- cannot log in (Citus runs DDL on its workers as the current role). A role
-- that is not a superuser becomes a member of convo_owner for this
-- transaction only (it needs CREATEROLE for that), to create in its schemas
-- and hand it what it creates.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'convo_owner', 'MEMBER') THEN
        EXECUTE format('GRANT convo_owner TO %I', current_user);
    END IF;
END;
$$;
`

// revokeMarker opens the part of the postamble that gives back the
// membership.
const revokeMarker = "-- Give back a membership taken above.\n"

// postamble gives convo_owner what the migration created, applies the
// documented grants, and gives back a membership the preamble took: the
// one the migrating role granted itself, read from the catalog, not
// passed from the preamble in a setting.
const postamble = `-- Give convo_owner what this migration created, then grant as documented.
SELECT convo_private.` + handOver + `();
SELECT convo_private.apply_grants();

` + revokeMarker + `-- (A membership the role granted itself; one another role granted stays.)
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members m
                WHERE m.roleid = 'convo_owner'::regrole AND m.member = current_user::regrole
                  AND m.grantor = m.member) THEN
        EXECUTE format('REVOKE convo_owner FROM %I', current_user);
    END IF;
END;
$$;
`

// drop returns the statement that removes a new object.
func drop(o object) string {
	switch o.kind {
	case "functions":
		return "DROP FUNCTION convo." + o.name + ";"
	case "private":
		return "DROP FUNCTION convo_private." + o.name + ";"
	case "views":
		return "DROP VIEW convo." + o.name + ";"
	}
	table := regexp.MustCompile(`\bON (convo\.[a-z_]+)`).FindStringSubmatch(o.text)
	if table == nil {
		return "-- DROP TRIGGER " + o.name + " ON ...; (name its table)"
	}
	return "DROP TRIGGER " + o.name + " ON " + table[1] + ";"
}
