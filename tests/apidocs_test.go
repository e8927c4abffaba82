package tests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
