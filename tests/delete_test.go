package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of "delete chat": delete_conversation hides a conversation from its
// owner at once, restore_deleted_conversation brings it back, erase_due
// erases it once the retention period has run out, and an erased
// conversation is not listed by conversations().

// sidebarIDs lists owner's conversations (not archived) as the application.
func sidebarIDs(t testing.TB, app *pgxpool.Pool, owner string) []string {
	t.Helper()
	var out []string
	for _, r := range listSidebar(t, app, owner, 1000, nil, false, "") {
		out = append(out, r.ID)
	}
	return out
}

// TestDeleteConversationHidesItFromItsOwner: after delete_conversation the
// conversation leaves the sidebar and every call of its owner answers CV002,
// as for one that does not exist; the deletion is logged like a title, by
// the caller; a reader still reads it; convo_admin brings it back, logged,
// and then it is listed and readable again.
func TestDeleteConversationHidesItFromItsOwner(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	reader := loginAs(t, db, "convo_reader")
	admin := loginAs(t, db, "convo_admin")
	gone := createConversation(t, db, "owner-d", "")
	first := appendMsg(t, db, gone, "user", textParts("a chat to delete"))
	kept := createConversation(t, db, "owner-d", "")
	appendMsg(t, db, kept, "user", textParts("a chat to keep"))

	if err := asOwner(app, "owner-d", `SELECT convo.delete_conversation($1)`, gone); err != nil {
		t.Fatalf("delete_conversation: %v", err)
	}
	requireSlice(t, "the sidebar after the deletion", sidebarIDs(t, app, "owner-d"), []string{kept})

	// Every call of the owner's on the deleted conversation: CV002, nothing written.
	before := fingerprint(t, db)
	for _, call := range []struct{ name, sql string }{
		{"path", `SELECT * FROM convo.path($1)`},
		{"path_at", `SELECT * FROM convo.path_at($1, now())`},
		{"head_at", `SELECT convo.head_at($1, now())`},
		{"head_history", `SELECT * FROM convo.head_history($1)`},
		{"alternatives", `SELECT * FROM convo.alternatives($1, '` + first + `')`},
		{"request_messages", `SELECT convo.request_messages($1)`},
		{"export_conversation", `SELECT convo.export_conversation($1)`},
		{"append_message", `SELECT convo.append_message($1, 'user', '[{"type":"text","text":"more"}]')`},
		{"set_title", `SELECT convo.set_title($1, 'a title')`},
		{"archive_conversation", `SELECT convo.archive_conversation($1)`},
		{"begin_generation", `SELECT convo.begin_generation($1, '` + first + `', 'model-x')`},
		{"delete_conversation again", `SELECT convo.delete_conversation($1)`},
	} {
		err := asOwner(app, "owner-d", call.sql, gone)
		if sqlState(err) != "CV002" {
			t.Errorf("%s on a deleted conversation: got %v, want CV002", call.name, err)
		}
	}
	requireFingerprint(t, db, "the refused calls", before)

	// The log: one change, false to true, by the application's login.
	changes := readChanges(t, db, gone)
	if len(changes) != 1 || changes[0].Field != "deleted" || str(changes[0].Old) != "false" || str(changes[0].New) != "true" {
		t.Fatalf("change log after the deletion: %+v", changes)
	}
	if by := str(changes[0].By); by == "" || by == "NULL" || by == "postgres" {
		t.Fatalf("the deletion is logged by %q, want the application's login", by)
	}

	// A reader (an abuse report's review) still reads it.
	if n := len(queryRowsAs[string](t, reader, `SELECT message_id::text FROM convo.path($1)`, gone)); n != 1 {
		t.Fatalf("a reader reads %d messages of the deleted conversation, want 1", n)
	}

	// convo_admin brings it back: listed, readable, logged true to false.
	mustExec(t, admin, `SELECT convo.restore_deleted_conversation($1)`, gone)
	requireSlice(t, "the sidebar after the restore", sorted(sidebarIDs(t, app, "owner-d")...), sorted(gone, kept))
	if got := queryAsOwner(t, app, "owner-d", `SELECT message_id::text FROM convo.path($1)`, gone); len(got) != 1 || got[0] != first {
		t.Fatalf("path after the restore: %v, want [%s]", got, first)
	}
	changes = readChanges(t, db, gone)
	if len(changes) != 2 || changes[1].Field != "deleted" || str(changes[1].Old) != "true" || str(changes[1].New) != "false" {
		t.Fatalf("change log after the restore: %+v", changes)
	}
	// A restore of a conversation not deleted changes nothing.
	before = fingerprint(t, db)
	mustExec(t, admin, `SELECT convo.restore_deleted_conversation($1)`, gone)
	requireFingerprint(t, db, "a repeated restore", before)
}

// TestDeleteConversationRefusals: another owner's conversation, an unknown
// one and a NULL id are refused, writing nothing; the application may not
// restore, sweep or set the retention period (42501).
func TestDeleteConversationRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	theirs := createConversation(t, db, "owner-other", "")
	appendMsg(t, db, theirs, "user", textParts("not yours"))
	mine := createConversation(t, db, "owner-d", "")
	before := fingerprint(t, db)
	for _, c := range []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"another owner's conversation", `SELECT convo.delete_conversation($1)`, []any{theirs}, "CV002"},
		{"a conversation that does not exist", `SELECT convo.delete_conversation($1)`, []any{newID()}, "CV002"},
		{"a NULL id", `SELECT convo.delete_conversation($1)`, []any{nil}, "CV011"},
		{"restore by the application", `SELECT convo.restore_deleted_conversation($1)`, []any{mine}, "42501"},
		{"erase_due by the application", `SELECT convo.erase_due()`, nil, "42501"},
		{"the retention period by the application", `SELECT convo.set_deletion_retention('1 day')`, nil, "42501"},
	} {
		err := asOwner(app, "owner-d", c.sql, c.args...)
		if sqlState(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	for _, c := range []struct{ name, period string }{{"a negative period", "-1 day"}, {"NULL", ""}} {
		_, err := admin.Exec(context.Background(), `SELECT convo.set_deletion_retention($1::interval)`, nullable(c.period))
		if sqlState(err) != "CV011" {
			t.Errorf("set_deletion_retention(%s): got %v, want CV011", c.name, err)
		}
	}
	// A restore of an unknown conversation is CV002 to convo_admin too.
	if _, err := admin.Exec(context.Background(), `SELECT convo.restore_deleted_conversation($1)`, newID()); sqlState(err) != "CV002" {
		t.Errorf("restore of an unknown conversation: got %v, want CV002", err)
	}
	requireFingerprint(t, db, "the refused calls", before)
	requireEqual(t, "deletion_retention() by default", queryRow[string](t, db, `SELECT convo.deletion_retention()::text`), "30 days")
}

// TestEraseDue: with a period not yet run out erase_due erases nothing and
// writes nothing; with a period of 0 it erases every deleted conversation
// (as erase_conversation does, recorded with its reason) and says how many;
// a repeat finds nothing; an erased conversation is not brought back
// (CV006), and neither it nor one erase_owner or erase_conversation erased
// is listed by conversations().
func TestEraseDue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	deleted := createConversation(t, db, "owner-e", "")
	appendMsg(t, db, deleted, "user", textParts("my secret plan"))
	kept := createConversation(t, db, "owner-e", "")
	appendMsg(t, db, kept, "user", textParts("still here"))
	if err := asOwner(app, "owner-e", `SELECT convo.delete_conversation($1)`, deleted); err != nil {
		t.Fatal(err)
	}

	// 30 days, not yet run out: nothing erased, nothing written.
	before := fingerprint(t, db)
	requireEqual(t, "erase_due within the period", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(0))
	requireFingerprint(t, db, "erase_due within the period", before)

	// A period of 0: the deleted conversation is erased at the sweep, and only it.
	mustExec(t, admin, `SELECT convo.set_deletion_retention('0')`)
	requireEqual(t, "deletion_retention()", queryRow[string](t, db, `SELECT convo.deletion_retention()::text`), "00:00:00")
	requireEqual(t, "erase_due with a period of 0", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(1))
	requireEqual(t, "the erasure's reason",
		queryRow[string](t, db, `SELECT string_agg(reason, ',') FROM convo.erasures WHERE conversation_id = $1`, deleted),
		"deleted; retention period over")
	requireCount(t, db, 0, `SELECT count(*) FROM convo.messages WHERE conversation_id = $1 AND parts::text LIKE '%secret%'`, deleted)
	requireCount(t, db, 0, `SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, kept)
	requireEqual(t, "a repeated sweep", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(0))
	if _, err := admin.Exec(context.Background(), `SELECT convo.restore_deleted_conversation($1)`, deleted); sqlState(err) != "CV006" {
		t.Fatalf("restore of an erased conversation: got %v, want CV006", err)
	}
	requireSlice(t, "the sidebar", sidebarIDs(t, app, "owner-e"), []string{kept})

	// erase_conversation and erase_owner: the erased chats leave the sidebar
	// (not listed as blank entries); their erasure records stay.
	other := createConversation(t, db, "owner-e", "")
	appendMsg(t, db, other, "user", textParts("erased by an admin"))
	mustExec(t, admin, `SELECT * FROM convo.erase_conversation($1, 'a request')`, other)
	requireSlice(t, "the sidebar after erase_conversation", sidebarIDs(t, app, "owner-e"), []string{kept})
	mustExec(t, admin, `SELECT * FROM convo.erase_owner('owner-e', 'the owner left')`)
	if got := sidebarIDs(t, app, "owner-e"); len(got) != 0 {
		t.Fatalf("the sidebar after erase_owner lists %v, want nothing", got)
	}
	if got := listSidebar(t, app, "owner-e", 1000, nil, true, ""); len(got) != 0 {
		t.Fatalf("the archived sidebar after erase_owner lists %v, want nothing", got)
	}
	// erase_due once, erase_conversation once, erase_owner once a conversation (three).
	requireCount(t, db, 5, `SELECT count(*) FROM convo.erasures WHERE owner_id = 'owner-e'`)
	if checks := failingChecks(t, db); checks != "" {
		t.Fatalf("self_check after the sweeps: %s", checks)
	}
}

// TestEraseDueLeavesARestoredConversation: a conversation brought back
// before the sweep is not erased by it.
func TestEraseDueLeavesARestoredConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	conv := createConversation(t, db, "owner-r", "")
	appendMsg(t, db, conv, "user", textParts("a mistaken click"))
	if err := asOwner(app, "owner-r", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `SELECT convo.restore_deleted_conversation($1)`, conv)
	mustExec(t, admin, `SELECT convo.set_deletion_retention('0')`)
	requireEqual(t, "erase_due", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(0))
	requireCount(t, db, 0, `SELECT count(*) FROM convo.erasures WHERE conversation_id = $1`, conv)
}

// TestDeletedChatsChargesStayListed: an applied charge stranded on an
// abandoned branch, and one still pending, stay listed after the chat is
// deleted (a charge is still a charge), until it is erased; erasure keeps
// the ledger's rows.
func TestDeletedChatsChargesStayListed(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	n := buildTenant(t, db, "owner-l")
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	orphans := func() []string {
		return queryAsOwner(t, app, "owner-l", `SELECT effect_id::text FROM convo.orphaned_applied_effects WHERE conversation_id = $1`, n.conv)
	}
	pending := func() []string {
		return queryAsOwner(t, app, "owner-l", `SELECT effect_id::text FROM convo.stale_pending_effects WHERE conversation_id = $1`, n.conv)
	}
	wantOrphans, wantPending := orphans(), pending()
	if len(wantOrphans) == 0 {
		t.Fatal("the tenant has no orphaned applied charge to follow")
	}
	if err := asOwner(app, "owner-l", `SELECT convo.delete_conversation($1)`, n.conv); err != nil {
		t.Fatal(err)
	}
	requireSlice(t, "orphaned_applied_effects after the deletion", orphans(), wantOrphans)
	requireSlice(t, "stale_pending_effects after the deletion", pending(), wantPending)
	effects := queryRowsAs[string](t, db, `SELECT count(*)::text FROM convo.tool_effects WHERE conversation_id = $1`, n.conv)
	mustExec(t, admin, `SELECT convo.set_deletion_retention('0')`)
	requireEqual(t, "erase_due", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(1))
	requireSlice(t, "the ledger's rows after the erasure",
		queryRowsAs[string](t, db, `SELECT count(*)::text FROM convo.tool_effects WHERE conversation_id = $1`, n.conv), effects)
}

// TestDeletionOutsideTheAPI: a session that writes the deletion itself
// (each actor of asEachActor: the superuser, the owner role, a role granted
// ALL on the tables) is held to delete_conversation's rules: a backdated
// deletion, one moved, and erased_at set by hand are CV005, writing
// nothing; a deletion now is logged, by the caller.
func TestDeletionOutsideTheAPI(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-o", "")
	appendMsg(t, db, conv, "user", textParts("hello"))
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		for _, c := range []struct{ name, sql string }{
			{"a backdated deletion", `UPDATE convo.conversations SET deleted_at = now() - interval '40 days' WHERE id = $1`},
			{"erased_at by hand", `UPDATE convo.conversations SET erased_at = now() WHERE id = $1`},
		} {
			_, err := conn.Exec(context.Background(), c.sql, conv)
			if sqlState(err) != "CV005" {
				t.Errorf("%s: got %v, want CV005", c.name, err)
			}
		}
	})
	requireFingerprint(t, db, "the refused updates", before)
	mustExec(t, db, `UPDATE convo.conversations SET deleted_at = clock_timestamp() WHERE id = $1`, conv)
	changes := readChanges(t, db, conv)
	if len(changes) != 1 || changes[0].Field != "deleted" || str(changes[0].New) != "true" || str(changes[0].By) != "postgres" {
		t.Fatalf("a direct deletion's log: %+v", changes)
	}
	_, err := db.Exec(context.Background(), `UPDATE convo.conversations SET deleted_at = deleted_at - interval '40 days' WHERE id = $1`, conv)
	if sqlState(err) != "CV005" {
		t.Fatalf("a deletion moved back: got %v, want CV005", err)
	}
}

// TestDeletedConversationsExportRestores: the export of a conversation
// deleted and brought back restores (its log's deletion rows are ones the
// API writes); the export of one still deleted does not (CV011, nothing
// written): a restore makes a conversation its owner sees.
func TestDeletedConversationsExportRestores(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	app := loginAs(t, src, "convo_app")
	admin := loginAs(t, src, "convo_admin")
	conv := createConversation(t, src, "owner-x", "")
	appendMsg(t, src, conv, "user", textParts("hello"))
	if err := asOwner(app, "owner-x", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	stillDeleted := queryRow[string](t, admin, `SELECT convo.export_conversation($1)::text`, conv)
	mustExec(t, admin, `SELECT convo.restore_deleted_conversation($1)`, conv)
	restored := queryRow[string](t, admin, `SELECT convo.export_conversation($1)::text`, conv)

	before := fingerprint(t, dst)
	_, err := dst.Exec(context.Background(), `SELECT convo.import_conversation('owner-x', $1::jsonb)`, stillDeleted)
	if sqlState(err) != "CV011" {
		t.Fatalf("restoring a deleted conversation's export: got %v, want CV011", err)
	}
	requireFingerprint(t, dst, "the refused restore", before)
	err = pgx.BeginFunc(context.Background(), dst, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `SELECT convo.import_conversation('owner-x', $1::jsonb)`, restored)
		return err
	})
	if err != nil {
		t.Fatalf("restoring the export of a conversation deleted and brought back: %v", err)
	}
	requireEqual(t, "the restored log's deletions",
		queryRow[string](t, dst, `SELECT string_agg(field || ':' || old_value || '>' || new_value, ',' ORDER BY seq)
		                            FROM convo.conversation_changes WHERE conversation_id = $1`, conv),
		"deleted:false>true,deleted:true>false")
}
