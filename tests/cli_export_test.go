package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIExportRestoreRoundTrip: `migrate -owner X export ID` prints
// exactly convo.export_conversation(ID) read as owner X, with nothing else
// on standard output; `migrate restore FILE`, as a login member of
// convo_admin on a fresh database, restores it (the owner read from the
// document); exported again there, it is the same document but for what a
// restore assigns; restoring it again writes nothing.
func TestCLIExportRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	app := loginAs(t, src, "convo_app")
	want := exportAs(t, app, "owner-1", conv)

	r := requireCLI(t, nil, 0, nil, "-database", app.Config().ConnString(), "-owner", "owner-1", "export", conv)
	if r.stdout != want+"\n" {
		t.Fatalf("export printed something other than export_conversation's document:\n%.300s\nwant:\n%.300s", r.stdout, want)
	}
	if !strings.HasPrefix(r.stderr, "database: ") {
		t.Fatalf("export should name the database on standard error, got:\n%s", r.stderr)
	}
	file := filepath.Join(t.TempDir(), "conversation.json")
	if err := os.WriteFile(file, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	dbaName, dba := newRole(t, dst, "LOGIN", "convo_admin")
	requireCLI(t, nil, 0, []string{"restored conversation " + conv + " for owner owner-1\n"},
		"-database", dba.Config().ConnString(), "restore", file)
	requireRestoredRows(t, dst, conv, dbaName, want)
	reader := loginAs(t, dst, "convo_reader")
	again := requireCLI(t, nil, 0, nil, "-database", reader.Config().ConnString(), "export", conv)
	requireEqual(t, "the export of the restored conversation", restoredDoc(t, strings.TrimSuffix(again.stdout, "\n")), restoredDoc(t, want))

	before := fingerprint(t, dst)
	requireCLI(t, nil, 0, []string{"conversation " + conv + " of owner owner-1 is here already, as the document has it: nothing was written"},
		"-database", dba.Config().ConnString(), "-owner", "owner-1", "restore", file)
	requireFingerprint(t, dst, "restoring the same document again", before)
}

// TestCLIExportRestoreErrors: an unknown conversation (CV002), a role
// without the grant (42501), a document the database refuses (CV011) and
// a file that is no export are each one line with the SQLSTATE (when the
// database said it) and what to do, exit 1, and write nothing.
func TestCLIExportRestoreErrors(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	exportTools(t, src, dst)
	conv := exportStory(t, src, "owner-1")
	doc := exportAs(t, src, "", conv)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", doc)
	app := loginAs(t, src, "convo_app").Config().ConnString()
	plain := loginAs(t, src)
	_, dba := newRole(t, dst, "LOGIN", "convo_admin")
	dstApp := loginAs(t, dst, "convo_app")
	admin := dba.Config().ConnString()
	beforeSrc, beforeDst := fingerprint(t, src), fingerprint(t, dst)

	for _, c := range []struct {
		want []string
		args []string
	}{
		{[]string{"export: conversation 00000000-0000-0000-0000-000000000000 does not exist (SQLSTATE CV002): check the ID and the owner"},
			[]string{"-database", app, "-owner", "owner-1", "export", "00000000-0000-0000-0000-000000000000"}},
		{[]string{"(SQLSTATE CV002): check the ID, and give -owner OWNER, its owner"},
			[]string{"-database", app, "export", conv}},
		{[]string{"(SQLSTATE CV002)"}, []string{"-database", app, "-owner", "owner-2", "export", conv}},
		{[]string{"export: permission denied for schema convo (SQLSTATE 42501): export as a login member of convo_app",
			"GRANT convo_reader TO " + plain.Config().ConnConfig.User},
			[]string{"-database", plain.Config().ConnString(), "-owner", "owner-1", "export", conv}},
		{[]string{"restore: permission denied for function import_conversation (SQLSTATE 42501): restore as a login member of convo_admin",
			"GRANT convo_admin TO " + dstApp.Config().ConnConfig.User, "nothing was written"},
			[]string{"-database", dstApp.Config().ConnString(), "restore", good}},
		{[]string{"restore: the export belongs to another owner", "(SQLSTATE CV011): the document was refused, nothing was written"},
			[]string{"-database", admin, "-owner", "owner-2", "restore", good}},
		{[]string{"restore: not a pgconvo export of version", "(SQLSTATE CV011): the document was refused, nothing was written"},
			[]string{"-database", admin, "restore", write("old.json", editExport(t, doc, func(x map[string]any) { x["version"] = 1 }))}},
		{[]string{"names no owner (no conversation.owner_id)", "or -owner OWNER"},
			[]string{"-database", admin, "restore", write("bare.json", `{"format": "pgconvo.export"}`)}},
		{[]string{"is not a JSON object", "give the file `go run ./cmd/migrate export ID` wrote"},
			[]string{"-database", admin, "restore", write("text.json", "hello")}},
		{[]string{"restore: open " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
			[]string{"-database", admin, "restore", filepath.Join(dir, "missing.json")}},
	} {
		r := requireCLI(t, nil, 1, nil, c.args...)
		for _, w := range c.want {
			requireOneError(t, r, w)
		}
		if strings.Contains(r.stdout, "{") || strings.Contains(r.stdout, "restored") {
			t.Fatalf("migrate %v printed a result:\n%s", c.args, r.stdout)
		}
		if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) > 2 {
			t.Fatalf("migrate %v: more than the database and one error line:\n%s", c.args, r.stderr)
		}
	}
	requireFingerprint(t, src, "the refused exports", beforeSrc)
	requireFingerprint(t, dst, "the refused restores", beforeDst)
}
