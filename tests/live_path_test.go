package tests

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// livePathRow is one row of convo.live_path, or of the path walked from the
// tree that it must equal.
type livePathRow struct {
	Depth        int32
	MessageID    string
	SiblingCount int32
}

// requireLivePath: the live-path index of conv (what path reads) equals the
// path walked from the tree to the head (path_from), sibling counts
// included, and path returns exactly those messages.
func requireLivePath(t testing.TB, db *pgxpool.Pool, conv, step string) {
	t.Helper()
	read := func(sql string) []livePathRow {
		rows, err := db.Query(t.Context(), sql, conv)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[livePathRow])
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return out
	}
	walked := read(`SELECT p.depth, p.message_id::text, p.sibling_count FROM convo.conversations c,
		convo_private.path_from(c.id, c.head_message_id, NULL) p WHERE c.id = $1 ORDER BY p.depth`)
	requireSlice(t, step+": live_path rows", read(`SELECT depth, message_id::text, sibling_count
		FROM convo.live_path WHERE conversation_id = $1 ORDER BY depth`), walked)
	requireSlice(t, step+": path", read(`SELECT depth, message_id::text, sibling_count FROM convo.path($1)`), walked)
}

// TestLivePathFollowsEveryHeadMove: the live-path index moves with the head
// by every route (append, edit, regenerate, a switch across branches, a
// direct UPDATE by a superuser and by a granted role, a sibling inserted
// without moving the head), path_at still answers for earlier instants, and
// rebuild_live_path repairs an index that self_check finds broken.
func TestLivePathFollowsEveryHeadMove(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	requireLivePath(t, db, conv, "created")
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	u2 := appendMsg(t, db, conv, "user", textParts("Buy it."))
	a2 := appendMsg(t, db, conv, "assistant", textParts("Bought."))
	requireLivePath(t, db, conv, "appended")
	seen := readPath(t, db, conv)
	at := dbNow(t, db)

	u2b := editMsg(t, db, conv, u2, textParts("Buy the other one."))
	requireLivePath(t, db, conv, "edited three turns back")
	a2b := appendMsg(t, db, conv, "assistant", textParts("Bought the other one."))
	regenerateMsg(t, db, conv, a2b, textParts("Bought it, the other one."))
	requireLivePath(t, db, conv, "regenerated")
	moveHead(t, db, conv, a2)
	requireLivePath(t, db, conv, "switched back to the first branch")
	moveHead(t, db, conv, u1)
	requireLivePath(t, db, conv, "switched up to the first user turn")
	moveHead(t, db, conv, a2b)
	requireLivePath(t, db, conv, "switched down to the second branch")

	mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, a1)
	requireLivePath(t, db, conv, "a superuser's direct UPDATE")
	grantee := createGrantedRole(t, db)
	conn := dedicatedConn(t, db)
	if _, err := conn.Exec(t.Context(), `SET ROLE `+pgx.Identifier{grantee}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u2b); err != nil {
		t.Fatal(err)
	}
	requireLivePath(t, db, conv, "a granted role's direct UPDATE")
	_, err := conn.Exec(t.Context(), `UPDATE convo.live_path SET message_id = $2 WHERE conversation_id = $1 AND depth = 3`, conv, u2)
	requireSQLStateIn(t, err, "CV005", "42501")

	// A sibling of a message on the path, inserted without moving the head
	// (as a superuser may): that message's "< 1/3 >" counts it at once.
	mustExec(t, db, `INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
		VALUES ($1, gen_random_uuid(), $2, 'user', $3, 0, 1, gen_random_uuid())`, conv, a1, textParts("A third try."))
	requireLivePath(t, db, conv, "a sibling inserted without a head move")

	requireSlice(t, "path_at the instant before the edit", withoutCounts(readPathAt(t, db, conv, at)), withoutCounts(seen))
	requireSlice(t, "path_at now", readPathAt(t, db, conv, dbNow(t, db)), readPath(t, db, conv))

	// (The granted role makes self_check's privileges check fail: only the
	// live-path check is read here; TestSelfCheckFindsEachBreak has the rest.)
	check := `SELECT ok::text || ': ' || detail FROM convo.self_check() WHERE check_name = 'live_path_index'`
	requireEqual(t, "live_path_index", queryRow[string](t, db, check), "true: every live path is its head's path")
	mustExec(t, db, `DELETE FROM convo.live_path WHERE conversation_id = $1 AND depth > 1`, conv)
	requireEqual(t, "live_path_index once rows are lost", queryRow[string](t, db, check),
		"false: conversation "+conv+": 2 live_path rows differ from the path to its head")
	mustExec(t, db, `SELECT convo_private.rebuild_live_path($1)`, conv)
	requireEqual(t, "live_path_index after rebuild_live_path", queryRow[string](t, db, check),
		"true: every live path is its head's path")
	requireLivePath(t, db, conv, "rebuilt")
}
