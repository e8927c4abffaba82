// Package apidocs writes docs/api.md, the reference of every function and
// view of schema convo, from the catalog of a migrated database: signatures
// with defaults, return types, the COMMENT ON text, who may call or read
// each, the values a closed-set argument or column takes, and the SQLSTATEs
// each function raises, grouped by domain with a table of contents.
//
// The SQLSTATEs are derived from the source, not written by hand: a
// function raises every `ERRCODE = '...'` of its own text (its definition as
// pg_get_functiondef prints it), of every function of convo or
// convo_private it calls, and of every trigger function that fires on a
// table of convo it inserts into, updates or deletes from, transitively. The
// triggers that guard the tables against writes from outside pgconvo
// (convo_private.package_triggers() guards append_only, head_log and
// row_security) are not followed: pgconvo's own writes pass them by
// construction. The result can
// name a code that a given call cannot reach (it follows every branch), but
// never misses one raised by a RAISE of the package. PostgreSQL's own errors
// (a malformed uuid, a cancelled statement) are not listed.
//
// What the catalog cannot say is in three small tables (Default): the group
// of each function and view, where the allowed values of an argument or
// column come from (a CHECK constraint, the RAISE conditions of a function's
// text, or a list written here that the text must mention), and the
// meaning of each SQLSTATE. GenerateWith reports what the catalog
// contradicts in them (Findings), which the tests turn into failures.
package apidocs

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
)

// Command is what regenerates the file; the staleness test names it.
const Command = "go run ./cmd/apidocs"

// Beginner is a database handle: a *pgx.Conn or a *pgxpool.Pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Group is one domain of the reference: a section of docs/api.md.
type Group struct {
	Title   string   // the section's heading
	Intro   string   // a paragraph under it
	Domains []string // the folders of sql/ that hold its functions and views (a test holds them to it)
	Names   []string // functions and views of convo, in reading order (all overloads of a name)
}

// ValueSet says which values an argument or column takes and where they
// come from: exactly one of Check, Text and Values.
type ValueSet struct {
	Object string // a function or view of convo, without the schema
	Name   string // a parameter (p_...), a result column or a view column of Object
	Key    string // for a jsonb array argument: the key of each element the values are of
	// Check is "table.column": the values of the CHECK (column = ANY
	// (ARRAY[...])) on convo.table.
	Check string
	// Text is "schema.function" (Object's own, or one Object calls with the
	// argument): the values the conditions of its RAISEs admit for Name
	// (Name NOT IN (...)), or the pattern it must match (Name !~ '...') and
	// the values refused (Name IN (...)).
	Text string
	// Values are written here when neither gives them; each must be quoted
	// ('value') in the text of one of In (functions of convo or
	// convo_private, views of convo, as "schema.name").
	Values []string
	In     []string
	Note   string // said after the values (what NULL means, what else is allowed)
}

// SQLSTATE is one row of the table of codes: the contract's Conventions.
type SQLSTATE struct {
	Code, Name, When string
}

// Tables is what the catalog cannot say; Default returns pgconvo's.
type Tables struct {
	Groups    []Group
	Values    []ValueSet
	SQLSTATEs []SQLSTATE
}

// Findings is what GenerateWith found the catalog contradicts in the tables.
// Each string names the object.
type Findings struct {
	Unplaced      []string // functions and views of convo in no group ("function convo.f(args)", "view convo.v")
	Absent        []string // names of the groups and objects of value sets the catalog does not hold (yet): not an error
	Duplicates    []string // names placed twice
	ValueProblems []string // value sets that do not hold
	UnlistedCodes []string // "convo.f raises X": a code missing from the SQLSTATE table
	// Values are the derived values of each value set that holds, by
	// "object(name)" or "object(name[].key)"; a pattern's entry is
	// "~pattern" followed by "!refused" values.
	Values map[string][]string
}

// Default returns the tables docs/api.md is generated with.
func Default() Tables {
	return Tables{Groups: groups(), Values: valueSets(), SQLSTATEs: sqlstates()}
}

// groups places every function and view of convo. A name the catalog lacks
// is skipped, not an error (a function may be listed before it lands);
// a function or view that no group names is put under "Not yet grouped"
// and TestAPIDocsGroups fails naming it.
func groups() []Group {
	return []Group{
		{
			Title:   "The tree: conversations, messages, the head and the path",
			Domains: []string{"tree", "sidebar"},
			Intro: "A conversation is a tree of append-only messages with one head; every head move is logged. " +
				"These create conversations and list them (the sidebar), append, branch (edit, regenerate), " +
				"move the head and read the path from the root to the head, now or at a past time.",
			Names: []string{
				"create_conversation", "conversations", "set_title", "archive_conversation", "unarchive_conversation",
				"delete_conversation", "restore_deleted_conversation", "append_message", "edit_and_resend", "regenerate", "move_head",
				"path", "path_at", "head_at", "head_history", "alternatives", "message_parts",
			},
		},
		{
			Title:   "Search",
			Domains: []string{"search"},
			Intro: "Full-text search of an owner's messages with PostgreSQL's own text search, under one text search " +
				"configuration (the language) the DBA chooses.",
			Names: []string{"search_conversations", "search_config", "set_search_config"},
		},
		{
			Title:   "Generations and provider requests",
			Domains: []string{"generations"},
			Intro: "The model's work, recorded apart from what was said: a generation streams from a prompt message " +
				"and ends completed (with the assistant message), failed or cancelled. `request_messages` renders a " +
				"path as a provider's request body and `request_digest` is what `begin_generation` records of it.",
			Names: []string{
				"begin_generation", "complete_generation", "fail_generation", "cancel_generation",
				"request_messages", "request_digest", "generation_stale_after", "stale_generations",
			},
		},
		{
			Title:   "Tools and effects",
			Domains: []string{"ledger"},
			Intro: "The allowlist of tools and the ledger of their effects: each tool call of an effectful tool gets a " +
				"decision when its message is appended, and its effect is settled, confirmed, declined or compensated.",
			Names: []string{
				"register_tool", "args_errors", "effect_for_call", "settle_effect", "confirm_effect", "decline_effect",
				"compensate_effect", "orphaned_applied_effects", "stale_pending_effects",
			},
		},
		{
			Title:   "Receipts",
			Domains: []string{"receipts"},
			Intro:   "A receipt is written before a side effect an HTTP route performs, keyed per owner, and settled once.",
			Names:   []string{"begin_receipt", "fill_receipt", "apply_receipt", "fail_receipt", "expire_receipts"},
		},
		{
			Title:   "Imports and export",
			Domains: []string{"imports"},
			Intro:   "Conversations from other products (their trees only), and pgconvo's own export and restore.",
			Names: []string{
				"import_chatgpt", "import_openwebui", "import_librechat", "export_conversation", "import_conversation",
				"import_history",
			},
		},
		{
			Title:   "Erasure",
			Domains: []string{"erasure"},
			Intro: "The only path by which stored content changes: it keeps the shape and is recorded. Afterwards " +
				"nothing is deduplicated against the erased content: a later tool call's keys carry the conversation's " +
				"key epoch (its erasures), so no guess of erased arguments is reused or collides, and a repeat of an " +
				"erased receipt's key is `CV009` whatever its request (docs/erasure.md).",
			Names: []string{"erase_conversation", "erase_owner", "erase_due", "deletion_retention", "set_deletion_retention"},
		},
		{
			Title:   "Operations",
			Domains: []string{"operations"},
			Intro: "The invariants a DBA can check on a live database, the size caps as functions clients can read, " +
				"and whether the database sends live-update notifications.",
			Names: []string{
				"self_check", "max_message_bytes", "max_part_bytes", "max_tool_input_bytes", "max_request_bytes",
				"max_metadata_bytes", "max_detail_bytes", "max_ref_length", "live_updates", "set_live_updates",
			},
		},
	}
}

// partTypes are the contract's four part types, which part_problem checks.
var partTypes = []string{"text", "tool_use", "tool_result", "attachment"}

// valueSets are the closed sets of values of arguments and columns of convo.
// A set whose object the catalog lacks is skipped, as a group's name is.
func valueSets() []ValueSet {
	parts := func(fn string) ValueSet {
		return ValueSet{Object: fn, Name: "p_parts", Key: "type", Values: partTypes, In: []string{"convo_private.part_problem"}}
	}
	const firstChild = "or NULL for the first child of its parent"
	return []ValueSet{
		{Object: "append_message", Name: "p_role", Check: "messages.role"},
		parts("append_message"),
		parts("edit_and_resend"),
		parts("regenerate"),
		parts("complete_generation"),
		{Object: "move_head", Name: "p_reason", Text: "convo.move_head"},
		{Object: "path", Name: "role", Check: "messages.role"},
		{Object: "path", Name: "branch_reason", Check: "messages.branch_reason", Note: firstChild},
		{Object: "path_at", Name: "role", Check: "messages.role"},
		{Object: "path_at", Name: "branch_reason", Check: "messages.branch_reason", Note: firstChild},
		{Object: "alternatives", Name: "branch_reason", Check: "messages.branch_reason", Note: firstChild},
		{Object: "head_history", Name: "reason",
			Values: []string{"create", "import", "append", "user_edit", "regenerate", "switch", "direct_update"},
			In: []string{"convo_private.new_conversation", "convo_private.import_tree", "convo.append_message",
				"convo.edit_and_resend", "convo.regenerate", "convo.move_head", "convo_private.log_direct_head_move"},
			Note: "or the `p_reason` a `move_head` call gave"},
		{Object: "message_parts", Name: "type", Values: partTypes, In: []string{"convo_private.part_problem"}},
		{Object: "request_messages", Name: "p_format", Text: "convo.request_messages"},
		{Object: "import_history", Name: "p_format", Values: []string{"chatgpt", "openwebui", "librechat"},
			In: []string{"convo.import_history"}},
		{Object: "request_digest", Name: "p_format", Text: "convo.request_messages"},
		{Object: "register_tool", Name: "p_idempotency_scope", Text: "convo_private.register_tool_in"},
		{Object: "effect_for_call", Name: "decision", Check: "tool_effect_calls.decision"},
		{Object: "effect_for_call", Name: "state", Check: "tool_effects.state", Note: "or NULL for `replay` (no effect)"},
		{Object: "settle_effect", Name: "p_state", Text: "convo.settle_effect"},
		{Object: "stale_pending_effects", Name: "state", Values: []string{"pending", "awaiting_confirmation"},
			In: []string{"convo_private.stale_pending_effects_in"}},
		{Object: "begin_receipt", Name: "status", Check: "tool_receipts.status"},
		{Object: "fill_receipt", Name: "status", Check: "tool_receipts.status"},
	}
}

// sqlstates are the codes of the contract's Conventions, as it states them,
// and the PostgreSQL condition the package raises itself.
func sqlstates() []SQLSTATE {
	return []SQLSTATE{
		{"CV001", "stale_head", "`p_expected_head` is given and the head has moved (DETAIL names the current head)"},
		{"CV002", "not_found", "a conversation, message, tool call, effect, generation or receipt does not exist, or is not visible to the caller"},
		{"CV003", "wrong_conversation", "a referenced message, tool call or effect belongs to another conversation"},
		{"CV004", "wrong_role", "the operation does not fit the message's role (edit a non-user message, regenerate a non-assistant one, tool_use outside an assistant message, ...)"},
		{"CV005", "immutable", "UPDATE, DELETE or TRUNCATE on an append-only table, by any role but a superuser (who can disable triggers), table owner included"},
		{"CV006", "invalid_transition", "a state change that the state machine does not allow"},
		{"CV007", "unknown_tool", "a tool that is not registered (the allowlist)"},
		{"CV008", "invalid_parts", "message parts that are not well formed, or a tool_result without its tool_use"},
		{"CV009", "idempotency_conflict", "a client id or idempotency key reused with a different request"},
		{"CV010", "payload_too_large", "a message, part, argument or result over the documented caps"},
		{"CV011", "invalid_argument", "any other bad argument (NULL where a value is required, key too short, unknown reason, ...)"},
		{"40001", "serialization_failure", "PostgreSQL's code, raised by `register_tool` when another transaction registered a version of the same tool first: retry the transaction"},
		{"0A000", "feature_not_supported", "PostgreSQL's code, raised by `erase_owner` in a transaction that is not READ COMMITTED: its snapshot could not see what the owner's transactions it waits for made; call it in a transaction of its own at READ COMMITTED"},
	}
}

type function struct {
	oid                          uint32
	schema, name                 string
	identity, arguments, returns string
	comment, volatility, kind    string
	securityDefiner              bool
	grantees                     string
	definition                   string
	inputs, results              []string // parameter names; result columns of RETURNS TABLE or OUT
}

type view struct {
	name, comment, grantees, definition string
	columns                             [][2]string
}

// inList is a CHECK (column = ANY (ARRAY[...])) of a table of convo.
type inList struct {
	constraint string
	values     []string
}

// catalog is what Generate reads.
type catalog struct {
	funcs  []function
	views  []view
	raises map[string]map[string]bool // by schema.name
	checks map[string]inList          // by table.column
}

var (
	// errcodeRe finds what a definition raises: an ERRCODE = '...', or a
	// pgconvo code spelled as a value (a check that returns its code, as
	// part_problem does, for a RAISE that takes it from a variable).
	errcodeRe = regexp.MustCompile(`(?i)ERRCODE\s*=\s*'([^']+)'|'(CV[0-9]{3})'`)
	callRe    = regexp.MustCompile(`\b(convo|convo_private)\.([a-z_][a-z0-9_]*)\s*\(`)
	writeRe   = regexp.MustCompile(`(?i)\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+convo\.([a-z_][a-z0-9_]*)`)

	// inListRe reads a CHECK that is one column's list of values, as
	// pg_get_constraintdef prints it.
	inListRe = regexp.MustCompile(`^CHECK \(\(([a-z_][a-z0-9_]*) = ANY \(ARRAY\[(.*)\]\)\)\)$`)
	quotedRe = regexp.MustCompile(`'((?:[^']|'')*)'`)
	// A RAISE's condition: the text between an IF or ELSIF and a THEN
	// followed by RAISE EXCEPTION.
	thenRe  = regexp.MustCompile(`(?i)\bTHEN\b`)
	ifRe    = regexp.MustCompile(`(?i)\b(?:ELS)?IF\b`)
	raiseRe = regexp.MustCompile(`(?i)^\s*RAISE\s+EXCEPTION\b`)
)

// Generate returns the text of docs/api.md for the database behind db.
func Generate(ctx context.Context, db Beginner) (string, error) {
	text, _, err := GenerateWith(ctx, db, Default())
	return text, err
}

// GenerateWith returns the text of docs/api.md generated with the tables t,
// and what the catalog contradicts in them. The text is written whatever
// the findings: what is unplaced goes under "Not yet grouped", a value set
// that does not hold is left out.
func GenerateWith(ctx context.Context, db Beginner, t Tables) (string, Findings, error) {
	cat, err := load(ctx, db)
	if err != nil {
		return "", Findings{}, err
	}
	doc := plan(cat, t)
	return render(cat, t, doc), doc.findings, nil
}

func load(ctx context.Context, db Beginner) (*catalog, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	// Deparsed SQL bodies and views then name every object with its schema.
	if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog, pg_temp`); err != nil {
		return nil, err
	}
	cat := &catalog{}
	if cat.funcs, err = readFunctions(ctx, tx); err != nil {
		return nil, err
	}
	if cat.views, err = readViews(ctx, tx); err != nil {
		return nil, err
	}
	triggers, err := readTriggers(ctx, tx)
	if err != nil {
		return nil, err
	}
	if cat.checks, err = readInLists(ctx, tx); err != nil {
		return nil, err
	}
	cat.raises = derive(cat.funcs, triggers)
	return cat, nil
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
		       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) ELSE '' END,
		       coalesce(p.proargnames, '{}'), coalesce(p.proargmodes::text[], '{}')
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE n.nspname IN ('convo', 'convo_private')
		 ORDER BY n.nspname COLLATE "C", p.proname COLLATE "C", pg_get_function_identity_arguments(p.oid) COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading functions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (function, error) {
		var f function
		var names, modes []string
		err := r.Scan(&f.oid, &f.schema, &f.name, &f.identity, &f.arguments, &f.returns, &f.comment,
			&f.volatility, &f.kind, &f.securityDefiner, &f.grantees, &f.definition, &names, &modes)
		for i, name := range names {
			mode := "i" // no modes: every argument is an input
			if i < len(modes) {
				mode = modes[i]
			}
			if name == "" {
				continue
			}
			if strings.Contains("ibv", mode) {
				f.inputs = append(f.inputs, name)
			}
			if strings.Contains("obt", mode) {
				f.results = append(f.results, name)
			}
		}
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
		                      AND g.guards IN ('append_only', 'head_log', 'row_security'))
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

// readInLists maps table.column to the CHECK constraint of convo.table that
// lists the values of column (the first by name when there are several).
func readInLists(ctx context.Context, tx pgx.Tx) (map[string]inList, error) {
	rows, err := tx.Query(ctx, `
		SELECT c.relname, con.conname, pg_get_constraintdef(con.oid)
		  FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
		 WHERE c.relnamespace = 'convo'::regnamespace AND con.contype = 'c'
		 ORDER BY c.relname COLLATE "C", con.conname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading check constraints: %w", err)
	}
	defer rows.Close()
	out := map[string]inList{}
	for rows.Next() {
		var table, name, def string
		if err := rows.Scan(&table, &name, &def); err != nil {
			return nil, err
		}
		m := inListRe.FindStringSubmatch(def)
		if m == nil {
			continue
		}
		key := table + "." + m[1]
		if _, seen := out[key]; !seen {
			out[key] = inList{constraint: name, values: quoted(m[2])}
		}
	}
	return out, rows.Err()
}

// quoted returns the SQL string literals of s, in order.
func quoted(s string) []string {
	var out []string
	for _, m := range quotedRe.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.ReplaceAll(m[1], "''", "'"))
	}
	return out
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

// viewRaises is what a view's query may raise: the codes of the functions
// it calls.
func (c *catalog) viewRaises(v view) map[string]bool {
	codes := map[string]bool{}
	for _, m := range callRe.FindAllStringSubmatch(v.definition, -1) {
		for code := range c.raises[m[1]+"."+m[2]] {
			codes[code] = true
		}
	}
	return codes
}

// text is the definition of a function of convo or convo_private (all its
// overloads) or of a view of convo, by "schema.name"; false if none.
func (c *catalog) text(qualified string) (string, bool) {
	var parts []string
	for _, f := range c.funcs {
		if f.schema+"."+f.name == qualified {
			parts = append(parts, f.definition)
		}
	}
	for _, v := range c.views {
		if "convo."+v.name == qualified {
			parts = append(parts, v.definition)
		}
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}

// raiseConditions returns the conditions of a definition's IF ... THEN
// RAISE EXCEPTION statements.
func raiseConditions(def string) []string {
	var out []string
	prev := 0
	for _, m := range thenRe.FindAllStringIndex(def, -1) {
		before := def[prev:m[0]]
		prev = m[1]
		if !raiseRe.MatchString(def[m[1]:]) {
			continue
		}
		ifs := ifRe.FindAllStringIndex(before, -1)
		if len(ifs) == 0 {
			continue
		}
		if cond := before[ifs[len(ifs)-1][1]:]; !strings.Contains(cond, ";") {
			out = append(out, cond)
		}
	}
	return out
}

// entry is one function (one overload) or view of a section.
type entry struct {
	fn     *function
	view   *view
	anchor string
}

func (e entry) name() string {
	if e.fn != nil {
		return e.fn.name
	}
	return e.view.name
}

type section struct {
	title, intro, anchor string
	entries              []entry
}

// resolved is a value set that holds, with its values.
type resolved struct {
	set              ValueSet
	values, refused  []string
	pattern, checkOn string // checkOn: the constraint's name, for a Check
}

// document is what render writes: the sections in order with their anchors,
// and the values of each object.
type document struct {
	sections                 []section
	sqlstatesAnchor          string
	anchors                  map[string]string // "convo.name" to the anchor of its (first) entry
	values                   map[string][]resolved
	findings                 Findings
	functionCount, viewCount int
}

const (
	unplacedTitle = "Not yet grouped"
	unplacedIntro = "Functions and views that no group of `internal/apidocs` places yet: `TestAPIDocsGroups` fails until they are."
)

// plan places every function and view of convo in its group, gives every
// heading its anchor, resolves the value sets and collects the findings.
func plan(c *catalog, t Tables) *document {
	doc := &document{anchors: map[string]string{}, values: map[string][]resolved{},
		findings: Findings{Values: map[string][]string{}}}
	funcsByName := map[string][]*function{}
	var funcNames []string
	for i := range c.funcs {
		if f := &c.funcs[i]; f.schema == "convo" {
			if funcsByName[f.name] == nil {
				funcNames = append(funcNames, f.name)
			}
			funcsByName[f.name] = append(funcsByName[f.name], f)
			doc.functionCount++
		}
	}
	viewsByName := map[string]*view{}
	for i := range c.views {
		viewsByName[c.views[i].name] = &c.views[i]
	}
	doc.viewCount = len(c.views)
	entriesOf := func(name string) []entry {
		var out []entry
		for _, f := range funcsByName[name] {
			out = append(out, entry{fn: f})
		}
		if v := viewsByName[name]; v != nil {
			out = append(out, entry{view: v})
		}
		return out
	}

	placed := map[string]bool{}
	for _, g := range t.Groups {
		s := section{title: g.Title, intro: g.Intro}
		for _, name := range g.Names {
			switch es := entriesOf(name); {
			case placed[name]:
				doc.findings.Duplicates = append(doc.findings.Duplicates, fmt.Sprintf("%s (again in %q)", name, g.Title))
			case len(es) == 0:
				doc.findings.Absent = append(doc.findings.Absent, name)
			default:
				placed[name] = true
				s.entries = append(s.entries, es...)
			}
		}
		doc.sections = append(doc.sections, s)
	}
	unplaced := section{title: unplacedTitle, intro: unplacedIntro}
	for _, name := range funcNames {
		if !placed[name] {
			for _, f := range funcsByName[name] {
				unplaced.entries = append(unplaced.entries, entry{fn: f})
				doc.findings.Unplaced = append(doc.findings.Unplaced, fmt.Sprintf("function convo.%s(%s)", f.name, f.identity))
			}
		}
	}
	for _, v := range c.views {
		if !placed[v.name] {
			unplaced.entries = append(unplaced.entries, entry{view: viewsByName[v.name]})
			doc.findings.Unplaced = append(doc.findings.Unplaced, "view convo."+v.name)
		}
	}
	if len(unplaced.entries) > 0 {
		doc.sections = append(doc.sections, unplaced)
	}

	// Anchors, in the order of the headings in the file.
	slugs := slugger{}
	slugs.slug("pgconvo API reference")
	slugs.slug("Contents")
	doc.sqlstatesAnchor = slugs.slug("SQLSTATEs")
	for i := range doc.sections {
		s := &doc.sections[i]
		s.anchor = slugs.slug(s.title)
		for j := range s.entries {
			e := &s.entries[j]
			e.anchor = slugs.slug("convo." + e.name())
			if _, seen := doc.anchors["convo."+e.name()]; !seen {
				doc.anchors["convo."+e.name()] = e.anchor
			}
		}
	}

	for _, vs := range t.Values {
		if _, ok := c.text("convo." + vs.Object); !ok {
			doc.findings.Absent = appendNew(doc.findings.Absent, vs.Object)
			continue
		}
		r, problem := c.resolve(vs)
		if problem != "" {
			doc.findings.ValueProblems = append(doc.findings.ValueProblems, valueKey(vs)+": "+problem)
			continue
		}
		doc.values[vs.Object] = append(doc.values[vs.Object], r)
		derived := append([]string{}, r.values...)
		if r.pattern != "" {
			derived = append(derived, "~"+r.pattern)
		}
		for _, v := range r.refused {
			derived = append(derived, "!"+v)
		}
		doc.findings.Values[valueKey(vs)] = derived
	}

	listed := map[string]bool{}
	for _, s := range t.SQLSTATEs {
		listed[s.Code], listed[s.Name] = true, true
	}
	for _, name := range funcNames {
		for _, code := range sortedKeys(c.raises["convo."+name]) {
			if !listed[code] {
				doc.findings.UnlistedCodes = append(doc.findings.UnlistedCodes, "convo."+name+" raises "+code)
			}
		}
	}
	for _, v := range c.views {
		for _, code := range sortedKeys(c.viewRaises(v)) {
			if !listed[code] {
				doc.findings.UnlistedCodes = append(doc.findings.UnlistedCodes, "convo."+v.name+" raises "+code)
			}
		}
	}
	return doc
}

// valueKey names a value set: "settle_effect(p_state)", "append_message(p_parts[].type)".
func valueKey(vs ValueSet) string {
	name := vs.Name
	if vs.Key != "" {
		name += "[]." + vs.Key
	}
	return vs.Object + "(" + name + ")"
}

// resolve derives the values of vs, or says why it does not hold.
func (c *catalog) resolve(vs ValueSet) (resolved, string) {
	r := resolved{set: vs}
	own := "convo." + vs.Object
	def, ok := c.text(own)
	if !ok {
		return r, "no function or view " + own
	}
	found := false
	for _, f := range c.funcs {
		if f.schema == "convo" && f.name == vs.Object {
			found = found || contains(f.inputs, vs.Name) || contains(f.results, vs.Name)
		}
	}
	for _, v := range c.views {
		if v.name == vs.Object {
			for _, col := range v.columns {
				found = found || col[0] == vs.Name
			}
		}
	}
	if !found {
		return r, own + " has no parameter or column " + vs.Name
	}
	sources := 0
	for _, given := range []bool{vs.Check != "", vs.Text != "", len(vs.Values) > 0 || len(vs.In) > 0} {
		if given {
			sources++
		}
	}
	if sources != 1 {
		return r, "give exactly one of Check, Text and Values (with In)"
	}
	switch {
	case vs.Check != "":
		list, ok := c.checks[vs.Check]
		if !ok {
			table, column, _ := strings.Cut(vs.Check, ".")
			return r, fmt.Sprintf("no CHECK (%s = ANY (ARRAY[...])) on convo.%s", column, table)
		}
		r.values, r.checkOn = list.values, list.constraint
	case vs.Text != "":
		text, ok := c.text(vs.Text)
		if !ok {
			return r, "no function " + vs.Text
		}
		if vs.Text != own && !calls(def, vs.Text) {
			return r, own + " does not call " + vs.Text
		}
		name := regexp.QuoteMeta(vs.Name)
		notIn := regexp.MustCompile(`(?i)\b` + name + `\s+NOT\s+IN\s*\(([^)]*)\)`)
		in := regexp.MustCompile(`(?i)\b` + name + `\s+IN\s*\(([^)]*)\)`)
		match := regexp.MustCompile(`(?i)\b` + name + `\s*!~\s*'((?:[^']|'')*)'`)
		for _, cond := range raiseConditions(text) {
			for _, m := range notIn.FindAllStringSubmatch(cond, -1) {
				r.values = appendNew(r.values, quoted(m[1])...)
			}
			for _, m := range in.FindAllStringSubmatch(cond, -1) {
				r.refused = appendNew(r.refused, quoted(m[1])...)
			}
			if m := match.FindStringSubmatch(cond); m != nil && r.pattern == "" {
				r.pattern = strings.ReplaceAll(m[1], "''", "'")
			}
		}
		if len(r.values) == 0 && r.pattern == "" {
			return r, fmt.Sprintf("no RAISE condition of %s lists the values of %s (%s NOT IN (...)) or its pattern (%s !~ '...')",
				vs.Text, vs.Name, vs.Name, vs.Name)
		}
	default:
		if len(vs.Values) == 0 || len(vs.In) == 0 {
			return r, "Values needs In, the functions or views whose text names them, and In needs Values"
		}
		var texts []string
		for _, in := range vs.In {
			text, ok := c.text(in)
			if !ok {
				return r, "no function or view " + in
			}
			texts = append(texts, text)
		}
		for _, v := range vs.Values {
			lit := "'" + strings.ReplaceAll(v, "'", "''") + "'"
			mentioned := false
			for _, text := range texts {
				mentioned = mentioned || strings.Contains(text, lit)
			}
			if !mentioned {
				return r, fmt.Sprintf("the value %s is in the text of none of %s", lit, strings.Join(vs.In, ", "))
			}
		}
		r.values = vs.Values
	}
	return r, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// calls reports whether a definition calls the function schema.name.
func calls(def, qualified string) bool {
	for _, m := range callRe.FindAllStringSubmatch(def, -1) {
		if m[1]+"."+m[2] == qualified {
			return true
		}
	}
	return false
}

// githubSlug is the anchor GitHub gives a heading's text: lower case, each
// space a hyphen, every character but letters, digits, marks, hyphens and
// underscores dropped (github-slugger).
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// slugger gives repeated headings the suffixes GitHub gives them (-1, -2).
type slugger map[string]int

func (s slugger) slug(heading string) string {
	base := githubSlug(heading)
	out := base
	for {
		if _, taken := s[out]; !taken {
			break
		}
		s[base]++
		out = fmt.Sprintf("%s-%d", base, s[base])
	}
	s[out] = 0
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "nobody but the owner role"
	}
	return s
}

func code(s string) string { return "`" + s + "`" }

// codeList is a Raises line's codes, each linked to the table of codes.
func (d *document) codeList(codes map[string]bool) string {
	if len(codes) == 0 {
		return "none"
	}
	list := sortedKeys(codes)
	for i, c := range list {
		list[i] = fmt.Sprintf("[%s](#%s)", code(c), d.sqlstatesAnchor)
	}
	return strings.Join(list, ", ")
}

// ref is a function or view in backquotes, linked to its entry when it has one.
func (d *document) ref(qualified string) string {
	if a, ok := d.anchors[qualified]; ok {
		return fmt.Sprintf("[%s](#%s)", code(qualified), a)
	}
	return code(qualified)
}

func codes(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = code(v)
	}
	return strings.Join(out, ", ")
}

// valueLine is one allowed-values item of an entry.
func (d *document) valueLine(r resolved, own string) string {
	label := code(r.set.Name)
	if r.set.Key != "" {
		label = fmt.Sprintf("%s (the %s of each element)", code(r.set.Name), code(r.set.Key))
	}
	var what string
	switch {
	case len(r.values) > 0:
		what = "one of " + codes(r.values)
	default:
		what = "matching " + code(r.pattern)
	}
	if len(r.refused) > 0 {
		what += ", but not " + codes(r.refused)
	}
	if r.set.Note != "" {
		what += ", " + r.set.Note
	}
	var from string
	switch {
	case r.set.Check != "":
		table, _, _ := strings.Cut(r.set.Check, ".")
		from = fmt.Sprintf("CHECK %s on [%s](%s#%s)", code(r.checkOn), code("convo."+table),
			SchemaPath[strings.LastIndex(SchemaPath, "/")+1:], githubSlug("convo."+table))
	case r.set.Text == own:
		from = "checked by this function"
	case r.set.Text != "":
		from = "checked by " + d.ref(r.set.Text)
	case len(r.set.In) == 1 && r.set.In[0] == own:
		from = "named in its definition"
	default:
		refs := make([]string, len(r.set.In))
		for i, in := range r.set.In {
			refs[i] = d.ref(in)
		}
		from = "named in " + strings.Join(refs, ", ")
	}
	return fmt.Sprintf("  - %s: %s (%s)\n", label, what, from)
}

func (d *document) writeValues(b *strings.Builder, name string) {
	if len(d.values[name]) == 0 {
		return
	}
	b.WriteString("- Allowed values:\n")
	for _, r := range d.values[name] {
		b.WriteString(d.valueLine(r, "convo."+name))
	}
}

func render(c *catalog, t Tables, d *document) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# pgconvo API reference\n\n")
	fmt.Fprintf(&b, "Generated from the catalog of a freshly migrated database by `%s`: do not edit it by hand.\n", Command)
	fmt.Fprintf(&b, "`TestAPIDocsUpToDate` fails when it is stale. Schema `convo` holds %d functions and %d views.\n\n", d.functionCount, d.viewCount)
	b.WriteString(`The functions and views are grouped by domain (the groups are a table in ` + "`internal/apidocs`" + `,
and a test fails when a function or view is in none). Each entry gives the signature with its
defaults, the return type, the ` + "`COMMENT ON`" + ` text, the values an argument or column takes when they
are a closed set (read from the CHECK constraint of the column they are stored in, or from the
conditions under which the function raises, or listed in ` + "`internal/apidocs`" + ` and checked against the
text of the functions that write them), the SQLSTATEs it raises and the roles granted it.

The SQLSTATEs are derived from the source: every
` + "`ERRCODE = '...'`" + ` (and every ` + "`'CVnnn'`" + ` a check returns for a RAISE to take) in the function's
definition, in the functions of ` + "`convo`" + ` and ` + "`convo_private`" + ` it
calls and in the trigger functions that fire on the tables it writes, transitively. The triggers
that guard the tables against writes from outside pgconvo (the ` + "`append_only`" + `, ` + "`head_log`" + ` and
` + "`row_security`" + ` guards of ` + "`convo_private.package_triggers()`" + `) are not followed, since pgconvo's own writes pass them.
A listed code may be unreachable for a given call (every branch is followed); no code that a
RAISE of the package can send is missing. PostgreSQL's own errors (` + "`22P02`" + ` for a malformed uuid,
` + "`42501`" + ` for a role without the grant, ...) are not listed. The codes are explained in
[SQLSTATEs](#` + d.sqlstatesAnchor + `).

`)
	b.WriteString("## Contents\n\n")
	fmt.Fprintf(&b, "- [SQLSTATEs](#%s)\n", d.sqlstatesAnchor)
	for _, s := range d.sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", s.title, s.anchor)
		for _, e := range s.entries {
			kind := ""
			if e.view != nil {
				kind = " (view)"
			}
			fmt.Fprintf(&b, "  - [%s](#%s)%s\n", code(e.name()), e.anchor, kind)
		}
	}
	b.WriteString("\n## SQLSTATEs\n\n")
	b.WriteString("The codes the functions raise, as the contract's Conventions state them: class `CV`, with a human\n" +
		"message and a DETAIL that names the offending ids. A failed call writes nothing.\n\n")
	b.WriteString("| SQLSTATE | name | raised when |\n|---|---|---|\n")
	for _, s := range t.SQLSTATEs {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(s.Code), code(s.Name), s.When)
	}
	b.WriteString("\n")
	for _, s := range d.sections {
		fmt.Fprintf(&b, "## %s\n\n", s.title)
		if s.intro != "" {
			fmt.Fprintf(&b, "%s\n\n", s.intro)
		}
		if len(s.entries) == 0 {
			b.WriteString("(none yet)\n\n")
		}
		for _, e := range s.entries {
			if e.fn != nil {
				d.writeFunction(&b, c, e.fn)
			} else {
				d.writeView(&b, c, e.view)
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func comment(b *strings.Builder, text string) {
	if text == "" {
		b.WriteString("(no comment)\n\n")
	} else {
		fmt.Fprintf(b, "%s\n\n", text)
	}
}

func (d *document) writeFunction(b *strings.Builder, c *catalog, f *function) {
	fmt.Fprintf(b, "### convo.%s\n\n", f.name)
	fmt.Fprintf(b, "```text\nconvo.%s(%s)\n  RETURNS %s\n```\n\n", f.name, f.arguments, f.returns)
	comment(b, f.comment)
	d.writeValues(b, f.name)
	fmt.Fprintf(b, "- Raises: %s\n", d.codeList(c.raises["convo."+f.name]))
	fmt.Fprintf(b, "- Executable by: %s\n", orNone(f.grantees))
	definer := ""
	if f.securityDefiner {
		definer = ", `SECURITY DEFINER`"
	}
	fmt.Fprintf(b, "- Volatility: %s%s\n\n", f.volatility, definer)
}

func (d *document) writeView(b *strings.Builder, c *catalog, v *view) {
	fmt.Fprintf(b, "### convo.%s\n\n", v.name)
	b.WriteString("A view.\n\n")
	comment(b, v.comment)
	b.WriteString("| column | type |\n|---|---|\n")
	for _, col := range v.columns {
		fmt.Fprintf(b, "| `%s` | `%s` |\n", col[0], col[1])
	}
	b.WriteString("\n")
	d.writeValues(b, v.name)
	fmt.Fprintf(b, "- Raises: %s\n", d.codeList(c.viewRaises(*v)))
	fmt.Fprintf(b, "- Readable by: %s\n\n", orNone(v.grantees))
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
