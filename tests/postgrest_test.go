package tests

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgREST in SQL (docs/deployment.md, "PostgREST"): an authenticator
// (LOGIN NOINHERIT) switches per request with SET LOCAL ROLE to web_anon or
// web_user (a member of convo_app), and a db-pre-request function names
// pgconvo's owner from the JWT's sub. No PostgREST binary: the test does
// per request what PostgREST does (BEGIN; SET LOCAL ROLE; set_config of
// request.jwt.claims; the pre-request function; the call; COMMIT).

// deploymentRoles are the cluster-wide roles docs/deployment.md creates,
// and web, README's application role, in whose place its blocks run.
var deploymentRoles = []string{"authenticator", "web_anon", "web_user", "web"}

// deploymentSQL returns the ```sql blocks of docs/deployment.md, in order,
// as one psql script with each role of deploymentRoles renamed as names
// says (the roles are cluster-wide and tests run at once), each block behind
// a comment naming its line.
func deploymentSQL(t *testing.T, names map[string]string) string {
	t.Helper()
	text, err := os.ReadFile("../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, _, err := readmeSQLBlocks(string(text))
	if err != nil {
		t.Fatalf("docs/deployment.md: %v", err)
	}
	if len(blocks) == 0 {
		t.Fatal("docs/deployment.md has no ```sql block to run")
	}
	var script strings.Builder
	for _, b := range blocks {
		fmt.Fprintf(&script, "-- docs/deployment.md:%d\n%s\n", b.line, strings.Join(b.sql, "\n"))
	}
	out := script.String()
	for _, role := range deploymentRoles {
		out = regexp.MustCompile(`\b`+role+`\b`).ReplaceAllString(out, names[role])
	}
	return out
}

// roleURL is dbURL connected as role, with no password (the test server
// trusts loopback).
func roleURL(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// TestPostgREST runs docs/deployment.md's sql blocks in one psql session,
// as a login member of convo_app in web's place, and then what PostgREST
// does per request from Go on the roles and pre-request function they made,
// checking each answer: the owner comes from sub, another sub sees CV002, a
// missing sub is refused, the anonymous role and the authenticator itself
// may call nothing, and the owner ends with the request.
func TestPostgREST(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	mustExec(t, db, readmeRegistration(t))
	web, webURL := loginURL(t, db, "convo_app")
	suffix := strings.TrimPrefix(web, "login_")
	names := map[string]string{"web": web}
	for _, role := range deploymentRoles[:3] {
		names[role] = role + "_" + suffix
	}
	auth, anon, user := names["authenticator"], names["web_anon"], names["web_user"]
	t.Cleanup(func() {
		// psql has exited, but its backends may still be ending.
		for i := 0; i < 100 && queryRow[bool](t, db, `SELECT count(*) > 0 FROM pg_stat_activity WHERE usename IN ($1, $2)`, auth, web); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		for _, role := range []string{auth, anon, user} {
			for _, st := range []string{`DROP OWNED BY ` + pgx.Identifier{role}.Sanitize(), `DROP ROLE ` + pgx.Identifier{role}.Sanitize()} {
				if _, err := db.Exec(context.Background(), st); err != nil {
					t.Errorf("%s: %v", st, err)
				}
			}
		}
	})

	path := filepath.Join(t.TempDir(), "deployment.sql")
	if err := os.WriteFile(path, []byte(deploymentSQL(t, names)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(psqlPath(t), "-X", "-v", "ON_ERROR_STOP=1", "-d", webURL, "-f", path)
	cmd.Env = exampleEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/deployment.md's sql blocks stopped (%v); psql said:\n%s", err, out)
	}
	if strings.Contains(string(out), "ERROR") || strings.Contains(string(out), "warning") {
		t.Fatalf("docs/deployment.md's sql blocks ran with errors or warnings:\n%s", out)
	}
	for _, want := range []string{"NOTICE:  bob: conversation ", "does not exist (CV002)",
		"NOTICE:  no sub: the JWT names no sub, so the request names no owner (28000)",
		"NOTICE:  " + anon + ": permission denied for "} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("docs/deployment.md's session did not say %q:\n%s", want, out)
		}
	}
	requireEqual(t, "the authenticator", queryRow[string](t, db,
		`SELECT rolcanlogin::text || ' ' || rolinherit::text FROM pg_roles WHERE rolname = $1`, auth), "true false")
	requireEqual(t, "web_user is convo_app's", queryRow[bool](t, db, `SELECT pg_has_role($1, 'convo_app', 'USAGE')`, user), true)
	requireEqual(t, "the authenticator may use convo_app's rights", queryRow[bool](t, db,
		`SELECT pg_has_role($1, 'convo_app', 'USAGE')`, auth), false)
	requireEqual(t, "alice's conversation", queryRow[int64](t, db,
		`SELECT count(*) FROM convo.conversations WHERE owner_id = 'alice'`), int64(1))

	// From here on, Go does what PostgREST does, on one authenticator
	// connection, as PostgREST's pool would.
	conn, err := pgx.Connect(ctx, roleURL(t, webURL, auth))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	request := func(role, claims string, call func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+pgx.Identifier{role}.Sanitize()); err != nil {
				return err
			}
			if claims != "" {
				if _, err := tx.Exec(ctx, `SELECT set_config('request.jwt.claims', $1, true)`, claims); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `SELECT postgrest.pre_request()`); err != nil {
				return err
			}
			return call(tx)
		})
	}
	jwt := func(sub string) string {
		if sub == "" {
			return fmt.Sprintf(`{"role": %q}`, user)
		}
		return fmt.Sprintf(`{"sub": %q, "role": %q}`, sub, user)
	}
	pathOf := func(conv string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			var n int
			return tx.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, conv).Scan(&n)
		}
	}

	var conv, effect string
	if err := request(user, jwt("alice"), func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT convo.create_conversation('alice', 'You sell credits.')`).Scan(&conv); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2)`, conv,
			`[{"type": "tool_use", "id": "toolu_p1", "name": "purchase_credits", "input": {"amount_minor": 500, "currency": "EUR"}}]`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT effect_id FROM convo.effect_for_call($1, 'toolu_p1')`, conv).Scan(&effect)
	}); err != nil {
		t.Fatalf("alice's request: %v", err)
	}
	t.Run("the owner is the sub, the caller the role switched to", func(t *testing.T) {
		requireEqual(t, "owner", queryRow[string](t, db, `SELECT owner_id FROM convo.conversations WHERE id = $1`, conv), "alice")
		requireEqual(t, "the effect's actor", queryRow[string](t, db,
			`SELECT actor FROM convo.tool_effect_events WHERE effect_id = $1 AND to_state = 'pending'`, effect), user)
		if err := request(user, jwt("alice"), pathOf(conv)); err != nil {
			t.Fatalf("alice reads her own conversation: %v", err)
		}
	})
	t.Run("another sub sees CV002", func(t *testing.T) {
		requireSQLState(t, request(user, jwt("bob"), pathOf(conv)), "CV002")
		requireSQLState(t, request(user, jwt("bob"), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT convo.create_conversation('alice', 'as bob')`)
			return err
		}), "CV011")
	})
	t.Run("a missing sub is refused", func(t *testing.T) {
		requireSQLState(t, request(user, jwt(""), pathOf(conv)), "28000")
		requireSQLState(t, request(user, `{"sub": "", "role": "web_user"}`, pathOf(conv)), "28000")
		// No claims set in this transaction: the setting reads '' after the
		// requests before it, which the function takes for no claims.
		requireSQLState(t, request(user, "", pathOf(conv)), "28000")
	})
	t.Run("the anonymous role and the authenticator call nothing", func(t *testing.T) {
		requireSQLState(t, request(anon, `{"role": "`+anon+`"}`, pathOf(conv)), "42501")
		requireSQLState(t, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'alice', true)`); err != nil {
				return err
			}
			return pathOf(conv)(tx) // no SET ROLE: the authenticator, NOINHERIT
		}), "42501")
	})
	t.Run("the owner ends with the request", func(t *testing.T) {
		// The same role, no pre-request call: the owner alice's request named is gone.
		requireSQLState(t, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+pgx.Identifier{user}.Sanitize()); err != nil {
				return err
			}
			return pathOf(conv)(tx)
		}), "CV002")
	})
	t.Run("a NOINHERIT member of convo_app has none of its rights", func(t *testing.T) {
		// Supabase's authenticated is NOINHERIT: granting it convo_app is not enough on 15.
		requireNoInheritRefused(t, db, conv)
	})
}

// requireNoInheritRefused: a NOLOGIN NOINHERIT member of convo_app, switched
// to as PostgREST would, may not call the API (42501).
func requireNoInheritRefused(t *testing.T, db *pgxpool.Pool, conv string) {
	t.Helper()
	ctx := context.Background()
	role := "noinherit_" + strings.ReplaceAll(newID()[:13], "-", "")
	mustExec(t, db, fmt.Sprintf(`CREATE ROLE %s NOLOGIN NOINHERIT IN ROLE convo_app`, pgx.Identifier{role}.Sanitize()))
	t.Cleanup(func() { db.Exec(context.Background(), `DROP ROLE `+pgx.Identifier{role}.Sanitize()) })
	conn := dedicatedConn(t, db)
	requireSQLState(t, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+pgx.Identifier{role}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', 'alice', true)`); err != nil {
			return err
		}
		var n int
		return tx.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, conv).Scan(&n)
	}), "42501")
}
