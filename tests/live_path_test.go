package tests

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// segmentRow is one row of convo.live_path (a branch the live path runs
// through, from its first depth to the deepest of it on the path), or of
// the segments walked from the tree that it must equal.
type segmentRow struct {
	BranchID           string
	MinDepth, MaxDepth int32
}

// pathRow3 is a message on a path with its sibling count.
type pathRow3 struct {
	Depth        int32
	MessageID    string
	SiblingCount int32
}

// requireLivePath: the live-path index of conv (what path reads) equals the
// segments walked from the tree to the head (path_segments), and path
// returns exactly the path walked up parent by parent from the head, each
// message with the number of its parent's children.
func requireLivePath(t testing.TB, db *pgxpool.Pool, conv, step string) {
	t.Helper()
	requireSlice(t, step+": live_path rows", collectAs[segmentRow](t, db, `SELECT branch_id::text, min_depth, max_depth
		FROM convo.live_path WHERE conversation_id = $1 ORDER BY min_depth`, conv),
		collectAs[segmentRow](t, db, `SELECT s.branch_id::text, b.depth, s.max_depth FROM convo.conversations c
			CROSS JOIN LATERAL convo_private.path_segments(c.id, c.head_message_id) s
			JOIN convo.messages b ON b.conversation_id = c.id AND b.id = s.branch_id
			WHERE c.id = $1 ORDER BY b.depth`, conv))
	walked := collectAs[pathRow3](t, db, `
		WITH RECURSIVE up AS (
		    SELECT m.id, m.parent_id, m.depth FROM convo.messages m, convo.conversations c
		     WHERE c.id = $1 AND m.conversation_id = c.id AND m.id = c.head_message_id
		    UNION ALL
		    SELECT p.id, p.parent_id, p.depth FROM up JOIN convo.messages p ON p.conversation_id = $1 AND p.id = up.parent_id)
		SELECT up.depth, up.id::text, (SELECT count(*)::int FROM convo.messages s
		                                WHERE s.conversation_id = $1 AND s.parent_id IS NOT DISTINCT FROM up.parent_id)
		  FROM up ORDER BY up.depth`, conv)
	requireSlice(t, step+": path", collectAs[pathRow3](t, db, `SELECT depth, message_id::text, sibling_count FROM convo.path($1)`, conv),
		walked)
}

// collectAs runs query and collects its rows into T's fields by position.
func collectAs[T any](t testing.TB, db *pgxpool.Pool, query string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[T])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
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
	// A non-superuser moves the heads of the owner it sets only.
	if _, err := conn.Exec(t.Context(), `SELECT set_config('convo.owner_id', owner_id, false) FROM convo.conversations WHERE id = $1`, conv); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u2b); err != nil {
		t.Fatal(err)
	}
	requireLivePath(t, db, conv, "a granted role's direct UPDATE")
	_, err := conn.Exec(t.Context(), `UPDATE convo.live_path SET branch_id = $2 WHERE conversation_id = $1 AND min_depth = 0`, conv, u2)
	requireSQLStateIn(t, err, "CV005", "42501")

	// A sibling of a message on the path, inserted without moving the head
	// (as a superuser may, placing it as the tree does: the guard refuses
	// any other place): that message's "< 1/3 >" counts it at once.
	third := newID()
	mustExec(t, db, `INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id,
		                                         branch_reason)
		SELECT $1, $2, $3, 'user', $4, p.depth + 1,
		       (SELECT max(s.sibling_index) + 1 FROM convo.messages s WHERE s.conversation_id = $1 AND s.parent_id = $3), $2,
		       'user_edit'
		  FROM convo.messages p WHERE p.conversation_id = $1 AND p.id = $3`, conv, third, a1, textParts("A third try."))
	requireLivePath(t, db, conv, "a sibling inserted without a head move")
	_, err = db.Exec(t.Context(), `INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
		VALUES ($1, gen_random_uuid(), $2, 'user', $3, 0, 1, gen_random_uuid())`, conv, a1, textParts("Misplaced."))
	requireSQLState(t, err, "CV011")

	requireSlice(t, "path_at the instant before the edit", withoutCounts(readPathAt(t, db, conv, at)), withoutCounts(seen))
	requireSlice(t, "path_at now", readPathAt(t, db, conv, dbNow(t, db)), readPath(t, db, conv))

	// (The granted role makes self_check's privileges check fail: only the
	// live-path check is read here; TestSelfCheckFindsEachBreak has the rest.)
	check := `SELECT ok::text || ': ' || detail FROM convo.self_check() WHERE check_name = 'live_path_index'`
	requireEqual(t, "live_path_index", queryRow[string](t, db, check), "true: every live path is its head's path")
	lost := queryRow[int64](t, db, `SELECT count(*) FROM convo.live_path WHERE conversation_id = $1 AND min_depth > 0`, conv)
	if lost == 0 {
		t.Fatal("the live path has one segment: nothing to lose below the first")
	}
	mustExec(t, db, `DELETE FROM convo.live_path WHERE conversation_id = $1 AND min_depth > 0`, conv)
	requireEqual(t, "live_path_index once rows are lost", queryRow[string](t, db, check),
		fmt.Sprintf("false: conversation %s: %d live_path rows differ from the path to its head", conv, lost))
	mustExec(t, db, `SELECT convo_private.rebuild_live_path($1)`, conv)
	requireEqual(t, "live_path_index after rebuild_live_path", queryRow[string](t, db, check),
		"true: every live path is its head's path")
	requireLivePath(t, db, conv, "rebuilt")
}
