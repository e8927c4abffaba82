package tests

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the trust tests (trust_test.go): login roles that are members
// of the contract's roles, transactions that set the owner, a fingerprint of
// every table, and a tenant with one of everything an owner can have.

// asOwner runs sql, reading every row, in a transaction that sets the owner
// first (inOwnerTx), and returns its error.
func asOwner(db *pgxpool.Pool, owner, sql string, args ...any) error {
	return inOwnerTx(db, owner, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		return rows.Err()
	})
}

// queryAsOwner runs query (one text column) in a transaction that sets the
// owner first, and returns the values.
func queryAsOwner(t testing.TB, db *pgxpool.Pool, owner, query string, args ...any) []string {
	t.Helper()
	var out []string
	err := inOwnerTx(db, owner, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatalf("as owner %q: %s: %v", owner, query, err)
	}
	return out
}

// fingerprint is every row version (xmin, ctid, content) of every table in
// pgconvo's schemas, found from the catalog, one digest a table: any row
// written, touched or removed changes it.
func fingerprint(t testing.TB, db *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	tables := queryRowsAs[string](t, db, `
		SELECT c.oid::regclass::text FROM pg_class c
		 WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND c.relkind IN ('r', 'p')
		 ORDER BY 1`)
	out := map[string]string{}
	for _, table := range tables {
		var digest string
		err := db.QueryRow(ctx, `SELECT count(*) || ':' || md5(coalesce(string_agg(xmin::text || ctid::text || t::text, E'\n'
			ORDER BY ctid), '')) FROM `+table+` t`).Scan(&digest)
		if err != nil {
			t.Fatalf("fingerprinting %s: %v", table, err)
		}
		out[table] = digest
	}
	return out
}

// requireFingerprint fails if any table differs from before.
func requireFingerprint(t testing.TB, db *pgxpool.Pool, what string, before map[string]string) {
	t.Helper()
	after := fingerprint(t, db)
	for table, b := range before {
		if after[table] != b {
			t.Errorf("%s changed %s (rows:digest %s, now %s)", what, table, b, after[table])
		}
	}
}

// tenant is one owner's data, one of everything: a conversation whose first
// user message was edited, so that an applied charge sits orphaned on the
// old branch and its re-run awaits confirmation on the new one; a
// generation streaming; a receipt filled and pending.
type tenant struct {
	owner, conv, root, user, edited, answer, gen string
	applied, awaiting, receipt, callID           string
}

// buildTenant writes a tenant for owner through db (a superuser pool), with
// the tools trustTools registered.
func buildTenant(t testing.TB, db *pgxpool.Pool, owner string) tenant {
	t.Helper()
	n := tenant{owner: owner, callID: owner + "_call1"}
	n.conv = createConversation(t, db, owner, "You sell credits to "+owner+".")
	n.root = headOf(t, db, n.conv)
	n.user = appendMsg(t, db, n.conv, "user", textParts("Buy me 500 credits."))
	n.answer = appendMsg(t, db, n.conv, "assistant", effToolUses(effBuy(n.callID, "buy", 500)))
	n.applied = effForCall(t, db, n.conv, n.callID).EffectID
	effSettle(t, db, n.conv, n.applied, "ch_"+owner)
	appendMsg(t, db, n.conv, "tool", effToolResults(n.callID))
	n.edited = editMsg(t, db, n.conv, n.user, textParts("Buy me 700 credits."))
	appendMsg(t, db, n.conv, "assistant", effToolUses(effBuy(owner+"_call2", "buy", 700)))
	n.awaiting = effForCall(t, db, n.conv, owner+"_call2").EffectID
	n.gen = beginGeneration(t, db, n.conv, n.edited, "model-1")
	n.receipt = beginReceipt(t, db, owner, "follow-"+owner+"-0001", "file_followup", `{"ticket": 1}`).ID
	fillReceipt(t, db, n.receipt, `{"ticket": 1}`, `{}`)
	return n
}

// trustTools registers the tools buildTenant uses: buy (effectful, scope
// tool_call, so a re-run on another branch awaits confirmation) and
// file_followup (for receipts).
func trustTools(t testing.TB, db *pgxpool.Pool) {
	t.Helper()
	effRegisterPurchase(t, db, "buy", "tool_call", "1 hour")
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
}
