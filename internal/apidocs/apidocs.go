// Package apidocs writes docs/api.md, the reference of every function and
// view of schema convo, from the catalog of a migrated database: signatures
// with defaults, return types, the COMMENT ON text, who may call or read
// each, and the SQLSTATEs each function raises.
//
// The SQLSTATEs are derived from the source, not written by hand: a
// function raises every `ERRCODE = '...'` of its own text (its definition as
// pg_get_functiondef prints it), of every function of convo or
// convo_private it calls, and of every trigger function that fires on a
// table of convo it inserts into, updates or deletes from, transitively. The
// triggers that guard the tables against writes from outside pgconvo
// (convo_private.package_triggers() guards append_only and head_log) are not
// followed: pgconvo's own writes pass them by construction. The result can
// name a code that a given call cannot reach (it follows every branch), but
// never misses one raised by a RAISE of the package. PostgreSQL's own errors
// (a malformed uuid, a cancelled statement) are not listed.
package apidocs

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Command is what regenerates the file; the staleness test names it.
const Command = "go run ./cmd/apidocs"

// Beginner is a database handle: a *pgx.Conn or a *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

type function struct {
	oid                          uint32
	schema, name                 string
	identity, arguments, returns string
	comment, volatility, kind    string
	securityDefiner              bool
	grantees                     string
	definition                   string
}

type view struct {
	name, comment, grantees, definition string
	columns                             [][2]string
}

var (
	// errcodeRe finds what a definition raises: an ERRCODE = '...', or a
	// pgconvo code spelled as a value (a check that returns its code, as
	// part_problem does, for a RAISE that takes it from a variable).
	errcodeRe = regexp.MustCompile(`(?i)ERRCODE\s*=\s*'([^']+)'|'(CV[0-9]{3})'`)
	callRe    = regexp.MustCompile(`\b(convo|convo_private)\.([a-z_][a-z0-9_]*)\s*\(`)
	writeRe   = regexp.MustCompile(`(?i)\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+convo\.([a-z_][a-z0-9_]*)`)
)

// Generate returns the text of docs/api.md for the database behind db.
func Generate(ctx context.Context, db Beginner) (string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	// Deparsed SQL bodies and views then name every object with its schema.
	if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog, pg_temp`); err != nil {
		return "", err
	}
	funcs, err := readFunctions(ctx, tx)
	if err != nil {
		return "", err
	}
	views, err := readViews(ctx, tx)
	if err != nil {
		return "", err
	}
	triggers, err := readTriggers(ctx, tx)
	if err != nil {
		return "", err
	}
	raises := derive(funcs, triggers)
	return render(funcs, views, raises), nil
}

const aclGrantees = `coalesce((SELECT string_agg(coalesce(r.rolname, 'PUBLIC'), ', ' ORDER BY coalesce(r.rolname, 'PUBLIC') COLLATE "C")
                     FROM aclexplode(%s) a LEFT JOIN pg_roles r ON r.oid = a.grantee
                    WHERE a.privilege_type = '%s' AND a.grantee <> %s), '')`

func readFunctions(ctx context.Context, tx pgx.Tx) ([]function, error) {
	rows, err := tx.Query(ctx, `
		SELECT p.oid, n.nspname, p.proname,
		       pg_get_function_identity_arguments(p.oid), pg_get_function_arguments(p.oid),
		       coalesce(pg_get_function_result(p.oid), ''),
		       coalesce(obj_description(p.oid, 'pg_proc'), ''),
		       CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END,
		       CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END,
		       p.prosecdef, `+fmt.Sprintf(aclGrantees, "p.proacl", "EXECUTE", "p.proowner")+`,
		       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) ELSE '' END
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname IN ('convo', 'convo_private')
		 ORDER BY n.nspname COLLATE "C", p.proname COLLATE "C", pg_get_function_identity_arguments(p.oid) COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading functions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (function, error) {
		var f function
		err := r.Scan(&f.oid, &f.schema, &f.name, &f.identity, &f.arguments, &f.returns, &f.comment,
			&f.volatility, &f.kind, &f.securityDefiner, &f.grantees, &f.definition)
		return f, err
	})
}

func readViews(ctx context.Context, tx pgx.Tx) ([]view, error) {
	rows, err := tx.Query(ctx, `
		SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), ''),
		       `+fmt.Sprintf(aclGrantees, "c.relacl", "SELECT", "c.relowner")+`,
		       pg_get_viewdef(c.oid),
		       array(SELECT a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod)
		               FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		              ORDER BY a.attnum)
		  FROM pg_class c
		 WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('v', 'm')
		 ORDER BY c.relname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading views: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (view, error) {
		var v view
		var cols []string
		if err := r.Scan(&v.name, &v.comment, &v.grantees, &v.definition, &cols); err != nil {
			return v, err
		}
		for _, c := range cols {
			name, typ, _ := strings.Cut(c, " ")
			v.columns = append(v.columns, [2]string{name, typ})
		}
		return v, nil
	})
}

// readTriggers maps each table of convo to the functions (schema.name) of
// its triggers, but the guards (see the package comment).
func readTriggers(ctx context.Context, tx pgx.Tx) (map[string][]string, error) {
	rows, err := tx.Query(ctx, `
		SELECT c.relname, fn.nspname || '.' || p.proname
		  FROM pg_trigger t
		  JOIN pg_class c ON c.oid = t.tgrelid
		  JOIN pg_proc p ON p.oid = t.tgfoid
		  JOIN pg_namespace fn ON fn.oid = p.pronamespace
		 WHERE c.relnamespace = 'convo'::regnamespace AND NOT t.tgisinternal
		   AND NOT EXISTS (SELECT 1 FROM convo_private.package_triggers() g
		                    WHERE g.table_name = c.relname AND g.trigger_name = t.tgname
		                      AND g.guards IN ('append_only', 'head_log'))
		 ORDER BY c.relname COLLATE "C", fn.nspname || '.' || p.proname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading triggers: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, fn string
		if err := rows.Scan(&table, &fn); err != nil {
			return nil, err
		}
		out[table] = append(out[table], fn)
	}
	return out, rows.Err()
}

// derive returns the SQLSTATEs each function (by schema.name, all its
// overloads together) may raise: a fixpoint over calls and trigger firings,
// so cycles are fine.
func derive(funcs []function, triggers map[string][]string) map[string]map[string]bool {
	known := map[string]bool{}
	for _, f := range funcs {
		known[f.schema+"."+f.name] = true
	}
	raises := map[string]map[string]bool{}
	edges := map[string]map[string]bool{}
	for _, f := range funcs {
		key := f.schema + "." + f.name
		if raises[key] == nil {
			raises[key], edges[key] = map[string]bool{}, map[string]bool{}
		}
		for _, m := range errcodeRe.FindAllStringSubmatch(f.definition, -1) {
			raises[key][m[1]+m[2]] = true // one of the two is empty
		}
		for _, m := range callRe.FindAllStringSubmatch(f.definition, -1) {
			if callee := m[1] + "." + m[2]; known[callee] && callee != key {
				edges[key][callee] = true
			}
		}
		for _, m := range writeRe.FindAllStringSubmatch(f.definition, -1) {
			for _, fn := range triggers[m[1]] {
				if fn != key {
					edges[key][fn] = true
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for key, callees := range edges {
			for callee := range callees {
				for code := range raises[callee] {
					if !raises[key][code] {
						raises[key][code] = true
						changed = true
					}
				}
			}
		}
	}
	return raises
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func codeList(codes map[string]bool) string {
	if len(codes) == 0 {
		return "none"
	}
	list := sortedKeys(codes)
	for i, c := range list {
		list[i] = "`" + c + "`"
	}
	return strings.Join(list, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "nobody but the owner role"
	}
	return s
}

func render(funcs []function, views []view, raises map[string]map[string]bool) string {
	var b strings.Builder
	var api []function
	for _, f := range funcs {
		if f.schema == "convo" {
			api = append(api, f)
		}
	}
	fmt.Fprintf(&b, "# pgconvo API reference\n\n")
	fmt.Fprintf(&b, "Generated from the catalog of a freshly migrated database by `%s`: do not edit it by hand.\n", Command)
	fmt.Fprintf(&b, "`TestAPIDocsUpToDate` fails when it is stale. Schema `convo` holds %d functions and %d views.\n\n", len(api), len(views))
	b.WriteString(`Each entry gives the signature with its defaults, the return type, the ` + "`COMMENT ON`" + ` text, the
roles granted it and the SQLSTATEs it raises. The SQLSTATEs are derived from the source: every
` + "`ERRCODE = '...'`" + ` (and every ` + "`'CVnnn'`" + ` a check returns for a RAISE to take) in the function's
definition, in the functions of ` + "`convo`" + ` and ` + "`convo_private`" + ` it
calls and in the trigger functions that fire on the tables it writes, transitively. The triggers
that guard the tables against writes from outside pgconvo (the ` + "`append_only`" + ` and ` + "`head_log`" + `
guards of ` + "`convo_private.package_triggers()`" + `) are not followed, since pgconvo's own writes pass them.
A listed code may be unreachable for a given call (every branch is followed); no code that a
RAISE of the package can send is missing. PostgreSQL's own errors (` + "`22P02`" + ` for a malformed uuid,
` + "`42501`" + ` for a role without the grant, ...) are not listed. The codes are explained in the README.

`)
	b.WriteString("## Functions\n\n")
	for _, f := range api {
		fmt.Fprintf(&b, "### convo.%s(%s)\n\n", f.name, f.identity)
		fmt.Fprintf(&b, "```text\nconvo.%s(%s)\n  RETURNS %s\n```\n\n", f.name, f.arguments, f.returns)
		if f.comment == "" {
			b.WriteString("(no comment)\n\n")
		} else {
			fmt.Fprintf(&b, "%s\n\n", f.comment)
		}
		fmt.Fprintf(&b, "- Raises: %s\n", codeList(raises["convo."+f.name]))
		fmt.Fprintf(&b, "- Executable by: %s\n", orNone(f.grantees))
		definer := ""
		if f.securityDefiner {
			definer = ", `SECURITY DEFINER`"
		}
		fmt.Fprintf(&b, "- Volatility: %s%s\n\n", f.volatility, definer)
	}
	b.WriteString("## Views\n\n")
	for _, v := range views {
		fmt.Fprintf(&b, "### convo.%s\n\n", v.name)
		if v.comment == "" {
			b.WriteString("(no comment)\n\n")
		} else {
			fmt.Fprintf(&b, "%s\n\n", v.comment)
		}
		b.WriteString("| column | type |\n|---|---|\n")
		for _, c := range v.columns {
			fmt.Fprintf(&b, "| `%s` | `%s` |\n", c[0], c[1])
		}
		codes := map[string]bool{}
		for _, m := range callRe.FindAllStringSubmatch(v.definition, -1) {
			for code := range raises[m[1]+"."+m[2]] {
				codes[code] = true
			}
		}
		fmt.Fprintf(&b, "\n- Raises: %s\n", codeList(codes))
		fmt.Fprintf(&b, "- Readable by: %s\n\n", orNone(v.grantees))
	}
	return b.String()
}

// Uncommented names the functions and views of convo without a COMMENT ON.
func Uncommented(ctx context.Context, db Beginner) ([]string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `
		SELECT 'function convo.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')'
		  FROM pg_proc p WHERE p.pronamespace = 'convo'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL
		UNION ALL
		SELECT 'view convo.' || c.relname
		  FROM pg_class c WHERE c.relnamespace = 'convo'::regnamespace AND c.relkind IN ('v', 'm')
		   AND obj_description(c.oid, 'pg_class') IS NULL
		 ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
