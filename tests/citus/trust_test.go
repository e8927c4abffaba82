package citus

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// connectAs connects to n's database as login role name (the cluster
// trusts loopback connections).
func connectAs(t *testing.T, n *node, name string) *pgx.Conn {
	t.Helper()
	u, err := url.Parse(n.url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestTrustOnDistributedDatabase: the rules hold on the workers' shards as
// on one server. Another owner's conversation is not found (CV002) for
// reading and writing; a login role holding every table privilege cannot
// forge or change history (the guards run on the shards: CV005); a session
// that SET ROLEs to another login role works as that role (Citus connects
// to the workers as it), while one that SET ROLEs to convo_app, which
// cannot log in, is refused without harm; and notifications are off on
// every node.
func TestTrustOnDistributedDatabase(t *testing.T) {
	t.Parallel()
	c := needCitus(t)
	n := c.newDatabase(t)
	migrateUp(t, n)
	distribute(t, n)
	ctx := context.Background()
	app := pgtest.LoginAs(t, n.pool, "convo_app")
	conv, first := treeStory(t, app, "alice")

	t.Run("another owner", func(t *testing.T) {
		for _, sql := range []string{
			`SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "mine now"}]')`,
			`SELECT * FROM convo.head_history($1)`,
			`SELECT convo.set_title($1, 'taken')`,
			`SELECT convo.export_conversation($1)`,
		} {
			err := inOwnerTx(t, app, "mallory", func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, sql, conv)
				return err
			})
			if pgtest.SQLState(err) != "CV002" && pgtest.SQLState(err) != "42501" {
				t.Errorf("%s as another owner: %v, want CV002", sql, err)
			}
		}
		requireTreeStory(t, app, "alice", conv, first)
	})

	t.Run("every table privilege", func(t *testing.T) {
		name := "forger_" + strings.ReplaceAll(pgtest.NewID()[:8], "-", "")
		pgtest.MustExec(t, n.pool, `CREATE ROLE `+name+` LOGIN`)
		pgtest.MustExec(t, n.pool, `GRANT USAGE ON SCHEMA convo TO `+name)
		pgtest.MustExec(t, n.pool, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA convo TO `+name)
		t.Cleanup(func() {
			n.pool.Exec(ctx, `DROP OWNED BY `+name) //nolint:errcheck
			n.pool.Exec(ctx, `DROP ROLE `+name)     //nolint:errcheck
		})
		forger := connectAs(t, n, name)
		for _, sql := range []string{
			`UPDATE convo.messages SET parts = '[{"type": "text", "text": "forged"}]' WHERE conversation_id = $1`,
			`DELETE FROM convo.conversation_head_log WHERE conversation_id = $1`,
			`INSERT INTO convo.erasures (owner_id, id, conversation_id, reason) VALUES ('alice', gen_random_uuid(), $1, 'x')`,
		} {
			_, err := forger.Exec(ctx, sql, conv)
			pgtest.RequireSQLState(t, err, "CV005")
		}
		requireTreeStory(t, app, "alice", conv, first)
	})

	t.Run("SET ROLE", func(t *testing.T) {
		suffix := strings.ReplaceAll(pgtest.NewID()[:8], "-", "")
		web, gateway := "web_"+suffix, "gateway_"+suffix
		pgtest.MustExec(t, n.pool, `CREATE ROLE `+web+` LOGIN IN ROLE convo_app`)
		pgtest.MustExec(t, n.pool, `CREATE ROLE `+gateway+` LOGIN IN ROLE `+web)
		pgtest.MustExec(t, n.pool, `GRANT convo_app TO `+gateway)
		t.Cleanup(func() {
			n.pool.Exec(ctx, `DROP ROLE `+gateway) //nolint:errcheck
			n.pool.Exec(ctx, `DROP ROLE `+web)     //nolint:errcheck
		})
		conn := connectAs(t, n, gateway)
		if _, err := conn.Exec(ctx, `SET ROLE `+web); err != nil {
			t.Fatal(err)
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "via a role"}]')`, conv)
			return err
		})
		if err != nil {
			t.Fatalf("append after SET ROLE to a login role: %v", err)
		}
		if rows, err := readPath(t, app, "alice", conv); err != nil || rows[len(rows)-1].Text != "via a role" {
			t.Errorf("the path after the append as %s: %+v, %v", web, rows, err)
		}
		if _, err := conn.Exec(ctx, `SET ROLE convo_app`); err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT count(*) FROM convo.path($1)`, conv)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not permitted to log in") {
			t.Fatalf("a read after SET ROLE convo_app: %v, want a refusal to log in on the worker", err)
		}
		if _, err := conn.Exec(ctx, `RESET ROLE`); err != nil {
			t.Fatalf("the session after the refusal: %v", err)
		}
	})

	t.Run("notifications are off", func(t *testing.T) {
		for _, u := range append([]string{n.url}, c.workerURLs(n)...) {
			pool := pgtest.NewPool(t, u, pgx.QueryExecModeSimpleProtocol)
			if got := pgtest.QueryRow[string](t, pool, `SELECT current_setting('convo.notify', true)`); got != "off" {
				t.Errorf("convo.notify on %s: %q", u, got)
			}
		}
	})
}
