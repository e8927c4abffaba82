package citus

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// TestAttackEraseOwnedSkipsEraseChecks: erase_owner checks its arguments and
// session once, in erase_receipts on the owner's node (check_erase_owner: a
// reason of at most max_ref_length characters, CV010; READ COMMITTED,
// 0A000), then erases each conversation with erase_owned_delegated, which
// convo_admin may EXECUTE alone: it checks them again (it once checked
// neither, and so recorded an erasure that neither erase_owner nor
// erase_conversation would accept).
func TestAttackEraseOwnedSkipsEraseChecks(t *testing.T) {
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	admin := pgtest.LoginAs(t, n.pool, "convo_admin")
	conv, _ := treeStory(t, app, "carol")
	long := strings.Repeat("x", 5000)

	// The API's answers, the control.
	_, err := admin.Exec(ctx, `SELECT * FROM convo.erase_conversation($1, $2)`, conv, long)
	pgtest.RequireSQLState(t, err, "CV010")
	_, err = admin.Exec(ctx, `SELECT * FROM convo.erase_owner('carol', $1)`, long)
	pgtest.RequireSQLState(t, err, "CV010")

	direct := `SELECT count(*) FROM convo_node.erase_owned_delegated('` + conv + `'::uuid, ARRAY['carol'], ARRAY[$1::text])`
	_, err = admin.Exec(ctx, direct, long)
	if pgtest.SQLState(err) != "CV010" {
		t.Errorf("erase_owned_delegated with a reason of %d characters: %v, want CV010", len(long), err)
	}
	err = pgx.BeginTxFunc(ctx, admin, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, direct, "in a serializable transaction")
		return err
	})
	if pgtest.SQLState(err) != "0A000" {
		t.Errorf("erase_owned_delegated in a SERIALIZABLE transaction: %v, want 0A000 as erase_owner answers", err)
	}
	if got := pgtest.QueryRow[int](t, n.pool, `SELECT count(*)::int FROM convo.erasures WHERE conversation_id = $1`, conv); got != 0 {
		t.Errorf("%d erasures recorded for %s by calls the API refuses", got, conv)
	}
}
