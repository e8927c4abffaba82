package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Thin wrappers around the convo.* API that fail the test on error. Ids
// travel as text (uuid::text on the way out, a Go string on the way in);
// "" stands for a NULL id.

// CreateConversation calls convo.create_conversation; systemPrompt "" means
// no system prompt (NULL).
func CreateConversation(t testing.TB, db *pgxpool.Pool, owner, systemPrompt string) string {
	t.Helper()
	return QueryRow[string](t, db, `SELECT convo.create_conversation($1, $2)::text`, owner, Nullable(systemPrompt))
}

// AppendMsg appends a message under the head and returns its id.
func AppendMsg(t testing.TB, db *pgxpool.Pool, conv, role, parts string) string {
	t.Helper()
	return QueryRow[string](t, db, `SELECT convo.append_message($1, $2, $3)::text`, conv, role, parts)
}

// EditMsg calls edit_and_resend on a user message and returns the new id.
func EditMsg(t testing.TB, db *pgxpool.Pool, conv, msg, parts string) string {
	t.Helper()
	return QueryRow[string](t, db, `SELECT convo.edit_and_resend($1, $2, $3)::text`, conv, msg, parts)
}

// RegenerateMsg calls regenerate on an assistant message and returns the new id.
func RegenerateMsg(t testing.TB, db *pgxpool.Pool, conv, msg, parts string) string {
	t.Helper()
	return QueryRow[string](t, db, `SELECT convo.regenerate($1, $2, $3)::text`, conv, msg, parts)
}

// MoveHead calls move_head with the default reason.
func MoveHead(t testing.TB, db *pgxpool.Pool, conv, msg string) {
	t.Helper()
	MustExec(t, db, `SELECT convo.move_head($1, $2)`, conv, msg)
}

// HeadOf returns the conversation's head, "" when it has none.
func HeadOf(t testing.TB, db *pgxpool.Pool, conv string) string {
	t.Helper()
	return QueryRow[string](t, db,
		`SELECT coalesce(head_message_id::text, '') FROM convo.conversations WHERE id = $1`, conv)
}

// HeadMove is one row of convo.head_history.
type HeadMove struct {
	Seq            int64
	HeadMessageID  string
	PreviousHeadID string
	MovedAt        time.Time
	MovedBy        string
	Reason         string
}

// ReadHeadHistory returns convo.head_history(conv), oldest first.
func ReadHeadHistory(t testing.TB, db *pgxpool.Pool, conv string) []HeadMove {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT seq, head_message_id::text, coalesce(previous_head_id::text, ''), moved_at,
		       coalesce(moved_by, ''), reason
		  FROM convo.head_history($1)`, conv)
	if err != nil {
		t.Fatalf("head_history: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HeadMove, error) {
		var m HeadMove
		err := r.Scan(&m.Seq, &m.HeadMessageID, &m.PreviousHeadID, &m.MovedAt, &m.MovedBy, &m.Reason)
		m.MovedAt = m.MovedAt.UTC()
		return m, err
	})
	if err != nil {
		t.Fatalf("reading head_history: %v", err)
	}
	return out
}

// RequireHeadChain fails unless every move's previous_head_id is the head
// of the move before it (the first move's is NULL).
func RequireHeadChain(t testing.TB, moves []HeadMove) {
	t.Helper()
	prev, prevSeq := "", int64(0)
	for i, m := range moves {
		if m.PreviousHeadID != prev {
			t.Fatalf("head_history[%d] (seq %d): previous_head_id %q, want %q (the head before it)", i, m.Seq, m.PreviousHeadID, prev)
		}
		if i > 0 && m.Seq <= prevSeq {
			t.Fatalf("head_history[%d]: seq %d does not follow %d", i, m.Seq, prevSeq)
		}
		prev, prevSeq = m.HeadMessageID, m.Seq
	}
}

// LoginAs creates a LOGIN role that is a member of each of roles (none: a
// role with nothing but PUBLIC's rights) and returns a pool on db's database
// connected as it, the way a deployment connects (GRANT convo_app TO web).
// The role is dropped when the test ends.
func LoginAs(t testing.TB, db *pgxpool.Pool, roles ...string) *pgxpool.Pool {
	t.Helper()
	name := "login_" + strings.ReplaceAll(NewID()[:13], "-", "")
	password := NewID()
	stmt := fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, pgx.Identifier{name}.Sanitize(), password)
	if len(roles) > 0 {
		stmt += " IN ROLE " + strings.Join(roles, ", ")
	}
	MustExec(t, db, stmt)
	u, err := url.Parse(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	pool := NewPool(t, u.String(), pgx.QueryExecModeCacheStatement)
	t.Cleanup(func() {
		pool.Close() // before the role goes: cleanups run last in, first out
		if _, err := db.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	return pool
}

// InOwnerTx runs fn in a transaction that first sets convo.owner_id with
// SET LOCAL, as an application does (owner "" sets nothing); the
// transaction commits only if fn succeeds.
func InOwnerTx(db *pgxpool.Pool, owner string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx := context.Background()
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if owner != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
				return err
			}
		}
		return fn(ctx, tx)
	})
}

// FailingChecks returns "check: detail" for each failing row of self_check,
// one a line.
func FailingChecks(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	return strings.Join(QueryRows[string](t, db,
		`SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok ORDER BY check_name`), "\n")
}
