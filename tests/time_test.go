package tests

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHeadAtAndPathAtBetweenMoves records the database clock between head
// moves (each call and each reading in a transaction of its own) and asks
// head_at and path_at for each instant: they must give the head and the
// path that were live then, and NULL / nothing before the first move.
func TestHeadAtAndPathAtBetweenMoves(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "") // no head until the first append

	type moment struct {
		at   time.Time
		head string
		path []pathRow
	}
	var moments []moment
	record := func() {
		at := dbNow(t, db)
		moments = append(moments, moment{at: at, head: headOf(t, db, conv), path: readPath(t, db, conv)})
	}

	record() // before the first move
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	record()
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	record()
	u1e := editMsg(t, db, conv, u1, textParts("Hello there."))
	record()
	appendMsg(t, db, conv, "assistant", textParts("General Kenobi."))
	record()
	moveHead(t, db, conv, a1)
	record()
	regenerateMsg(t, db, conv, a1, textParts("Hi!"))
	record()
	moveHead(t, db, conv, u1e)
	record()

	requireEqual(t, "head before the first move", moments[0].head, "")
	for i, m := range moments {
		got := queryRow[*string](t, db, `SELECT convo.head_at($1, $2)::text`, conv, m.at)
		gotHead := ""
		if got != nil {
			gotHead = *got
		}
		requireEqual(t, fmt.Sprintf("head_at at moment %d", i), gotHead, m.head)
		requireSlice(t, fmt.Sprintf("path_at at moment %d", i), withoutCounts(readPathAt(t, db, conv, m.at)), withoutCounts(m.path))
	}
	requireEqual(t, "path_at before the first move", len(readPathAt(t, db, conv, moments[0].at)), 0)

	// At the very instant of each move the new head counts; one microsecond
	// earlier the previous one does.
	for _, mv := range readHeadHistory(t, db, conv) {
		at := queryRow[string](t, db, `SELECT coalesce(convo.head_at($1, $2)::text, '')`, conv, mv.MovedAt)
		requireEqual(t, "head_at the move's moved_at", at, mv.HeadMessageID)
		before := queryRow[string](t, db, `SELECT coalesce(convo.head_at($1, $2)::text, '')`, conv, mv.MovedAt.Add(-time.Microsecond))
		requireEqual(t, "head_at just before the move", before, mv.PreviousHeadID)
	}
}

// TestHeadAtBeforeCreation: a conversation created with a system prompt has
// a head from its creation on, and none before.
func TestHeadAtBeforeCreation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	before := dbNow(t, db)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	after := dbNow(t, db)

	requireEqual(t, "head_at before creation", queryRow[*string](t, db, `SELECT convo.head_at($1, $2)::text`, conv, before), (*string)(nil))
	requireEqual(t, "path_at before creation", len(readPathAt(t, db, conv, before)), 0)
	requireEqual(t, "head_at after creation", queryRow[string](t, db, `SELECT convo.head_at($1, $2)::text`, conv, after), headOf(t, db, conv))
	requireSlice(t, "path_at after creation", readPathAt(t, db, conv, after), readPath(t, db, conv))
}

// TestTwoMovesInOneTransaction: two head moves in one transaction give two
// head-log rows, in order, chained by previous_head_id.
func TestTwoMovesInOneTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-1", "You are terse.")
	root := headOf(t, db, conv)
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	logged := len(readHeadHistory(t, db, conv))

	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2, 'first_move', p_moved_by => 'tab-1')`, conv, u1); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2, 'second_move', p_moved_by => 'tab-2')`, conv, root); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	moves := readHeadHistory(t, db, conv)
	requireEqual(t, "head-log rows added", len(moves)-logged, 2)
	first, second := moves[logged], moves[logged+1]
	requireEqual(t, "first move", [4]string{first.PreviousHeadID, first.HeadMessageID, first.Reason, first.MovedBy},
		[4]string{a1, u1, "first_move", "tab-1"})
	requireEqual(t, "second move", [4]string{second.PreviousHeadID, second.HeadMessageID, second.Reason, second.MovedBy},
		[4]string{u1, root, "second_move", "tab-2"})
	if second.Seq <= first.Seq {
		t.Fatalf("seq %d then %d: not increasing", first.Seq, second.Seq)
	}
	if second.MovedAt.Before(first.MovedAt) {
		t.Fatalf("moved_at %v then %v: going back", first.MovedAt, second.MovedAt)
	}
	requireHeadChain(t, moves)
	requireEqual(t, "head", headOf(t, db, conv), root)
}
