package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestMigration0052RebuildsAnIndexWithABranchTwice: going up to 0052 on a
// database at 0051 whose live-path index names a branch on two rows (a
// write past the guards) rebuilds that conversation's index from the tree
// before adding the constraint, leaves the others' rows as they were, and
// self_check is clean; down and up again too.
func TestMigration0052RebuildsAnIndexWithABranchTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	if err := m.Goto(ctx, 51); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	damaged := createConversation(t, pool, "owner-m", "You help.")
	question := appendMsg(t, pool, damaged, "user", textParts("hello"))
	appendMsg(t, pool, damaged, "assistant", textParts("hi"))
	editMsg(t, pool, damaged, question, textParts("hello again"))
	head := headOf(t, pool, damaged)
	mustExec(t, pool, `INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth) VALUES ($1, 5, $2, 6)`,
		damaged, head)
	healthy := createConversation(t, pool, "owner-m", "You help.")
	appendMsg(t, pool, healthy, "user", textParts("hello"))
	rows := `SELECT string_agg(min_depth || ':' || branch_id || ':' || max_depth, ',' ORDER BY min_depth)
	           FROM convo.live_path WHERE conversation_id = $1`
	healthyBefore := queryRow[string](t, pool, rows, healthy)
	if got := failingChecks(t, pool); got == "" {
		t.Fatalf("self_check does not see the branch on two rows before the upgrade")
	}

	for _, step := range []uint{52, 51, 52} {
		if err := m.Goto(ctx, step); err != nil {
			t.Fatalf("to version %d: %v", step, err)
		}
	}
	requireEqual(t, "self_check failures after the upgrade", failingChecks(t, pool), "")
	requireEqual(t, "the damaged conversation's rows naming its head's branch",
		queryRow[int64](t, pool, `SELECT count(*) FROM convo.live_path WHERE conversation_id = $1 AND branch_id = $2`, damaged, head), 1)
	requireEqual(t, "the healthy conversation's rows", queryRow[string](t, pool, rows, healthy), healthyBefore)
	_, err := pool.Exec(ctx, `INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth) VALUES ($1, 5, $2, 6)`,
		damaged, head)
	requireSQLStateIn(t, err, "23505")
}
