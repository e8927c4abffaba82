package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/pgconvo/pgconvo/internal/apidocs"
)

// TestAPIDocsUpToDate: docs/api.md is what the catalog of a freshly migrated
// database says (internal/apidocs), byte for byte; when a function, view,
// comment or grant changes, the test fails and names the command that
// rewrites the file.
func TestAPIDocsUpToDate(t *testing.T) {
	db := newDB(t)
	want, err := apidocs.Generate(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	requireUpToDate(t, apidocs.APIPath, want)
}

// TestSchemaDocsUpToDate: docs/schema.md is every table and view of the
// catalog of a freshly migrated database (columns, constraints, indexes,
// policies, grants, triggers, comments), byte for byte.
func TestSchemaDocsUpToDate(t *testing.T) {
	db := newDB(t)
	want, err := apidocs.GenerateSchema(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	requireUpToDate(t, apidocs.SchemaPath, want)
	// It is the catalog's, not a summary: each policy is written out, and
	// every table of convo has its comment.
	for _, s := range []string{
		"CREATE POLICY messages_reader_reads_all ON convo.messages AS PERMISSIVE FOR SELECT TO convo_reader USING (true);",
		"CREATE TRIGGER messages_20_guard BEFORE INSERT ON convo.messages",
		"CONSTRAINT messages_pkey PRIMARY KEY (conversation_id, id)",
	} {
		if !strings.Contains(want, s) {
			t.Errorf("%s lacks %q", apidocs.SchemaPath, s)
		}
	}
	if bare := regexp.MustCompile(`(?m)^## (.*)\n\nA table owned by`).FindAllStringSubmatch(want, -1); len(bare) > 0 {
		t.Errorf("tables without a COMMENT ON TABLE in %s: %v", apidocs.SchemaPath, bare)
	}
}

// requireUpToDate fails unless the file at path (from the repository's
// root) is want, naming the first difference and the command that rewrites
// it.
func requireUpToDate(t *testing.T, path, want string) {
	t.Helper()
	file := filepath.Join("..", filepath.FromSlash(path))
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading %s: %v (run `%s` to write it)", path, err, apidocs.Command)
	}
	if string(got) != want {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		line := 0
		for line < len(gotLines) && line < len(wantLines) && gotLines[line] == wantLines[line] {
			line++
		}
		at := func(lines []string) string {
			if line < len(lines) {
				return lines[line]
			}
			return "(end of file)"
		}
		t.Fatalf("%s is stale: run `%s` and commit the file\n(first difference at line %d: the file says %q, the catalog %q)",
			path, apidocs.Command, line+1, at(gotLines), at(wantLines))
	}
}

// TestEveryAPIObjectIsCommented: every function and view of schema convo
// has a COMMENT ON, which docs/api.md and `\df+ convo.*` show.
func TestEveryAPIObjectIsCommented(t *testing.T) {
	db := newDB(t)
	missing, err := apidocs.Uncommented(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("without a COMMENT ON (add one in its object file): %v", missing)
	}
}

// TestAPIDocsRaises: the derived SQLSTATEs name what the functions are known
// to raise (a spot check of the derivation: direct RAISEs, helpers called,
// triggers fired by a write) and nothing for the constants.
func TestAPIDocsRaises(t *testing.T) {
	db := newDB(t)
	doc, err := apidocs.Generate(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	raises := map[string]string{}
	var current string
	for _, line := range strings.Split(doc, "\n") {
		if name, ok := strings.CutPrefix(line, "### convo."); ok {
			current, _, _ = strings.Cut(name, "(")
		}
		if codes, ok := strings.CutPrefix(line, "- Raises: "); ok {
			raises[current] = codes
		}
	}
	for fn, want := range map[string][]string{
		"move_head":                {"CV001", "CV002", "CV003", "CV011"}, // check_expected_head, message_ref, the reason
		"append_message":           {"CV004", "CV008", "CV009", "CV010"}, // the tree and parts triggers, retries, caps
		"settle_effect":            {"CV006"},                            // the state machine trigger
		"effect_for_call":          {"CV007"},                            // an unregistered tool
		"register_tool":            {"serialization_failure"},            // the race
		"max_message_bytes":        nil,                                  // a constant
		"path":                     {"CV002"},                            // conversation_ref, through path_from
		"fill_receipt":             {"CV002", "CV006"},                   // receipt_ref, the receipt trigger
		"orphaned_applied_effects": nil,
	} {
		got, ok := raises[fn]
		if !ok {
			t.Errorf("%s: not in docs/api.md", fn)
			continue
		}
		if want == nil && got != "none" {
			t.Errorf("%s raises %s, want none", fn, got)
		}
		for _, code := range want {
			if !strings.Contains(got, "`"+code+"`") {
				t.Errorf("%s raises %s, want %s among them", fn, got, code)
			}
		}
		if strings.Contains(got, "CV005") {
			t.Errorf("%s raises %s: CV005 comes only from the guards, which pgconvo's own writes pass", fn, got)
		}
	}
}

// generateDocs is docs/api.md for a fresh database with the tables t, and
// what the catalog contradicts in them.
func generateDocs(t *testing.T, tables apidocs.Tables) (string, apidocs.Findings) {
	t.Helper()
	doc, findings, err := apidocs.GenerateWith(context.Background(), newDB(t), tables)
	if err != nil {
		t.Fatal(err)
	}
	return doc, findings
}

// apiDocSections maps each function and view of docs/api.md (a "### convo."
// heading) to the "## " section it is in.
func apiDocSections(doc string) map[string]string {
	out := map[string]string{}
	var section string
	for _, line := range strings.Split(doc, "\n") {
		if name, ok := strings.CutPrefix(line, "### convo."); ok {
			out[name] = section
		} else if title, ok := strings.CutPrefix(line, "## "); ok {
			section = title
		}
	}
	return out
}

// TestAPIDocsGroups: every function and view of schema convo is in a group
// of internal/apidocs, which a test cannot leave to chance: a new function
// that no group names fails here, by name. A name of the table that the
// catalog lacks fails too (a stale name in the table); the sidebar
// functions are in the tree's group, import_history in the imports'.
func TestAPIDocsGroups(t *testing.T) {
	doc, findings := generateDocs(t, apidocs.Default())
	for _, name := range findings.Unplaced {
		t.Errorf("%s is in no group: add it to groups() in internal/apidocs/apidocs.go", name)
	}
	for _, d := range findings.Duplicates {
		t.Errorf("placed twice: %s", d)
	}
	for _, name := range findings.Absent {
		t.Errorf("%s is in a group but not in the catalog: remove it from groups() in internal/apidocs/apidocs.go", name)
	}
	in := apiDocSections(doc)
	const tree, imports = "The tree: conversations, messages, the head and the path", "Imports and export"
	for name, want := range map[string]string{
		"create_conversation": tree, "append_message": tree, "path": tree, "head_history": tree, "alternatives": tree,
		"conversations": tree, "set_title": tree, "archive_conversation": tree, "unarchive_conversation": tree,
		"import_chatgpt": imports, "import_conversation": imports, "export_conversation": imports, "import_history": imports,
		"register_tool": "Tools and effects", "settle_effect": "Tools and effects", "fill_receipt": "Receipts",
		"request_messages": "Generations and provider requests", "request_digest": "Generations and provider requests",
		"erase_owner": "Erasure", "self_check": "Operations", "max_part_bytes": "Operations",
	} {
		if got := in[name]; got != want {
			t.Errorf("convo.%s is under %q, want %q", name, got, want)
		}
	}
	// The groups come in the domain order.
	var order []string
	for _, line := range strings.Split(doc, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok && title != "Contents" && title != "SQLSTATEs" {
			order = append(order, title)
		}
	}
	wantOrder := []string{tree, "Search", "Generations and provider requests", "Tools and effects", "Receipts", imports, "Erasure", "Operations"}
	if strings.Join(order, "|") != strings.Join(wantOrder, "|") {
		t.Errorf("groups in the order %q, want %q", order, wantOrder)
	}

	// The check bites: a function the table forgets is unplaced, named, and
	// still documented (under "Not yet grouped"); a name the catalog lacks
	// is only absent.
	tables := apidocs.Default()
	for i := range tables.Groups {
		var kept []string
		for _, name := range tables.Groups[i].Names {
			if name != "settle_effect" && name != "stale_generations" {
				kept = append(kept, name)
			}
		}
		tables.Groups[i].Names = kept
	}
	tables.Groups[0].Names = append(tables.Groups[0].Names, "no_such_function")
	doc, findings = generateDocs(t, tables)
	if got := strings.Join(findings.Unplaced, "|"); !strings.Contains(got, "function convo.settle_effect(") ||
		!strings.Contains(got, "view convo.stale_generations") || len(findings.Unplaced) != 2 {
		t.Errorf("with settle_effect and stale_generations left out, unplaced: %v", findings.Unplaced)
	}
	if got := apiDocSections(doc)["settle_effect"]; got != "Not yet grouped" {
		t.Errorf("an unplaced function is under %q, want \"Not yet grouped\"", got)
	}
	if !listHas(findings.Absent, "no_such_function") {
		t.Errorf("a listed name the catalog lacks is not reported absent: %v", findings.Absent)
	}
}

func listHas(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestAPIDocsValues: the allowed values docs/api.md gives hold against the
// catalog: a CHECK's list, the RAISE conditions of the function's text, or
// a list of internal/apidocs whose every value the named functions' text
// quotes; and they are the contract's.
func TestAPIDocsValues(t *testing.T) {
	doc, findings := generateDocs(t, apidocs.Default())
	for _, p := range findings.ValueProblems {
		t.Errorf("value set does not hold: %s", p)
	}
	for key, want := range map[string][]string{
		"append_message(p_role)":             {"system", "user", "assistant", "tool"},
		"append_message(p_parts[].type)":     {"text", "tool_use", "tool_result", "attachment"},
		"register_tool(p_idempotency_scope)": {"tool_call", "conversation_args", "fork_args"},
		"settle_effect(p_state)":             {"applied", "failed"},
		"request_messages(p_format)":         {"openai", "anthropic"},
		"request_digest(p_format)":           {"openai", "anthropic"},
		"move_head(p_reason)":                {"~^[a-z][a-z0-9_]{0,62}$", "!create", "!import", "!direct_update"},
		"path(branch_reason)":                {"user_edit", "regenerate", "branch"},
		"alternatives(branch_reason)":        {"user_edit", "regenerate", "branch"},
		"effect_for_call(decision)":          {"execute", "reuse", "confirm", "rejected", "replay"},
		"effect_for_call(state)":             {"awaiting_confirmation", "pending", "applied", "failed", "compensated"},
		"begin_receipt(status)":              {"pending", "applied", "failed"},
		"head_history(reason)":               {"create", "import", "append", "user_edit", "regenerate", "switch", "direct_update"},
		"stale_pending_effects(state)":       {"pending", "awaiting_confirmation"},
	} {
		if got := findings.Values[key]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: values %q, want %q", key, got, want)
		}
	}
	if got := findings.Values["import_history(p_format)"]; strings.Join(got, ",") != "chatgpt,openwebui,librechat" {
		t.Errorf("import_history(p_format): values %q", got)
	}
	for _, s := range []string{
		"  - `p_state`: one of `applied`, `failed` (checked by this function)\n",
		"  - `p_role`: one of `system`, `user`, `assistant`, `tool` (CHECK `messages_role_check` on [`convo.messages`](schema.md#convomessages))\n",
		"  - `p_format`: one of `openai`, `anthropic` (checked by [`convo.request_messages`](#convorequest_messages))\n",
	} {
		if !strings.Contains(doc, s) {
			t.Errorf("docs/api.md lacks %q", s)
		}
	}

	// The checks bite: a value the function's text does not mention, a
	// parameter a function does not check, a column without a CHECK list,
	// a function that does not pass the argument on, a parameter that is
	// not there.
	tables := apidocs.Default()
	tables.Values = []apidocs.ValueSet{
		{Object: "settle_effect", Name: "p_state", Values: []string{"applied", "failed", "refunded"}, In: []string{"convo.settle_effect"}},
		{Object: "settle_effect", Name: "p_error_code", Text: "convo.settle_effect"},
		{Object: "append_message", Name: "p_role", Check: "messages.parent_id"},
		{Object: "path", Name: "role", Text: "convo.request_messages"},
		{Object: "settle_effect", Name: "p_colour", Check: "messages.role"},
		{Object: "settle_effect", Name: "p_state", Check: "tool_effects.state", Text: "convo.settle_effect"},
	}
	_, findings = generateDocs(t, tables)
	for i, want := range []string{
		"settle_effect(p_state): the value 'refunded' is in the text of none of convo.settle_effect",
		"settle_effect(p_error_code): no RAISE condition of convo.settle_effect lists the values of p_error_code",
		"append_message(p_role): no CHECK (parent_id = ANY (ARRAY[...])) on convo.messages",
		"path(role): convo.path does not call convo.request_messages",
		"settle_effect(p_colour): convo.settle_effect has no parameter or column p_colour",
		"settle_effect(p_state): give exactly one of Check, Text and Values",
	} {
		if i >= len(findings.ValueProblems) || !strings.HasPrefix(findings.ValueProblems[i], want) {
			t.Errorf("problem %d: got %q, want one starting %q", i, findings.ValueProblems, want)
		}
	}
}

// TestAPIDocsSQLSTATEs: docs/api.md has the table of SQLSTATEs, CV001 to
// CV011 as the contract's Conventions name them; every code a function or
// view raises is in it; and every Raises line links its codes to it.
func TestAPIDocsSQLSTATEs(t *testing.T) {
	doc, findings := generateDocs(t, apidocs.Default())
	for _, u := range findings.UnlistedCodes {
		t.Errorf("not in the SQLSTATE table (add it to sqlstates() in internal/apidocs/apidocs.go): %s", u)
	}
	for code, name := range map[string]string{
		"CV001": "stale_head", "CV002": "not_found", "CV003": "wrong_conversation", "CV004": "wrong_role",
		"CV005": "immutable", "CV006": "invalid_transition", "CV007": "unknown_tool", "CV008": "invalid_parts",
		"CV009": "idempotency_conflict", "CV010": "payload_too_large", "CV011": "invalid_argument",
	} {
		if row := "| `" + code + "` | `" + name + "` | "; !strings.Contains(doc, row) {
			t.Errorf("docs/api.md has no row %q", row)
		}
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\| ").FindAllStringSubmatch(doc, -1) {
		rows[m[1]], rows[m[2]] = true, true
	}
	linked := regexp.MustCompile(`^\[` + "`([^`]+)`" + `\]\(#sqlstates\)$`)
	for _, line := range strings.Split(doc, "\n") {
		codes, ok := strings.CutPrefix(line, "- Raises: ")
		if !ok || codes == "none" {
			continue
		}
		for _, c := range strings.Split(codes, ", ") {
			m := linked.FindStringSubmatch(c)
			if m == nil {
				t.Errorf("%q: a code not linked to the SQLSTATE table", c)
			} else if !rows[m[1]] {
				t.Errorf("%s is raised but has no row in the SQLSTATE table", m[1])
			}
		}
	}

	// The check bites: a table without CV007 misses effect_for_call's code.
	tables := apidocs.Default()
	var kept []apidocs.SQLSTATE
	for _, s := range tables.SQLSTATEs {
		if s.Code != "CV007" {
			kept = append(kept, s)
		}
	}
	tables.SQLSTATEs = kept
	_, findings = generateDocs(t, tables)
	if !listHas(findings.UnlistedCodes, "convo.effect_for_call raises CV007") {
		t.Errorf("without CV007 in the table, unlisted: %v", findings.UnlistedCodes)
	}
}

// apiDocAnchors returns the anchors GitHub gives the headings of a Markdown
// text: lower case, spaces to hyphens, punctuation but - and _ dropped, a
// repeat suffixed -1, -2, ... (github-slugger), outside code fences.
func apiDocAnchors(text string) map[string]bool {
	out, count := map[string]bool{}, map[string]int{}
	heading := regexp.MustCompile(`^#{1,6} (.*)$`)
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		for base := slug; out[slug]; {
			count[base]++
			slug = fmt.Sprintf("%s-%d", base, count[base])
		}
		out[slug] = true
	}
	return out
}

// TestAPIDocsLinks: the table of contents links every group and every
// function and view, and every link of docs/api.md to a heading, its own
// or docs/schema.md's, lands on one.
func TestAPIDocsLinks(t *testing.T) {
	doc, _ := generateDocs(t, apidocs.Default())
	schema, err := apidocs.GenerateSchema(context.Background(), newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{"": apiDocAnchors(doc), "schema.md": apiDocAnchors(schema)}
	links := regexp.MustCompile(`\]\(([a-z.]*)#([^)]*)\)`).FindAllStringSubmatch(doc, -1)
	if len(links) < 100 {
		t.Fatalf("only %d links in docs/api.md", len(links))
	}
	for _, m := range links {
		if target, ok := anchors[m[1]]; !ok || !target[m[2]] {
			t.Errorf("link %s#%s lands on no heading", m[1], m[2])
		}
	}
	toc, _, ok := strings.Cut(doc, "\n## SQLSTATEs\n")
	_, toc, ok2 := strings.Cut(toc, "\n## Contents\n")
	if !ok || !ok2 {
		t.Fatal("docs/api.md has no Contents before its SQLSTATEs")
	}
	for _, line := range strings.Split(doc, "\n") {
		if name, ok := strings.CutPrefix(line, "### convo."); ok {
			if entry := fmt.Sprintf("  - [`%s`](#convo%s)", name, name); !strings.Contains(toc, entry) {
				t.Errorf("the contents lack %q", entry)
			}
		} else if title, ok := strings.CutPrefix(line, "## "); ok && title != "Contents" {
			if !strings.Contains(toc, "- ["+title+"](#") {
				t.Errorf("the contents lack the group %q", title)
			}
		}
	}
}
