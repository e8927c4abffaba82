package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Helpers for the conversation-tree tests: thin wrappers around the
// convo.* API that fail the test on error, readers for path, head_history
// and alternatives, and snapshots that prove a call wrote nothing.
//
// Ids travel as text (uuid::text on the way out, a Go string on the way
// in); "" stands for a NULL id.

// dbNow returns the database's clock_timestamp(), read in a transaction of its own.
func dbNow(t testing.TB, db *pgxpool.Pool) time.Time {
	t.Helper()
	return queryRow[time.Time](t, db, `SELECT clock_timestamp()`)
}

// pathRow is one row of convo.path / convo.path_at; ParentID and
// BranchReason are "" for NULL, Parts is jsonb's text form.
type pathRow struct {
	Depth        int32
	MessageID    string
	ParentID     string
	Role         string
	Parts        string
	BranchReason string
	CreatedAt    time.Time
	SiblingIndex int32
	SiblingCount int32
}

const pathColumns = `depth, message_id::text, coalesce(parent_id::text, ''), role, parts::text,
	coalesce(branch_reason, ''), created_at, sibling_index, sibling_count`

// readPath returns convo.path(conv).
func readPath(t testing.TB, db *pgxpool.Pool, conv string) []pathRow {
	t.Helper()
	return queryPath(t, db, `SELECT `+pathColumns+` FROM convo.path($1)`, conv)
}

// readPathAt returns convo.path_at(conv, at).
func readPathAt(t testing.TB, db *pgxpool.Pool, conv string, at time.Time) []pathRow {
	t.Helper()
	return queryPath(t, db, `SELECT `+pathColumns+` FROM convo.path_at($1, $2)`, conv, at)
}

func queryPath(t testing.TB, db *pgxpool.Pool, sql string, args ...any) []pathRow {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("query %s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pathRow, error) {
		var p pathRow
		err := r.Scan(&p.Depth, &p.MessageID, &p.ParentID, &p.Role, &p.Parts, &p.BranchReason,
			&p.CreatedAt, &p.SiblingIndex, &p.SiblingCount)
		p.CreatedAt = p.CreatedAt.UTC()
		return p, err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", sql, err)
	}
	return out
}

// pathIDs returns the message ids of convo.path(conv), root first.
func pathIDs(t testing.TB, db *pgxpool.Pool, conv string) []string {
	t.Helper()
	return ids(readPath(t, db, conv))
}

// ids returns the message ids of path rows.
func ids(rows []pathRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.MessageID
	}
	return out
}

// withoutCounts blanks SiblingCount, which path_at reports for the tree as
// it is now (later siblings included), so that paths read at different
// times can be compared.
func withoutCounts(rows []pathRow) []pathRow {
	out := make([]pathRow, len(rows))
	for i, r := range rows {
		r.SiblingCount = 0
		out[i] = r
	}
	return out
}

// reasons returns the reasons of head moves, oldest first.
func reasons(moves []headMove) []string {
	out := make([]string, len(moves))
	for i, m := range moves {
		out[i] = m.Reason
	}
	return out
}

// alternative is one row of convo.alternatives.
type alternative struct {
	MessageID    string
	BranchReason string
	CreatedAt    time.Time
	OnHeadPath   bool
	LatestLeafID string
}

// readAlternatives returns convo.alternatives(conv, msg), oldest first.
func readAlternatives(t testing.TB, db *pgxpool.Pool, conv, msg string) []alternative {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT message_id::text, coalesce(branch_reason, ''), created_at, on_head_path,
		       coalesce(latest_leaf_id::text, '')
		  FROM convo.alternatives($1, $2)`, conv, msg)
	if err != nil {
		t.Fatalf("alternatives: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (alternative, error) {
		var a alternative
		err := r.Scan(&a.MessageID, &a.BranchReason, &a.CreatedAt, &a.OnHeadPath, &a.LatestLeafID)
		a.CreatedAt = a.CreatedAt.UTC()
		return a, err
	})
	if err != nil {
		t.Fatalf("reading alternatives: %v", err)
	}
	return out
}

// tableCounts is what a failed call must leave alone: the row count of
// every tree table and the head of every conversation.
type tableCounts struct {
	Conversations, Messages, Parts, HeadLog int64
	Heads                                   string
}

// snapshotCounts reads tableCounts.
func snapshotCounts(t testing.TB, db *pgxpool.Pool) tableCounts {
	t.Helper()
	var c tableCounts
	err := db.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM convo.conversations),
		       (SELECT count(*) FROM convo.messages),
		       (SELECT count(*) FROM convo.message_parts),
		       (SELECT count(*) FROM convo.conversation_head_log),
		       (SELECT coalesce(string_agg(id::text || '=' || coalesce(head_message_id::text, 'none'), ',' ORDER BY id), '')
		          FROM convo.conversations)`).
		Scan(&c.Conversations, &c.Messages, &c.Parts, &c.HeadLog, &c.Heads)
	if err != nil {
		t.Fatalf("snapshotting counts: %v", err)
	}
	return c
}

// requireUnchanged fails if the counts or heads differ from before.
func requireUnchanged(t testing.TB, db *pgxpool.Pool, before tableCounts) {
	t.Helper()
	if after := snapshotCounts(t, db); after != before {
		t.Fatalf("the call wrote something:\n before %+v\n after  %+v", before, after)
	}
}

// rowVersion is one physical row version: its xmin, its ctid and its
// whole content. Equal rowVersions mean the row was not touched.
type rowVersion struct {
	Xmin, Ctid, Row string
}

// rowVersionQueries read every row of a tree table, keyed by its primary
// key.
var rowVersionQueries = map[string]string{
	"convo.messages": `SELECT conversation_id || '/' || id, xmin::text, ctid::text, to_jsonb(t)::text
		FROM convo.messages t`,
	"convo.keyed_parts": `SELECT conversation_id || '/' || message_id || '/' || ordinal, xmin::text, ctid::text, to_jsonb(t)::text
		FROM convo.keyed_parts t`,
	"convo.conversation_head_log": `SELECT conversation_id || '/' || seq, xmin::text, ctid::text, to_jsonb(t)::text
		FROM convo.conversation_head_log t`,
	"convo.conversations": `SELECT id::text, xmin::text, ctid::text, to_jsonb(t)::text
		FROM convo.conversations t`,
}

// rowVersions returns every row version of table (a key of
// rowVersionQueries), keyed by primary key.
func rowVersions(t testing.TB, db *pgxpool.Pool, table string) map[string]rowVersion {
	t.Helper()
	query, ok := rowVersionQueries[table]
	if !ok {
		t.Fatalf("no row-version query for %s", table)
	}
	rows, err := db.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("reading row versions of %s: %v", table, err)
	}
	defer rows.Close()
	out := map[string]rowVersion{}
	for rows.Next() {
		var key string
		var v rowVersion
		if err := rows.Scan(&key, &v.Xmin, &v.Ctid, &v.Row); err != nil {
			t.Fatalf("scanning row versions of %s: %v", table, err)
		}
		out[key] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading row versions of %s: %v", table, err)
	}
	return out
}

// requireRowsKept fails unless every row of before is in after with the
// same xmin, ctid and content, and returns the keys of the rows after has
// in addition (the new rows).
func requireRowsKept(t testing.TB, table string, before, after map[string]rowVersion) []string {
	t.Helper()
	for key, old := range before {
		now, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s: row %s is gone", table, key)
		case now != old:
			t.Errorf("%s: row %s was touched:\n before %+v\n after  %+v", table, key, old, now)
		}
	}
	var added []string
	for key := range after {
		if _, ok := before[key]; !ok {
			added = append(added, key)
		}
	}
	return added
}

// pgError returns err as a *pgconn.PgError, failing the test if it is not one.
func pgError(t testing.TB, err error) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("want a PostgreSQL error, got %v", err)
	}
	return pgErr
}

// requireSlice fails unless got and want have the same elements in order.
func requireSlice[T comparable](t testing.TB, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d elements %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d is %v, want %v\n got  %v\n want %v", what, i, got[i], want[i], got, want)
		}
	}
}

// jsonbSize returns the size in bytes of doc in jsonb's text form, the
// measure every size cap uses.
func jsonbSize(t testing.TB, db *pgxpool.Pool, doc string) int {
	t.Helper()
	return queryRow[int](t, db, `SELECT octet_length($1::jsonb::text)`, doc)
}

// sizedJSON returns build(n) for the n that makes its jsonb text exactly
// target bytes. build must grow by one byte per unit of n (a run of ASCII
// letters in a string, say).
func sizedJSON(t testing.TB, db *pgxpool.Pool, target int, build func(n int) string) string {
	t.Helper()
	const probe = 1000
	n := probe + target - jsonbSize(t, db, build(probe))
	doc := build(n)
	if got := jsonbSize(t, db, doc); got != target {
		t.Fatalf("built a document of %d bytes, want %d", got, target)
	}
	return doc
}

// letters returns n bytes of ASCII text.
func letters(n int) string {
	return strings.Repeat("x", n)
}

// createGrantedRole creates a NOLOGIN, non-superuser role that owns nothing
// but holds ALL on every table of convo (TRIGGER included) and BYPASSRLS:
// the most a DBA can hand out short of superuser or the owner role. It is
// dropped when the test ends.
// Roles are cluster-wide, so the name is random.
func createGrantedRole(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	name := "convo_grantee_" + strings.ReplaceAll(newID()[:13], "-", "")
	ident := pgx.Identifier{name}.Sanitize()
	mustExec(t, db, fmt.Sprintf(`CREATE ROLE %s NOLOGIN NOSUPERUSER NOINHERIT BYPASSRLS`, ident))
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
	mustExec(t, db, `GRANT ALL ON ALL TABLES IN SCHEMA convo TO `+ident)
	return name
}

// dedicatedConn opens a connection of its own to db's database (for
// session settings such as SET ROLE that must not leak into the pool),
// closed when the test ends.
func dedicatedConn(t testing.TB, db *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db.Config().ConnString())
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// asEachActor runs fn once on a dedicated connection for each session that
// must be refused by the append-only and state-machine triggers: a
// superuser (the tests' own role), the owner role convo_owner that owns the
// tables (SET ROLE from the superuser: no login role can become it), the
// same role by SET SESSION AUTHORIZATION (its login and current user both
// the owner, as inside no API function), a non-superuser granted ALL on the
// tables, with BYPASSRLS, who owns nothing, and the superuser with
// session_replication_role = replica (the triggers are ENABLE ALWAYS). Each
// setup is checked before fn runs.
func asEachActor(t *testing.T, db *pgxpool.Pool, grantee string, fn func(t *testing.T, conn *pgx.Conn)) {
	t.Helper()
	ctx := context.Background()
	actors := []struct{ name, setup, check string }{
		{"superuser", ``, `SELECT current_user = session_user AND rolsuper FROM pg_roles WHERE rolname = current_user`},
		{"owner role", `SET ROLE convo_owner`, `SELECT current_user = 'convo_owner' AND NOT rolsuper AND EXISTS (
			     SELECT FROM pg_tables WHERE schemaname = 'convo' AND tableowner = current_user)
			   FROM pg_roles WHERE rolname = current_user`},
		{"granted non-superuser", `SET ROLE ` + pgx.Identifier{grantee}.Sanitize(),
			`SELECT NOT rolsuper AND current_user = '` + grantee + `' AND NOT EXISTS (
			     SELECT FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user))
			   FROM pg_roles WHERE rolname = current_user`},
		{"owner role by session authorization", `SET SESSION AUTHORIZATION convo_owner`,
			`SELECT current_user = 'convo_owner' AND session_user = 'convo_owner' AND current_setting('role') = 'none'`},
		{"replica", `SET session_replication_role = replica`, `SELECT current_setting('session_replication_role') = 'replica'`},
	}
	for _, actor := range actors {
		t.Run(actor.name, func(t *testing.T) {
			conn := dedicatedConn(t, db)
			if actor.setup != "" {
				if _, err := conn.Exec(ctx, actor.setup); err != nil {
					t.Fatalf("%s: %v", actor.setup, err)
				}
			}
			var ok bool
			if err := conn.QueryRow(ctx, actor.check).Scan(&ok); err != nil || !ok {
				t.Fatalf("the session is not set up as %s (err %v)", actor.name, err)
			}
			fn(t, conn)
		})
	}
}
