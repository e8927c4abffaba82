package citus

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// erasedPlaces reads the rows per place of an erasure, as "place:n" each.
func erasedPlaces(t *testing.T, db *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	return pgtest.QueryRows[string](t, db, `SELECT place || ':' || rows_redacted FROM (`+sql+`) e ORDER BY place`, args...)
}

// TestErasureOnDistributedDatabase erases one conversation, then an owner,
// as a DBA's login on a distributed database, and compares each answer with
// the same story's on a database of the same cluster left undistributed
// (one server's answers): every copy of the content goes, the shape stays,
// each erasure is recorded, another owner's content stays, and a purchase
// asked again after the erasure is a new request (the key epoch counts the
// erasure).
func TestErasureOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	distributed := erasureStory(t, c, true)
	one := erasureStory(t, c, false)
	if mustJSON(distributed) != mustJSON(one) {
		t.Fatalf("the erasure story:\ndistributed %v\none server  %v", distributed, one)
	}
	if distributed[1] != "conversation_changes:1,conversations:1,messages:5" {
		t.Errorf("erase_conversation of the tree story: %s", distributed[1])
	}
}

// erasureStory runs the erasure story on a new database of c, distributed
// or not, and returns what it saw, one string a step.
func erasureStory(t *testing.T, c *cluster, distributed bool) []string {
	t.Helper()
	n := c.newDatabase(t)
	migrateUp(t, n)
	pgtest.EffRegisterPurchase(t, n.pool, "purchase", "tool_call", "20 seconds")
	if distributed {
		distribute(t, n)
	}
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	ctx := context.Background()
	var saw []string

	first, _ := treeStory(t, app, "alice")
	second, _ := treeStory(t, app, "alice")
	bobs, _ := treeStory(t, app, "bob")
	ledgerStory(t, app, "alice", "purchase")
	receiptStory(t, app, "alice", "purchase")
	saw = append(saw, fmt.Sprint(distributed))
	saw = append(saw, strings.Join(erasedPlaces(t, admin, `SELECT * FROM convo.erase_conversation($1, 'asked to forget')`, first), ","))
	texts := func(owner, conv string) string {
		rows, err := readPath(t, app, owner, conv)
		if err != nil {
			t.Fatal(err)
		}
		return mustJSON(rows)
	}
	saw = append(saw, texts("alice", first))
	saw = append(saw, strings.Join(erasedPlaces(t, admin, `SELECT * FROM convo.erase_owner('alice', 'GDPR request')`), ","))
	saw = append(saw, texts("alice", first), texts("alice", second), texts("bob", bobs))
	saw = append(saw, pgtest.QueryRow[string](t, admin, `
		SELECT (SELECT count(*) FROM convo.erasures WHERE owner_id = 'alice') || ' conversation records, '
		    || (SELECT count(*) FROM convo.owner_erasures WHERE owner_id = 'alice') || ' owner record, '
		    || (SELECT count(*) FROM convo.erasures WHERE owner_id = 'bob') || ' of bob'`))
	err := inOwnerTx(t, app, "alice", func(tx pgx.Tx) error {
		one[string](t, tx, `SELECT convo.append_message($1, 'user', $2)`, second, textParts("buy again"))
		one[string](t, tx, `SELECT convo.append_message($1, 'assistant', $2)`, second,
			pgtest.EffToolUses(pgtest.EffBuy("call-9", "purchase", 500)))
		saw = append(saw, "after the erasure: "+effectFor(t, tx, second, "call-9").Decision)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, `SELECT * FROM convo.erase_owner(NULL, 'why')`)
	saw = append(saw, pgtest.SQLState(err))
	_, err = admin.Exec(ctx, `SELECT * FROM convo.erase_owner('alice', NULL)`)
	saw = append(saw, pgtest.SQLState(err))
	saw[0] = "" // the same story either way
	return saw
}
