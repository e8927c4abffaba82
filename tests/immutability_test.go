package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestDirectHeadUpdateIsLogged: an UPDATE of the head outside the API, by
// a superuser or a role granted UPDATE (whatever settings it holds), writes
// exactly one head-log row ('direct_update', moved by the caller: the role
// SET ROLE set, else the login role); an UPDATE that leaves the head where
// it is writes none.
func TestDirectHeadUpdateIsLogged(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	conv := createConversation(t, db, "owner-1", "You are terse.")
	u1 := appendMsg(t, db, conv, "user", textParts("Hello."))
	a1 := appendMsg(t, db, conv, "assistant", textParts("Hi."))
	other := createConversation(t, db, "owner-2", "You are verbose.")
	session := queryRow[string](t, db, `SELECT session_user::text`)
	requireEqual(t, "owner of convo.conversations", queryRow[string](t, db,
		`SELECT tableowner::text FROM pg_tables WHERE schemaname = 'convo' AND tablename = 'conversations'`), "convo_owner")

	logged := len(readHeadHistory(t, db, conv))
	mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u1)
	moves := readHeadHistory(t, db, conv)
	requireEqual(t, "head-log rows added by the UPDATE", len(moves)-logged, 1)
	last := moves[len(moves)-1]
	requireEqual(t, "logged move", [4]string{last.PreviousHeadID, last.HeadMessageID, last.Reason, last.MovedBy},
		[4]string{a1, u1, "direct_update", session})
	requireHeadChain(t, moves)

	t.Run("a granted role's UPDATE is direct_update whatever the session's settings say", func(t *testing.T) {
		grantee := createGrantedRole(t, db)
		conn := dedicatedConn(t, db)
		for _, st := range []string{`SET ROLE ` + pgx.Identifier{grantee}.Sanitize(),
			`SET convo.head_reason = 'create'`, `SET convo.head_moved_by = 'alice'`,
			`SET convo.owner_id = 'owner-1'`} { // a non-superuser writes for the owner it sets

			if _, err := conn.Exec(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		logged := len(readHeadHistory(t, db, conv))
		if _, err := conn.Exec(ctx, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, a1); err != nil {
			t.Fatal(err)
		}
		moves := readHeadHistory(t, db, conv)
		requireEqual(t, "rows added", len(moves)-logged, 1)
		last := moves[len(moves)-1]
		requireEqual(t, "logged move", [3]string{last.HeadMessageID, last.Reason, last.MovedBy}, [3]string{a1, "direct_update", grantee})
		mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u1)
	})

	t.Run("an UPDATE that keeps the head writes nothing", func(t *testing.T) {
		before := snapshotCounts(t, db)
		mustExec(t, db, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u1)
		mustExec(t, db, `UPDATE convo.conversations SET head_message_id = head_message_id`)
		requireUnchanged(t, db, before)
		// Metadata changes only by erasure, not even a superuser's UPDATE.
		_, err := db.Exec(ctx, `UPDATE convo.conversations SET metadata = '{"note": "x"}' WHERE id = $1`, conv)
		requireSQLState(t, err, "CV005")
		requireUnchanged(t, db, before)
	})

	t.Run("a direct UPDATE after an API move in the same transaction is logged as direct_update", func(t *testing.T) {
		logged := len(readHeadHistory(t, db, conv))
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT convo.move_head($1, $2, p_moved_by => 'tab-1')`, conv, a1); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, u1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		moves := readHeadHistory(t, db, conv)
		requireEqual(t, "rows added", len(moves)-logged, 2)
		api, direct := moves[logged], moves[logged+1]
		requireEqual(t, "API move", [3]string{api.HeadMessageID, api.Reason, api.MovedBy}, [3]string{a1, "switch", "tab-1"})
		requireEqual(t, "direct move", [3]string{direct.HeadMessageID, direct.Reason, direct.MovedBy}, [3]string{u1, "direct_update", session})
	})

	t.Run("the head names a message of its own conversation, and is never unset", func(t *testing.T) {
		before := snapshotCounts(t, db)
		_, err := db.Exec(ctx, `UPDATE convo.conversations SET head_message_id = $2 WHERE id = $1`, conv, headOf(t, db, other))
		requireSQLState(t, err, "CV003") // conversations_12_head_guard, before the foreign key (which replica mode skips)
		_, err = db.Exec(ctx, `UPDATE convo.conversations SET head_message_id = NULL WHERE id = $1`, conv)
		requireSQLState(t, err, "CV011")
		requireUnchanged(t, db, before)
	})
}

// TestAppendOnlyTablesRefuseChanges: UPDATE, DELETE and TRUNCATE on
// messages, keyed_parts and conversation_head_log raise CV005 (a plain
// TRUNCATE of a table that foreign keys reference: 0A000) for a
// superuser, the owner role, a non-superuser granted ALL on the tables, and
// a superuser session with session_replication_role = replica (the triggers
// are ENABLE ALWAYS); DELETE and TRUNCATE on conversations too.
// Each statement runs in autocommit, so a change the triggers let through
// would stay; afterwards every row is as it was.
func TestAppendOnlyTablesRefuseChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	s := buildStory(t, db)
	editMsg(t, db, s.conv, s.u3, textParts("When does it arrive?"))
	grantee := createGrantedRole(t, db)
	requireCount(t, db, 4, `SELECT count(*) FROM pg_tables WHERE schemaname = 'convo'
		AND tablename IN ('conversations', 'messages', 'keyed_parts', 'conversation_head_log') AND tableowner = 'convo_owner'`)

	tables := []string{"convo.conversations", "convo.messages", "convo.keyed_parts", "convo.conversation_head_log"}
	before := map[string]map[string]rowVersion{}
	for _, table := range tables {
		before[table] = rowVersions(t, db, table)
		if len(before[table]) == 0 {
			t.Fatalf("%s is empty: nothing to protect", table)
		}
	}

	// PostgreSQL refuses a plain TRUNCATE of a table that foreign keys point
	// at (messages, conversations, keyed_parts) with 0A000 before any trigger runs; with
	// CASCADE the CV005 triggers are reached. Either way nothing goes. The
	// view message_parts (the parts as rows) refuses every write.
	statements := []struct{ name, sql, code string }{
		{"UPDATE messages", `UPDATE convo.messages SET role = 'user' WHERE role = 'assistant'`, "CV005"},
		{"DELETE messages", `DELETE FROM convo.messages`, "CV005"},
		{"TRUNCATE messages", `TRUNCATE convo.messages`, "0A000"},
		{"TRUNCATE messages CASCADE", `TRUNCATE convo.messages CASCADE`, "CV005"},
		{"UPDATE keyed_parts", `UPDATE convo.keyed_parts SET tool_name = 'forged' WHERE type = 'tool_use'`, "CV005"},
		{"DELETE keyed_parts", `DELETE FROM convo.keyed_parts`, "CV005"},
		{"TRUNCATE keyed_parts", `TRUNCATE convo.keyed_parts`, "0A000"}, // tool_effect_calls references it
		{"TRUNCATE keyed_parts CASCADE", `TRUNCATE convo.keyed_parts CASCADE`, "CV005"},
		{"UPDATE conversation_head_log", `UPDATE convo.conversation_head_log SET moved_by = 'forger'`, "CV005"},
		{"DELETE conversation_head_log", `DELETE FROM convo.conversation_head_log`, "CV005"},
		{"TRUNCATE conversation_head_log", `TRUNCATE convo.conversation_head_log`, "CV005"},
		{"DELETE conversations", `DELETE FROM convo.conversations`, "CV005"},
		{"TRUNCATE conversations", `TRUNCATE convo.conversations`, "0A000"},
		{"TRUNCATE conversations CASCADE", `TRUNCATE convo.conversations CASCADE`, "CV005"},
	}
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		for _, st := range statements {
			t.Run(st.name, func(t *testing.T) {
				_, err := conn.Exec(ctx, st.sql) // autocommit: nothing rolls a slip back
				requireSQLState(t, err, st.code)
			})
		}
	})
	for _, table := range tables {
		after := rowVersions(t, db, table)
		if added := requireRowsKept(t, table, before[table], after); len(added) > 0 {
			t.Errorf("%s: rows added: %v", table, added)
		}
	}
}

// TestDirectlyInsertedConversationsAreWhatTheAPIWrites: a conversation
// inserted outside pgconvo's code, by each actor (a superuser, the owner
// role either way, a granted role, replica mode), is refused when it holds
// what create_conversation never writes: a head, a title or an archive state
// that no log records, a creation or last activity not now (which would
// misplace it in the sidebar), or metadata over the cap; nothing is written.
// The same insert with the defaults is taken.
func TestDirectlyInsertedConversationsAreWhatTheAPIWrites(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	s := buildStory(t, db)
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	big := `jsonb_build_object('blob', repeat('x', 300000))` // the cap is 256 KiB
	bad := []struct{ name, columns, values, code string }{
		{"a head", "head_message_id", fmt.Sprintf("'%s'", s.u3), "CV005"},
		{"a title", "title", "'never logged'", "CV005"},
		{"archived", "archived", "true", "CV005"},
		{"created in 2001", "created_at", "'2001-01-01'", "CV005"},
		{"last active in 2999", "last_activity_at", "'2999-01-01'", "CV005"},
		{"last active before it was created", "last_activity_at", "now() - interval '1 day'", "CV005"},
		{"metadata over the cap", "metadata", big, "CV010"},
	}
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		// A non-superuser creates conversations for the owner it sets only.
		if _, err := conn.Exec(ctx, `SET convo.owner_id = 'alice'`); err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Run(b.name, func(t *testing.T) {
				_, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO convo.conversations (id, owner_id, %s)
					VALUES (gen_random_uuid(), 'alice', %s)`, b.columns, b.values)) // autocommit
				requireSQLState(t, err, b.code)
			})
		}
		t.Run("the defaults", func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `INSERT INTO convo.conversations (id, owner_id, metadata)
				VALUES (gen_random_uuid(), 'alice', '{"source": "repair"}')`); err != nil {
				t.Fatalf("a conversation as create_conversation writes it: %v", err)
			}
		})
	})
	requireFingerprint(t, db, "the refused inserts", before)
}
