package citus

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestSidebarOnDistributedDatabase pages through an owner's sidebar, whose
// conversations are spread over both workers: every conversation once, in
// order (latest activity first, ties by id), archived ones apart, another
// owner's never, and another owner's page refused.
func TestSidebarOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	ctx := context.Background()
	var want []string // alice's live conversations, latest activity first
	for i := 0; i < 12; i++ {
		owner := map[bool]string{true: "alice", false: "bob"}[i%3 != 0]
		// Alice's conversations alternate between the two workers.
		conv := pgtest.NewID()
		for owner == "alice" && nodeOf(t, n, conv) == len(want)%2 {
			conv = pgtest.NewID()
		}
		err := inOwnerTx(t, app, owner, func(tx pgx.Tx) error {
			one[string](t, tx, `SELECT convo.create_conversation($1, NULL, '{}', $2)`, owner, conv)
			one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, conv, textParts("hi"))
			if i == 4 {
				_, err := tx.Exec(ctx, `SELECT convo.archive_conversation($1)`, conv)
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if owner == "alice" && i != 4 {
			want = append([]string{conv}, want...)
		}
		time.Sleep(2 * time.Millisecond) // distinct activity times, in creation order
	}
	nodes := pgtest.QueryRow[int](t, n.pool, `
		SELECT count(DISTINCT p.groupid)::int FROM convo.conversations c
		  JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('convo.conversations', c.id)
		 WHERE c.owner_id = 'alice'`)
	if nodes != 2 {
		t.Fatalf("alice's conversations are on %d node(s); the test needs both", nodes)
	}
	var got []string
	err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		var before *time.Time
		var beforeID *string
		for page := 0; page < 10; page++ {
			rows, err := tx.Query(ctx, `SELECT conversation_id::text, last_activity_at FROM convo.conversations('alice', 3, $1, false, $2::uuid)`,
				before, beforeID)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				var id string
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					return err
				}
				got = append(got, id)
				before, beforeID = &at, &id
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n < 3 {
				break
			}
		}
		archived := one[int](t, tx, `SELECT count(*)::int FROM convo.conversations('alice', 50, NULL, true)`)
		if archived != 1 {
			t.Errorf("archived conversations: %d, want 1", archived)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(got) != mustJSON(want) {
		t.Fatalf("alice's sidebar, page by page:\n got %v\nwant %v", got, want)
	}
	err = inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT * FROM convo.conversations('bob')`)
		return err
	})
	pgtest.RequireSQLState(t, err, "CV011")
}

// nodeOf is 0 or 1: which of the two workers holds conversation conv.
func nodeOf(t *testing.T, n *node, conv string) int {
	t.Helper()
	return pgtest.QueryRow[int](t, n.pool, `
		SELECT (p.groupid = (SELECT min(groupid) FROM pg_dist_node WHERE groupid <> 0))::int
		  FROM pg_dist_placement p
		 WHERE p.shardid = get_shard_id_for_distribution_column('convo.conversations', $1::uuid)`, conv)
}
