package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sidebarRow is one row of convo.conversations().
type sidebarRow struct {
	ID, Title    string
	CreatedAt    time.Time
	LastActivity time.Time
	Head         string
	Archived     bool
}

// listSidebar calls convo.conversations as the application would (a login
// member of convo_app, the owner set with SET LOCAL) and returns its rows.
func listSidebar(t testing.TB, app *pgxpool.Pool, owner string, limit int, before *time.Time, archived bool, beforeID string) []sidebarRow {
	t.Helper()
	var out []sidebarRow
	err := inOwnerTx(app, owner, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT conversation_id::text, coalesce(title, ''), created_at, last_activity_at,
		                                   coalesce(head_message_id::text, ''), archived
		                              FROM convo.conversations($1, $2, $3, $4, $5)`,
			owner, limit, before, archived, nullable(beforeID))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (sidebarRow, error) {
			var s sidebarRow
			err := r.Scan(&s.ID, &s.Title, &s.CreatedAt, &s.LastActivity, &s.Head, &s.Archived)
			return s, err
		})
		return err
	})
	if err != nil {
		t.Fatalf("conversations(%s): %v", owner, err)
	}
	return out
}

// changeRow is one row of convo.conversation_changes.
type changeRow struct {
	Seq          int64
	Field        string
	Old, New, By *string
	ImportID     *string
}

func readChanges(t testing.TB, db *pgxpool.Pool, conv string) []changeRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT seq, field, old_value, new_value, changed_by, import_id::text
	                                               FROM convo.conversation_changes WHERE conversation_id = $1 ORDER BY seq`, conv)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (changeRow, error) {
		var c changeRow
		err := r.Scan(&c.Seq, &c.Field, &c.Old, &c.New, &c.By, &c.ImportID)
		return c, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func str(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// TestSidebarListsLatestActivityFirst: conversations() lists an owner's
// conversations by last activity (an append moves it, a title does not),
// pages by keyset without skipping or repeating a row even when many share
// one time, leaves archived ones out unless asked, and shows the application
// only the owner it set.
func TestSidebarListsLatestActivityFirst(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	var convs []string
	for i := 0; i < 5; i++ {
		c := createConversation(t, db, "owner-s", "")
		appendMsg(t, db, c, "user", textParts(fmt.Sprintf("message %d", i)))
		convs = append(convs, c)
	}
	// Seven conversations that share one activity time (as an import's do):
	// the superuser sets it directly with the guard's leave (the owner role's
	// own code would; here the point is the ties).
	tied := make([]string, 7)
	for i := range tied {
		tied[i] = createConversation(t, db, "owner-s", "")
	}
	mustExec(t, db, `ALTER TABLE convo.conversations DISABLE TRIGGER conversations_10_guard`)
	mustExec(t, db, `UPDATE convo.conversations SET last_activity_at = '2020-01-01 00:00:00+00' WHERE id = ANY ($1::uuid[])`, tied)
	mustExec(t, db, `ALTER TABLE convo.conversations ENABLE ALWAYS TRIGGER conversations_10_guard`)
	createConversation(t, db, "owner-other", "")

	// Newest activity first: convs[4] .. convs[0], then the ties by id, descending.
	all := listSidebar(t, app, "owner-s", 1000, nil, false, "")
	if len(all) != 12 {
		t.Fatalf("listed %d conversations, want 12", len(all))
	}
	for i := 0; i < 5; i++ {
		requireEqual(t, fmt.Sprintf("row %d", i), all[i].ID, convs[4-i])
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.LastActivity.Before(b.LastActivity) || (a.LastActivity.Equal(b.LastActivity) && a.ID < b.ID) {
			t.Fatalf("rows %d and %d out of order: %v %s then %v %s", i-1, i, a.LastActivity, a.ID, b.LastActivity, b.ID)
		}
	}

	// Pages of 3 by (p_before, p_before_id): the same rows, none twice.
	var paged []string
	var before *time.Time
	beforeID := ""
	for page := 0; page < 10; page++ {
		rows := listSidebar(t, app, "owner-s", 3, before, false, beforeID)
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			paged = append(paged, r.ID)
		}
		last := rows[len(rows)-1]
		before, beforeID = &last.LastActivity, last.ID
	}
	var want []string
	for _, r := range all {
		want = append(want, r.ID)
	}
	requireSlice(t, "the pages", paged, want)

	// p_before alone is strictly older: the tied rows are all left out when
	// it is their time.
	tieTime := all[len(all)-1].LastActivity
	requireEqual(t, "rows strictly older than the ties", len(listSidebar(t, app, "owner-s", 50, &tieTime, false, "")), 0)

	// A title is no activity; an append is.
	mustExec(t, db, `SELECT convo.set_title($1, 'Renamed')`, convs[0])
	requireEqual(t, "after set_title, the last row", listSidebar(t, app, "owner-s", 5, nil, false, "")[4].ID, convs[0])
	appendMsg(t, db, convs[0], "assistant", textParts("reply"))
	top := listSidebar(t, app, "owner-s", 1, nil, false, "")[0]
	requireEqual(t, "after an append, the first row", top.ID, convs[0])
	requireEqual(t, "its title", top.Title, "Renamed")
	requireEqual(t, "its head", top.Head, headOf(t, db, convs[0]))

	// Archived: out of the list, in the archived list, and back.
	if err := asOwner(app, "owner-s", `SELECT convo.archive_conversation($1)`, convs[0]); err != nil {
		t.Fatal(err)
	}
	for _, r := range listSidebar(t, app, "owner-s", 1000, nil, false, "") {
		if r.ID == convs[0] {
			t.Fatal("an archived conversation is still listed")
		}
	}
	archived := listSidebar(t, app, "owner-s", 1000, nil, true, "")
	if len(archived) != 1 || archived[0].ID != convs[0] || !archived[0].Archived {
		t.Fatalf("the archived list: %+v", archived)
	}
	if err := asOwner(app, "owner-s", `SELECT convo.unarchive_conversation($1)`, convs[0]); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "unarchived, the first row", listSidebar(t, app, "owner-s", 1, nil, false, "")[0].ID, convs[0])

	// The application lists only the owner it set; a reader any.
	err := asOwner(app, "owner-s", `SELECT * FROM convo.conversations('owner-other')`)
	requireSQLState(t, err, "CV011")
	err = asOwner(app, "", `SELECT * FROM convo.conversations('owner-s')`)
	requireSQLState(t, err, "CV011")
	reader := loginAs(t, db, "convo_reader")
	requireEqual(t, "a reader's list of owner-other", len(queryRowsAs[string](t, reader,
		`SELECT conversation_id::text FROM convo.conversations('owner-other')`)), 1)
}

// TestSidebarRefusesBadInput: every bad argument of the sidebar's functions
// is its SQLSTATE, and nothing is written.
func TestSidebarRefusesBadInput(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-b", "")
	other := createConversation(t, db, "owner-c", "")
	cases := []struct{ name, sql, state string }{
		{"limit 0", `SELECT * FROM convo.conversations('owner-b', 0)`, "CV011"},
		{"limit 1001", `SELECT * FROM convo.conversations('owner-b', 1001)`, "CV011"},
		{"limit NULL", `SELECT * FROM convo.conversations('owner-b', NULL)`, "CV011"},
		{"archived NULL", `SELECT * FROM convo.conversations('owner-b', 50, NULL, NULL)`, "CV011"},
		{"before_id without before", `SELECT * FROM convo.conversations('owner-b', 50, NULL, false, gen_random_uuid())`, "CV011"},
		{"owner NULL", `SELECT * FROM convo.conversations(NULL)`, "CV011"},
		{"a title too long", `SELECT convo.set_title('` + conv + `', repeat('x', 1001))`, "CV010"},
		{"a title of another owner's conversation", `SELECT convo.set_title('` + other + `', 'mine')`, "CV002"},
		{"a title of no conversation", `SELECT convo.set_title(gen_random_uuid(), 'mine')`, "CV002"},
		{"a title of a NULL conversation", `SELECT convo.set_title(NULL, 'mine')`, "CV011"},
		{"archive another owner's", `SELECT convo.archive_conversation('` + other + `')`, "CV002"},
		{"unarchive no conversation", `SELECT convo.unarchive_conversation(gen_random_uuid())`, "CV002"},
		{"import of an unknown format", `SELECT * FROM convo.import_history('slack', 'owner-b', '{}')`, "CV011"},
		{"import for another owner", `SELECT * FROM convo.import_history('chatgpt', 'owner-c', '{"mapping": {}}')`, "CV011"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := fingerprint(t, db)
			requireSQLState(t, asOwner(app, "owner-b", c.sql), c.state)
			requireFingerprint(t, db, c.name, before)
		})
	}
}

// TestEveryTitleChangeIsLogged: set_title, archive and unarchive log each
// change (who, old and new), a repeat logs nothing, and a direct UPDATE by
// a role given UPDATE or by the owner role is logged as that role; the
// change log and the last activity cannot be written around the API, by
// anyone.
func TestEveryTitleChangeIsLogged(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-t", "")
	appRole := queryRowsAs[string](t, app, `SELECT current_user::text`)[0]
	for _, sql := range []string{
		`SELECT convo.set_title($1, 'First')`,
		`SELECT convo.set_title($1, 'First')`, // the same: nothing
		`SELECT convo.set_title($1, 'Second')`,
		`SELECT convo.archive_conversation($1)`,
		`SELECT convo.archive_conversation($1)`, // again: nothing
		`SELECT convo.unarchive_conversation($1)`,
		`SELECT convo.set_title($1, NULL)`,
	} {
		if err := asOwner(app, "owner-t", sql, conv); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var got []string
	for _, c := range readChanges(t, db, conv) {
		got = append(got, fmt.Sprintf("%d %s %s->%s by %s", c.Seq, c.Field, str(c.Old), str(c.New), str(c.By)))
	}
	requireSlice(t, "the change log", got, []string{
		"1 title NULL->First by " + appRole,
		"2 title First->Second by " + appRole,
		"3 archived false->true by " + appRole,
		"4 archived true->false by " + appRole,
		"5 title Second->NULL by " + appRole,
	})

	// A direct UPDATE outside the API: logged as the role that made it.
	grantee := createGrantedRole(t, db)
	mustExec(t, db, `GRANT convo_reader TO `+pgx.Identifier{grantee}.Sanitize())
	for _, actor := range []string{grantee, "convo_owner"} {
		if err := execAs(db, actor, "owner-t", `UPDATE convo.conversations SET title = $2 WHERE id = $1`, conv, "by "+actor); err != nil {
			t.Fatalf("a direct title UPDATE as %s: %v", actor, err)
		}
		last := readChanges(t, db, conv)
		l := last[len(last)-1]
		requireEqual(t, "the logged direct change", fmt.Sprintf("%s %s by %s", l.Field, str(l.New), str(l.By)),
			fmt.Sprintf("title by %s by %s", actor, actor))
	}
	if err := execAs(db, grantee, "owner-t", `UPDATE convo.conversations SET archived = true WHERE id = $1`, conv); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, "a direct archive UPDATE, logged", readChanges(t, db, conv)[len(readChanges(t, db, conv))-1].Field, "archived")

	// Around the API, refused: a role given table privileges writing the
	// log (a superuser, or the owner role a superuser becomes, may repair
	// it, as every history table); and, for every actor, changing a row of
	// it or moving the last activity.
	before := fingerprint(t, db)
	err := execAs(db, grantee, "owner-t", `INSERT INTO convo.conversation_changes (conversation_id, seq, field, old_value, new_value)
		VALUES ($1, 99, 'title', NULL, 'forged')`, conv)
	requireSQLState(t, err, "CV005")
	requireFingerprint(t, db, "a forged change row", before)
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		ctx := context.Background()
		for _, c := range []struct{ sql, state string }{
			{`UPDATE convo.conversation_changes SET new_value = 'forged' WHERE conversation_id = '` + conv + `'`, "CV005"},
			{`DELETE FROM convo.conversation_changes WHERE conversation_id = '` + conv + `'`, "CV005"},
			{`UPDATE convo.conversations SET last_activity_at = now() - interval '1 year' WHERE id = '` + conv + `'`, "CV005"},
		} {
			before := fingerprint(t, db)
			_, err := conn.Exec(ctx, c.sql)
			requireSQLState(t, err, c.state)
			requireFingerprint(t, db, c.sql, before)
		}
	})
}

// TestImportSetsTheTitle: an import takes the export's title, logged as
// the import's change, and import_history says what it did: created, then
// a repeat that writes nothing.
func TestImportSetsTheTitle(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	doc := `{"conversation_id": "sidebar-1", "title": "Trip to Lisbon", "current_node": "b", "mapping": {
		"root": {"id": "root", "parent": null, "children": ["a"], "message": null},
		"a": {"id": "a", "parent": "root", "children": ["b"], "message": {"author": {"role": "user"},
		      "content": {"content_type": "text", "parts": ["Plan it"]}, "create_time": 1750000000}},
		"b": {"id": "b", "parent": "a", "children": [], "message": {"author": {"role": "assistant"},
		      "content": {"content_type": "text", "parts": ["Day one"]}, "create_time": 1750000060}}}}`
	type result struct {
		ID       string
		Created  bool
		Messages int32
		Kept     int32
		Title    string
	}
	importOnce := func() result {
		var r result
		err := inOwnerTx(app, "owner-i", func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT conversation_id::text, created, messages, nodes_kept, coalesce(title, '')
			                           FROM convo.import_history('chatgpt', 'owner-i', $1)`, doc).
				Scan(&r.ID, &r.Created, &r.Messages, &r.Kept, &r.Title)
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := importOnce()
	requireEqual(t, "the first import", fmt.Sprintf("%v %d %d %s", first.Created, first.Messages, first.Kept, first.Title),
		"true 2 1 Trip to Lisbon")
	requireEqual(t, "the id", first.ID, importedID(t, db, "chatgpt", "owner-i", "sidebar-1"))
	before := fingerprint(t, db)
	again := importOnce()
	requireEqual(t, "the repeat", fmt.Sprintf("%s %v %d", again.ID, again.Created, again.Messages), first.ID+" false 2")
	requireFingerprint(t, db, "the repeat", before)

	changes := readChanges(t, db, first.ID)
	if len(changes) != 1 || changes[0].Field != "title" || str(changes[0].New) != "Trip to Lisbon" || changes[0].ImportID == nil {
		t.Fatalf("the import's change log: %+v", changes)
	}
	rows := listSidebar(t, app, "owner-i", 10, nil, false, "")
	if len(rows) != 1 || rows[0].Title != "Trip to Lisbon" || !rows[0].LastActivity.Equal(time.Unix(1750000060, 0)) {
		t.Fatalf("the sidebar after the import: %+v", rows)
	}
}

// TestErasureEmptiesTitles: erasure empties the title and every title in
// the change log (the archive states stay: they are no content), and an
// export after it holds none; a title set later is kept by a restore.
func TestErasureEmptiesTitles(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-e", "")
	appendMsg(t, db, conv, "user", textParts("secret plans"))
	mustExec(t, db, `SELECT convo.set_title($1, 'Secret plans')`, conv)
	mustExec(t, db, `SELECT convo.archive_conversation($1)`, conv)
	places := queryRowsAs[string](t, db, `SELECT place || ' ' || rows_redacted FROM convo.erase_conversation($1, 'asked') ORDER BY 1`, conv)
	requireContains(t, "the places", places, "conversations 1")
	requireContains(t, "the places", places, "conversation_changes 1")
	requireEqual(t, "the title", queryRow[*string](t, db, `SELECT title FROM convo.conversations WHERE id = $1`, conv) == nil, true)
	for _, c := range readChanges(t, db, conv) {
		if c.Field == "title" && (c.Old != nil || c.New != nil) {
			t.Fatalf("change %d still holds a title: %s -> %s", c.Seq, str(c.Old), str(c.New))
		}
		if c.Field == "archived" && str(c.New) != "true" {
			t.Fatalf("the archive change lost its state: %+v", c)
		}
	}
	export := queryRow[string](t, db, `SELECT convo.export_conversation($1)::text`, conv)
	if strings.Contains(export, "Secret plans") {
		t.Fatal("the export after erasure still holds the title")
	}
}

// requireContains fails unless list holds s.
func requireContains(t testing.TB, what string, list []string, s string) {
	t.Helper()
	for _, x := range list {
		if x == s {
			return
		}
	}
	t.Fatalf("%s: %q is not in %q", what, s, list)
}

// restoreDoc restores an export as a superuser (a DBA) and returns the id.
func restoreDoc(db *pgxpool.Pool, owner, doc string) (string, error) {
	var id string
	err := db.QueryRow(context.Background(), `SELECT convo.import_conversation($1, $2::jsonb)::text`, owner, doc).Scan(&id)
	return id, err
}

// TestExportCarriesTheChangeLog: an export (version 3) holds the title,
// the archive state, the last activity and the change log, and a restore
// reads them back identically (seq numbered there); a version 2 document
// still restores, with no title and its latest message's time as its last
// activity; a change log the API could not have written is refused (CV011)
// and nothing is written.
func TestExportCarriesTheChangeLog(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	conv := createConversation(t, src, "owner-x", "You plan trips.")
	appendMsg(t, src, conv, "user", textParts("Lisbon in May"))
	mustExec(t, src, `SELECT convo.set_title($1, 'Lisbon')`, conv)
	mustExec(t, src, `SELECT convo.set_title($1, 'Lisbon in May')`, conv)
	mustExec(t, src, `SELECT convo.archive_conversation($1)`, conv)
	doc := queryRow[string](t, src, `SELECT convo.export_conversation($1)::text`, conv)
	x := decodeExport(t, doc)
	requireEqual(t, "the version", fmt.Sprint(x["version"]), "3")
	requireEqual(t, "the changes exported", len(rows(x, "changes")), 3)

	id, err := restoreDoc(dst, "owner-x", doc)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	requireEqual(t, "the restored id", id, conv)
	requireEqual(t, "the export of the restored conversation",
		restoredDoc(t, queryRow[string](t, dst, `SELECT convo.export_conversation($1)::text`, conv)), restoredDoc(t, doc))
	requireSlice(t, "the restored change log's source_seq", queryRowsAs[string](t, dst,
		`SELECT source_seq::text FROM convo.conversation_changes WHERE conversation_id = $1 ORDER BY seq`, conv),
		[]string{"1", "2", "3"})
	requireSlice(t, "failed self_check checks after the restore", queryRowsAs[string](t, dst,
		`SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok`), []string{})

	// A version 2 document: no title, archive state or change log.
	plain := createConversation(t, src, "owner-y", "")
	appendMsg(t, src, plain, "user", textParts("hello"))
	v2 := editExport(t, queryRow[string](t, src, `SELECT convo.export_conversation($1)::text`, plain), func(x map[string]any) {
		x["version"] = 2
		delete(x, "changes")
		c := x["conversation"].(map[string]any)
		delete(c, "title")
		delete(c, "archived")
		delete(c, "last_activity_at")
	})
	if _, err := restoreDoc(dst, "owner-y", v2); err != nil {
		t.Fatalf("restoring a version 2 document: %v", err)
	}
	requireEqual(t, "a version 2 restore's last activity is its message's time",
		queryRow[bool](t, dst, `SELECT c.last_activity_at = (SELECT max(m.created_at) FROM convo.messages m WHERE m.conversation_id = c.id)
		                          FROM convo.conversations c WHERE c.id = $1`, plain), true)

	// Change logs the API could not have written.
	other := newDB(t)
	change := func(x map[string]any, seq int) map[string]any {
		for _, r := range rows(x, "changes") {
			if fmt.Sprint(r["seq"]) == fmt.Sprint(seq) {
				return r
			}
		}
		t.Fatalf("no change seq %d", seq)
		return nil
	}
	for _, c := range []struct {
		name    string
		edit    func(x map[string]any)
		mention string
	}{
		{"a title changed from what it never was", func(x map[string]any) { change(x, 2)["old_value"] = "Porto" },
			"changes: row seq 2 changes title from Porto"},
		{"a conversation whose title the log does not leave", func(x map[string]any) {
			x["conversation"].(map[string]any)["title"] = "Madrid"
		}, "the log leaves the title Lisbon in May"},
		{"an archive state with no change", func(x map[string]any) {
			x["changes"] = rows(x, "changes")[:2]
		}, "the log leaves the archived false"},
		{"a change before the conversation", func(x map[string]any) { change(x, 1)["changed_at"] = "2001-01-01T00:00:00+00:00" },
			"changes: row seq 1 changed at"},
		{"a change of another field", func(x map[string]any) { change(x, 1)["field"] = "owner_id" },
			"changes: row seq 1 changes owner_id"},
		{"a change twice", func(x map[string]any) { change(x, 3)["seq"] = 2 }, "changes: row seq 2 appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fingerprint(t, other)
			_, err := restoreDoc(other, "owner-x", editExport(t, doc, c.edit))
			requireSQLState(t, err, "CV011")
			if !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("the refusal %q does not say %q", err, c.mention)
			}
			requireFingerprint(t, other, c.name, before)
		})
	}
}
