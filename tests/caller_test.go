package tests

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of who the caller is: the role SET ROLE set, else the login role,
// for every owner check and every who-column; and of the owner check coming
// before any lock, so another owner's lock never delays or times a call.

// newRole creates a role with the given attributes (LOGIN, NOINHERIT, ...)
// that is a member of each of roles, dropped when the test ends, and returns
// its name and, for a LOGIN role, a pool connected as it.
func newRole(t testing.TB, db *pgxpool.Pool, attrs string, roles ...string) (string, *pgxpool.Pool) {
	t.Helper()
	name := "role_" + strings.ReplaceAll(newID()[:13], "-", "")
	password := newID()
	stmt := fmt.Sprintf(`CREATE ROLE %s %s PASSWORD '%s'`, pgx.Identifier{name}.Sanitize(), attrs, password)
	if len(roles) > 0 {
		stmt += " IN ROLE " + strings.Join(roles, ", ")
	}
	mustExec(t, db, stmt)
	t.Cleanup(func() {
		if _, err := db.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	if !strings.Contains(attrs, "LOGIN") || strings.Contains(attrs, "NOLOGIN") {
		return name, nil
	}
	u, err := url.Parse(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	pool := newPool(t, u.String(), pgx.QueryExecModeCacheStatement)
	t.Cleanup(pool.Close) // runs before the DROP ROLE above: last in, first out
	return name, pool
}

// asRoleAndOwner runs fn in a transaction that switches to role with SET
// LOCAL ROLE (none: stays the login role) and names owner, and returns fn's
// error.
func asRoleAndOwner(db *pgxpool.Pool, role, owner string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return inOwnerTx(db, owner, func(ctx context.Context, tx pgx.Tx) error {
		if role != "" {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+pgx.Identifier{role}.Sanitize()); err != nil {
				return err
			}
		}
		return fn(ctx, tx)
	})
}

// execAs runs sql (reading every row) as asRoleAndOwner does.
func execAs(db *pgxpool.Pool, role, owner, sql string, args ...any) error {
	return asRoleAndOwner(db, role, owner, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		return rows.Err()
	})
}

// TestCallerIsTheRoleSetBySetRole: a session that switches to an
// application role with SET LOCAL ROLE has that role's rights only, whatever
// its login may do, and is recorded as it: an INHERIT login member of
// convo_reader, a NOINHERIT authenticator (PostgREST's pattern) and a
// superuser's SET ROLE all see only the owner they name, and the
// who-columns (a settlement's actor, a direct head update's mover, an
// erasure's and a registration's author) name the role set.
func TestCallerIsTheRoleSetBySetRole(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	app, _ := newRole(t, db, "NOLOGIN", "convo_app")           // the role a request runs as
	_, support := newRole(t, db, "LOGIN", "convo_reader", app) // support staff who may also act as the app
	_, authenticator := newRole(t, db, "LOGIN NOINHERIT", app) // PostgREST's authenticator
	superuser := db                                            // the tests' own login is a superuser
	reads := map[string]string{
		"path":                     `SELECT count(*) FROM convo.path($1)`,
		"export_conversation":      `SELECT convo.export_conversation($1)`,
		"orphaned_applied_effects": `SELECT 1/count(*) FROM convo.orphaned_applied_effects WHERE conversation_id = $1`,
	}
	before := fingerprint(t, db)
	for name, login := range map[string]*pgxpool.Pool{"reader login": support, "authenticator": authenticator, "superuser": superuser} {
		t.Run(name, func(t *testing.T) {
			// As the application role, naming alice: bob's conversation is not there.
			for what, sql := range reads {
				err := execAs(login, app, "alice", sql, bob.conv)
				if what == "orphaned_applied_effects" {
					requireSQLState(t, err, "22012") // no row: 1/0
				} else {
					requireSQLState(t, err, "CV002")
				}
				if err := execAs(login, app, "alice", sql, alice.conv); err != nil {
					t.Fatalf("%s of alice's as the app role: %v", what, err)
				}
			}
			requireSQLState(t, execAs(login, app, "alice", `SELECT convo.append_message($1, 'user', $2)`,
				bob.conv, textParts("forged")), "CV002")
			requireSQLState(t, execAs(login, app, "alice", `SELECT convo.create_conversation('bob')`), "CV011")
			requireSQLState(t, execAs(login, app, "", `SELECT * FROM convo.self_check()`), "42501")
			requireSQLState(t, execAs(login, app, "", `SELECT * FROM convo.erase_conversation($1, 'x')`, bob.conv), "42501")
		})
	}
	requireFingerprint(t, db, "the calls as the app role", before)

	// Without SET ROLE the reader login reads every owner, as before.
	if err := execAs(support, "", "", reads["path"], bob.conv); err != nil {
		t.Fatalf("the reader login without SET ROLE: %v", err)
	}

	// The who-columns name the role set, not the login.
	t.Run("who-columns", func(t *testing.T) {
		mustExec(t, db, `SELECT convo.confirm_effect($1, $2, 'ops')`, alice.conv, alice.awaiting)
		if err := execAs(authenticator, app, "alice", `SELECT convo.settle_effect($1, $2, 'applied', 'ch_2')`,
			alice.conv, alice.awaiting); err != nil {
			t.Fatal(err)
		}
		requireEqual(t, "the settlement's actor", queryRow[string](t, db, `SELECT actor FROM convo.tool_effect_events
			WHERE conversation_id = $1 AND effect_id = $2 AND to_state = 'applied'`, alice.conv, alice.awaiting), app)

		dba, _ := newRole(t, db, "NOLOGIN SUPERUSER")
		if err := execAs(superuser, dba, "", `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`,
			bob.conv, bob.root); err != nil {
			t.Fatal(err)
		}
		requireEqual(t, "a direct update's mover", queryRow[string](t, db, `SELECT moved_by || ' ' || reason FROM convo.conversation_head_log
			WHERE conversation_id = $1 ORDER BY seq DESC LIMIT 1`, bob.conv), dba+" direct_update")

		admin, _ := newRole(t, db, "NOLOGIN", "convo_admin")
		beforeSwitch := fingerprint(t, db)
		requireSQLState(t, execAs(authenticator, admin, "", `SELECT * FROM convo.erase_conversation($1, 'asked')`, bob.conv), "42501")
		requireFingerprint(t, db, "a refused role switch", beforeSwitch)
		if err := execAs(superuser, admin, "", `SELECT * FROM convo.erase_conversation($1, 'asked')`, bob.conv); err != nil {
			t.Fatal(err)
		}
		if err := execAs(superuser, admin, "", `SELECT convo.register_tool('lookup_set_role', false, '{}')`); err != nil {
			t.Fatal(err)
		}
		requireEqual(t, "the erasure's author", queryRow[string](t, db,
			`SELECT erased_by FROM convo.erasures WHERE conversation_id = $1`, bob.conv), admin)
		requireEqual(t, "the registration's author", queryRow[string](t, db,
			`SELECT registered_by FROM convo.tools WHERE name = 'lookup_set_role'`), admin)
	})
}

// TestNoLockBeforeTheOwnerCheck: while bob's conversation and receipt are
// locked by bob's own open transaction, alice's calls naming them answer at
// once (CV002, or CV009 for a new conversation with bob's id) instead of
// waiting behind bob's lock: a row the caller cannot see is never locked.
func TestNoLockBeforeTheOwnerCheck(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	trustTools(t, db)
	bob := buildTenant(t, db, "bob")
	web := loginAs(t, db, "convo_app")
	ctx := context.Background()

	// Bob's transaction holds the conversation's and the receipt's row locks.
	holder, err := web.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	for _, st := range []string{`SET LOCAL convo.owner_id = 'bob'`,
		`SELECT convo.append_message('` + bob.conv + `', 'user', '` + textParts("held") + `')`,
		`SELECT convo.apply_receipt('` + bob.receipt + `', 'fu_held')`} {
		if _, err := holder.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	before := fingerprint(t, db)
	calls := []struct {
		name, sql string
		args      []any
		code      string
	}{
		{"append_message", `SELECT convo.append_message($1, 'user', $2)`, []any{bob.conv, textParts("x")}, "CV002"},
		{"move_head", `SELECT convo.move_head($1, $2)`, []any{bob.conv, bob.root}, "CV002"},
		{"settle_effect", `SELECT convo.settle_effect($1, $2, 'failed', p_error_code => 'x')`, []any{bob.conv, bob.applied}, "CV002"},
		{"erase_conversation", `SELECT * FROM convo.erase_conversation($1, 'x')`, []any{bob.conv}, "42501"},
		{"apply_receipt", `SELECT convo.apply_receipt($1, 'fu_1')`, []any{bob.receipt}, "CV002"},
		{"fail_receipt", `SELECT convo.fail_receipt($1, 500, 'boom')`, []any{bob.receipt}, "CV002"},
		{"create_conversation with bob's id", `SELECT convo.create_conversation('alice', p_conversation_id => $1)`,
			[]any{bob.conv}, "CV009"},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			// A wait behind bob's lock would end in 55P03, not the SQLSTATE wanted.
			err := inOwnerTx(web, "alice", func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, c.sql, c.args...)
				return err
			})
			requireSQLState(t, err, c.code)
		})
	}
	requireFingerprint(t, db, "alice's calls", before)
}
