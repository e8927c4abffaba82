package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportCLISaysWhatItImported: the import summary lists each
// conversation of the export, its own id to pgconvo's conversation id, as
// convo.import_history returned it (created, or already present on a
// repeat), and -json prints the same as one JSON object on standard output
// alone; a refusal carries its HINT.
func TestImportCLISaysWhatItImported(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	url := appURL(t, db)
	file := fixturePath(t, "chatgpt-conversations.json")
	branched := importedID(t, db, "chatgpt", "yan", "fx-chatgpt-branched")
	tools := importedID(t, db, "chatgpt", "yan", "fx-chatgpt-tools")

	r := requireCLI(t, nil, 0, []string{summaryLine(3, 0, 0, "yan"), "source id -> pgconvo conversation id:\n",
		"  chatgpt-conversations.json[0] fx-chatgpt-branched -> " + branched + " (imported, ",
		"  chatgpt-conversations.json[1] fx-chatgpt-tools -> " + tools + " (imported, "},
		"import-chatgpt", "-owner", "yan", "-database", url, file)
	if strings.Contains(r.stdout, "1 conversations") || strings.Contains(r.stdout, "1 messages") {
		t.Fatalf("a plural for one:\n%s", r.stdout)
	}

	// Again, as JSON: every conversation already present, nothing written.
	before := fingerprint(t, db)
	r = requireCLI(t, nil, 0, nil, "import-chatgpt", "-owner", "yan", "-json", "-database", url, file)
	var sum struct {
		Owner, Role   string
		Imported      int
		Present       int `json:"already_present"`
		Conversations []struct {
			Where     string
			SourceKey string `json:"source_key"`
			ID        string `json:"conversation_id"`
			Created   bool
			Messages  int
		}
		Refused []any
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("-json's standard output is not one JSON object: %v\n%s", err, r.stdout)
	}
	requireFingerprint(t, db, "the repeat", before)
	requireEqual(t, "the counts", fmt.Sprintln(sum.Owner, sum.Imported, sum.Present, len(sum.Refused)), "yan 0 3 0\n")
	requireEqual(t, "the conversations listed", len(sum.Conversations), 3)
	for _, c := range sum.Conversations {
		if c.Created || c.Messages == 0 || c.ID != importedID(t, db, "chatgpt", "yan", c.SourceKey) {
			t.Errorf("conversation %+v: want a repeat with its messages and the documented id", c)
		}
	}
	if !strings.Contains(r.stderr, "database:") {
		t.Errorf("the database line is not on standard error:\n%s", r.stderr)
	}

	// A later export of the same chat is merged into its conversation.
	later := filepath.Join(t.TempDir(), "later.json")
	doc := `[{"conversation_id": "fx-chatgpt-tools", "mapping": {"a": {"id": "a", "parent": null, "children": [],
		"message": {"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["more"]}, "create_time": 1750000000}}}}]`
	if err := os.WriteFile(later, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	requireCLI(t, nil, 0, []string{summaryLine(1, 0, 0, "yan"), "fx-chatgpt-tools -> " + importedID(t, db, "chatgpt", "yan", "fx-chatgpt-tools") +
		" (imported, "}, "import-chatgpt", "-owner", "yan", "-database", url, later)

	// -json goes with an import verb only.
	requireCLI(t, nil, 2, []string{"-json goes with an import verb, not status"}, "status", "-json", "-database", url)
}
