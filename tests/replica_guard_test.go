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

// repairLogin creates the role a DBA might make for repairs, short of a
// superuser: LOGIN, BYPASSRLS, SELECT, INSERT and UPDATE on every table of
// convo, and SET on session_replication_role (PostgreSQL 15), which turns
// off every foreign-key check of its session. It returns a connection as
// it, in replica mode with owner alice set. Roles are cluster-wide: the
// name is random and the role is dropped when the test ends.
func repairLogin(t testing.TB, db *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	name := "repair_" + strings.ReplaceAll(newID()[:13], "-", "")
	ident := pgx.Identifier{name}.Sanitize()
	password := newID()
	mustExec(t, db, fmt.Sprintf(`CREATE ROLE %s LOGIN NOSUPERUSER BYPASSRLS PASSWORD '%s'`, ident, password))
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `DROP OWNED BY `+ident); err != nil {
			t.Errorf("dropping what %s owns: %v", name, err)
		}
		if _, err := db.Exec(ctx, `DROP ROLE `+ident); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	mustExec(t, db, `GRANT USAGE ON SCHEMA convo TO `+ident)
	mustExec(t, db, `GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA convo TO `+ident)
	mustExec(t, db, `GRANT SET ON PARAMETER session_replication_role TO `+ident)
	u, err := url.Parse(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // before the role goes
	for _, st := range []string{`SET session_replication_role = replica`, `SET convo.owner_id = 'alice'`} {
		if _, err := conn.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT current_setting('session_replication_role') = 'replica' AND NOT rolsuper AND rolbypassrls
		FROM pg_roles WHERE rolname = current_user`).Scan(&ok); err != nil || !ok {
		t.Fatalf("the repair session is not a non-superuser in replica mode (err %v)", err)
	}
	return conn
}

// TestReplicaModeKeepsReferencesInTheirConversation: a repair role with
// table privileges, BYPASSRLS and replica mode (which skips every
// foreign-key check) tries to make a row of alice's conversation name a
// message of bob's, of alice's other conversation, or of none: the head,
// a head-log row, a message's parent, a live-path row, a generation's
// prompt, head at its start, answer or import, a new conversation's head.
// Each is refused: the head, a parent and a generation's prompt or head by
// the tree's own rule (CV003 for a message of another conversation the
// session sees, alice's; CV002 for one it does not see, bob's, or none), the
// history tables as forgeries (CV005), a generation's answer or a changed
// import by its state machine (CV006), a new one's import as no row the API
// writes (CV011, as for a message). Nothing is written, alice's path stays, self_check stays
// clean; a repair within the rule (the head to a message of its own
// conversation) still goes through.
func TestReplicaModeKeepsReferencesInTheirConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	trustTools(t, db)
	alice := buildTenant(t, db, "alice")
	bob := buildTenant(t, db, "bob")
	other := createConversation(t, db, "alice", "Another chat.")
	otherMsg := appendMsg(t, db, other, "user", textParts("Elsewhere."))
	conn := repairLogin(t, db)
	pathBefore := pathIDs(t, db, alice.conv)
	before := fingerprint(t, db)

	parentRow := func(parent string) string {
		return fmt.Sprintf(`INSERT INTO convo.messages (conversation_id, id, parent_id, role, parts, depth, sibling_index, branch_id)
			SELECT '%s', gen_random_uuid(), '%s', 'user', '[{"type": "text", "text": "grafted"}]', p.depth + 1, 1, p.branch_id
			  FROM convo.messages p WHERE p.id = '%s'`, alice.conv, parent, parent)
	}
	for _, c := range []struct{ name, sql, code string }{
		{"the head on bob's message", fmt.Sprintf(`UPDATE convo.conversations SET head_message_id = '%s' WHERE id = '%s'`,
			bob.user, alice.conv), "CV002"},
		{"the head on a message of alice's other conversation", fmt.Sprintf(`UPDATE convo.conversations SET head_message_id = '%s'
			WHERE id = '%s'`, otherMsg, alice.conv), "CV003"},
		{"the head on no message", fmt.Sprintf(`UPDATE convo.conversations SET head_message_id = gen_random_uuid() WHERE id = '%s'`,
			alice.conv), "CV002"},
		{"a new conversation born with bob's head", fmt.Sprintf(`INSERT INTO convo.conversations (id, owner_id, head_message_id)
			VALUES (gen_random_uuid(), 'alice', '%s')`, bob.user), "CV005"},
		{"a head-log row naming bob's message", fmt.Sprintf(`INSERT INTO convo.conversation_head_log
			(conversation_id, seq, head_message_id, previous_head_id, reason)
			SELECT '%[1]s', max(seq) + 1, '%[2]s', (SELECT head_message_id FROM convo.conversations WHERE id = '%[1]s'), 'switch'
			  FROM convo.conversation_head_log WHERE conversation_id = '%[1]s'`, alice.conv, bob.user), "CV005"},
		{"a message whose parent is bob's", parentRow(bob.user), "CV002"},
		{"a message whose parent is in alice's other conversation", parentRow(otherMsg), "CV003"},
		{"a live-path row naming bob's branch", fmt.Sprintf(`INSERT INTO convo.live_path (conversation_id, min_depth, branch_id, max_depth)
			VALUES ('%s', 99, '%s', 99)`, alice.conv, bob.user), "CV005"},
		{"a generation prompted by bob's message", fmt.Sprintf(`INSERT INTO convo.generations
			(conversation_id, id, prompt_message_id, head_at_begin, model) VALUES ('%s', gen_random_uuid(), '%s', NULL, 'm')`,
			alice.conv, bob.user), "CV002"},
		{"a generation begun at a head in alice's other conversation", fmt.Sprintf(`INSERT INTO convo.generations
			(conversation_id, id, prompt_message_id, head_at_begin, model) VALUES ('%s', gen_random_uuid(), '%s', '%s', 'm')`,
			alice.conv, alice.user, otherMsg), "CV003"},
		{"a generation passed off as restored, by an import that does not exist", fmt.Sprintf(`INSERT INTO convo.generations
			(conversation_id, id, prompt_message_id, head_at_begin, model, import_id)
			VALUES ('%s', gen_random_uuid(), '%s', NULL, 'm', gen_random_uuid())`, alice.conv, alice.user), "CV011"},
		{"a generation given an import as it ends", fmt.Sprintf(`UPDATE convo.generations
			SET state = 'cancelled', finished_at = clock_timestamp(), import_id = gen_random_uuid() WHERE id = '%s'`,
			alice.gen), "CV006"},
		{"a generation answered by bob's message", fmt.Sprintf(`UPDATE convo.generations
			SET state = 'completed', message_id = '%s', usage = '{}', finished_at = clock_timestamp() WHERE id = '%s'`,
			bob.answer, alice.gen), "CV006"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := conn.Exec(ctx, c.sql)
			requireSQLState(t, err, c.code)
		})
	}
	requireFingerprint(t, db, "the replica-mode repairs", before)
	requireSlice(t, "alice's path", pathIDs(t, db, alice.conv), pathBefore)
	// (privileges fails, naming the repair role's grants: that is its job.)
	requireEqual(t, "failing self checks but privileges", queryRow[string](t, db, `SELECT coalesce(string_agg(check_name, ', '), '')
		FROM convo.self_check() WHERE NOT ok AND check_name <> 'privileges'`), "")

	// Within the rule a repair goes through, logged as a direct update
	// (rolled back: it only shows the guard refuses no more than it must).
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, alice.conv, alice.user); err != nil {
			return err
		}
		var reason string
		if err := tx.QueryRow(ctx, `SELECT reason FROM convo.conversation_head_log WHERE conversation_id = $1
			ORDER BY seq DESC LIMIT 1`, alice.conv).Scan(&reason); err != nil {
			return err
		}
		if reason != "direct_update" {
			return fmt.Errorf("the repair was logged as %q", reason)
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("a repair within the rule: %v", err)
	}
	requireFingerprint(t, db, "the rolled-back repair", before)
}
