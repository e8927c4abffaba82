package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PgBouncer in transaction mode (docs/deployment.md, "Poolers"): a client
// holds a server connection for one transaction only, so whatever a
// transaction names with SET LOCAL is its own, while a session's SET stays
// on the server connection for the next client, and LISTEN stays with a
// server connection that other clients' transactions run on, as does a
// statement prepared under a name. These tests run Debian's pgbouncer
// (apt-get install pgbouncer; .ci/run installs it) in front of the test
// server with docs/deployment.md's pgbouncer.ini, but one server connection
// per user and database, so that every client of a user shares one.

// bouncer is a pgbouncer running in front of the test server.
type bouncer struct {
	port int
	log  *lockedBuffer
}

// lockedBuffer is pgbouncer's log, written by its process and read by the
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pgbouncerPath finds the pgbouncer program; without it the test skips
// with one line, or fails when CI is set.
func pgbouncerPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
		if isExecutable(p) {
			return p
		}
	}
	missingTool(t, "pgbouncer is not installed (apt-get install pgbouncer)")
	return ""
}

// bouncerUser is the OS account pgbouncer runs as: nil when the test is not
// root, else postgres (or nobody), since pgbouncer refuses to run as root,
// as internal/localpg does for the server.
func bouncerUser(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("reading uid and gid of OS user %s: %q, %q", name, u.Uid, u.Gid)
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	t.Fatal("running as root, and neither OS user postgres nor nobody exists to run pgbouncer as")
	return nil
}

// userlistQuery is docs/deployment.md's query for the lines of PgBouncer's
// userlist.txt: "user" "secret", the secret as PostgreSQL stores it
// (SCRAM-SHA-256$...), which only a superuser may read from pg_authid.
const userlistQuery = `SELECT format('"%s" "%s"', rolname, rolpassword) FROM pg_authid WHERE rolname = ANY ($1) ORDER BY rolname`

// testIniSettings are the settings of the test's pgbouncer.ini that differ
// from docs/deployment.md's, which it takes for everything else: a free
// port, its own userlist, one server connection per user and database (so
// that every client of a user shares one, and whatever one run leaves on it
// meets the next), and running in the foreground, logging to stderr.
func testIniSettings(port int, authFile string) map[string]string {
	return map[string]string{
		"listen_port":       strconv.Itoa(port),
		"auth_file":         authFile,
		"default_pool_size": "1",
		"logfile":           "",
		"pidfile":           "",
		"unix_socket_dir":   "",
	}
}

// docsIni returns docs/deployment.md's pgbouncer.ini (its ```ini block that
// sets pool_mode) with databases, every database of the server at host and
// port, in place of its [databases], and settings in place of its own.
func docsIni(t *testing.T, host, port string, settings map[string]string) string {
	t.Helper()
	text, err := os.ReadFile("../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(text), "```ini\n")[1:] {
		if b, _, _ := strings.Cut(part, "```"); strings.Contains(b, "pool_mode") {
			block = b
			break
		}
	}
	if block == "" {
		t.Fatal("docs/deployment.md has no ```ini block setting pool_mode (PgBouncer's pgbouncer.ini)")
	}
	var out strings.Builder
	section := ""
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		key, _, isSetting := strings.Cut(line, "=")
		_, replaced := settings[strings.TrimSpace(key)]
		switch {
		case strings.HasPrefix(line, "["):
			section = strings.TrimSpace(line)
			out.WriteString(line + "\n")
			if section == "[databases]" {
				fmt.Fprintf(&out, "* = host=%s port=%s\n", host, port)
			}
			if section == "[pgbouncer]" {
				for _, k := range slices.Sorted(maps.Keys(settings)) {
					fmt.Fprintf(&out, "%s = %s\n", k, settings[k])
				}
			}
		case isSetting && (section == "[databases]" || section == "[pgbouncer]" && replaced):
			// the test's own, written above
		default:
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// startBouncer starts pgbouncer in front of the test server with
// docs/deployment.md's pgbouncer.ini (pool_mode = transaction, auth_type =
// scram-sha-256) but for testIniSettings, letting in users with the
// userlist.txt the docs say how to write (their SCRAM secrets, read from
// pg_authid through db), and stops it when the test ends.
func startBouncer(t *testing.T, db *pgxpool.Pool, users ...string) *bouncer {
	t.Helper()
	program := pgbouncerPath(t)
	server, err := url.Parse(adminURL())
	if err != nil {
		t.Fatal(err)
	}
	serverPort := server.Port()
	if serverPort == "" {
		serverPort = "5432"
	}
	cred := bouncerUser(t)
	dir, err := os.MkdirTemp("", "pgconvo-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // pgbouncer's user reads its files
		t.Fatal(err)
	}
	lines := queryRowsAs[string](t, db, userlistQuery, users)
	if len(lines) != len(users) {
		t.Fatalf("pg_authid has %d of the users %v: %v", len(lines), users, lines)
	}
	userlist := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(userlist, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The port is free when chosen; another process may take it before
	// pgbouncer binds it, so try a few.
	for attempt := 1; ; attempt++ {
		port := freeTCPPort(t)
		ini := docsIni(t, server.Hostname(), serverPort, testIniSettings(port, userlist))
		iniPath := filepath.Join(dir, "pgbouncer.ini")
		if err := os.WriteFile(iniPath, []byte(ini), 0o644); err != nil {
			t.Fatal(err)
		}
		b := &bouncer{port: port, log: &lockedBuffer{}}
		cmd := exec.Command(program, iniPath)
		cmd.Stdout, cmd.Stderr = b.log, b.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", program, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		if b.ready(exited) {
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					<-exited
				}
			})
			return b
		}
		cmd.Process.Kill()
		<-exited
		if attempt == 3 || !strings.Contains(b.log.String(), "in use") {
			t.Fatalf("pgbouncer did not start with this pgbouncer.ini:\n%s\nits log:\n%s", ini, b.log.String())
		}
	}
}

// ready waits until pgbouncer accepts connections, or has exited.
func (b *bouncer) ready(exited <-chan struct{}) bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// freeTCPPort returns a loopback port that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// url returns dbURL with the bouncer's host and port in place of the
// server's, and query added to its query string.
func (b *bouncer) url(t *testing.T, dbURL string, query ...string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", b.port)
	q := u.Query()
	for _, kv := range query {
		k, v, _ := strings.Cut(kv, "=")
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// connect opens a connection through the bouncer as dbURL's user. pgx's
// default mode names prepared statements on the server connection, which
// PgBouncer before 1.21 does not carry across transactions; the exec mode
// prepares nothing that outlives a statement.
func (b *bouncer) connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), b.url(t, dbURL, "default_query_exec_mode=exec"))
	if err != nil {
		t.Fatalf("connecting through pgbouncer: %v\npgbouncer's log:\n%s", err, b.log.String())
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestPgBouncerTransactionMode runs the purchase story in every language
// twice through PgBouncer in transaction mode (two processes, on one server
// connection per user), each with the URL as README.md gives it and SET
// LOCAL in each transaction; shows that a named prepared statement (pgx's
// cache_statement, which the Go example's URL may still choose) meets the
// next run there (42P05); that a session's SET is not the way to name an
// owner there (it stays on the server connection and reaches the next
// client's transactions); and that LISTEN belongs on a direct session
// connection: through the pooler, the notification goes to whichever client
// holds the server connection when it arrives.
func TestPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	mustExec(t, db, readmeRegistration(t))
	app, appURL := loginURL(t, db, "convo_app")
	admin, adminURL := loginURL(t, db, "convo_admin")
	b := startBouncer(t, db, app, admin)

	t.Run("the examples", func(t *testing.T) {
		for _, ex := range examples {
			t.Run(ex.name, func(t *testing.T) {
				// Each example's own URL, as README.md gives it, with no
				// parameter for the pooler: two runs, two processes, on the
				// same server connection (one per user), so that anything a
				// run leaves there (a named prepared statement) meets the next.
				bouncedApp := b.url(t, appURL)
				env := []string{"DATABASE_URL=" + bouncedApp, "ADMIN_DATABASE_URL=" + b.url(t, adminURL)}
				argv := ex.argv(t, bouncedApp)
				for run := 1; run <= 2; run++ {
					before := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations WHERE owner_id = 'customer-7'`)
					r := startExample(t, "", env, argv...)
					if r.code != 0 || !strings.Contains(r.stdout, "ok: examples/") {
						t.Fatalf("run %d of 2 through pgbouncer: exit %d, want 0 and ok:\n%s%s", run, r.code, r.stdout, r.stderr)
					}
					convs := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations
						WHERE owner_id = 'customer-7' AND NOT id::text = ANY ($1)`, before)
					if len(convs) != 1 {
						t.Fatalf("run %d made %d conversations, want 1: %v", run, len(convs), convs)
					}
					requirePurchaseStory(t, db, convs[0], app)
				}
			})
		}
		requireCount(t, db, 1, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
	})

	// The Go example's URL may still choose pgx's default mode, which names
	// its prepared statements on the server connection: the second run meets
	// the first one's there. This also shows that the runs above shared one
	// server connection, so that the test sees what a run leaves behind.
	t.Run("go with cache_statement in its URL", func(t *testing.T) {
		mode := "default_query_exec_mode=cache_statement"
		env := []string{"DATABASE_URL=" + b.url(t, appURL, mode), "ADMIN_DATABASE_URL=" + b.url(t, adminURL, mode)}
		program := goExample(t)
		runExample(t, env, program)
		requireOneLine(t, "the second run", startExample(t, "", env, program), "already exists (SQLSTATE 42P05)")
		for _, u := range []string{appURL, adminURL} {
			if _, err := b.connect(t, u).Exec(ctx, `DEALLOCATE ALL`); err != nil {
				t.Fatal(err)
			}
		}
	})

	// Two clients of the application's login role, through the bouncer:
	// with one server connection for that role, both run on it.
	c1, c2 := b.connect(t, appURL), b.connect(t, appURL)
	pid := func(c *pgx.Conn) (pid int) {
		if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	requireEqual(t, "both clients' server connection", pid(c1), pid(c2))
	var alice string
	if err := pgx.BeginFunc(ctx, c1, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT convo.create_conversation('alice', 'You are terse.')`).Scan(&alice)
	}); err != nil {
		t.Fatal(err)
	}
	pathLength := func(c *pgx.Conn, owner string) (n int, err error) {
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if owner != "" {
				if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
					return err
				}
			}
			return tx.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, alice).Scan(&n)
		})
		return n, err
	}

	t.Run("SET LOCAL ends with the transaction", func(t *testing.T) {
		if n, err := pathLength(c1, "alice"); err != nil || n != 1 {
			t.Fatalf("alice's own transaction reads her conversation: %d, %v", n, err)
		}
		_, err := pathLength(c2, "bob")
		requireSQLState(t, err, "CV002")
		_, err = pathLength(c2, "") // the same server connection, no owner named
		requireSQLState(t, err, "CV002")
	})

	t.Run("a session's SET reaches the next client", func(t *testing.T) {
		if _, err := c1.Exec(ctx, `SET convo.owner_id = 'alice'`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c1.Exec(ctx, `RESET convo.owner_id`) })
		// c2 names no owner: it runs on the server connection c1 set, and
		// reads alice's conversation.
		var seen string
		if err := c2.QueryRow(ctx, `SELECT current_setting('convo.owner_id')`).Scan(&seen); err != nil {
			t.Fatal(err)
		}
		requireEqual(t, "the owner c2 finds set", seen, "alice")
		if n, err := pathLength(c2, ""); err != nil || n != 1 {
			t.Fatalf("want c2 to read alice's conversation through c1's SET (the leak); got %d, %v", n, err)
		}
		// SET LOCAL overrides it for its own transaction only.
		_, err := pathLength(c2, "bob")
		requireSQLState(t, err, "CV002")
	})

	t.Run("LISTEN on a direct connection", func(t *testing.T) {
		l := listen(t, db, "convo_head") // a session of its own, not through the pooler
		var head string
		if err := pgx.BeginFunc(ctx, c1, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "Hello"}]')`, alice).Scan(&head)
		}); err != nil {
			t.Fatal(err)
		}
		n := l.wait(10 * time.Second)
		if n == nil {
			t.Fatal("the direct listener heard nothing of a commit through the pooler")
		}
		var payload struct {
			Conversation string `json:"conversation_id"`
			Head         string `json:"head_message_id"`
		}
		if err := json.Unmarshal([]byte(n.Payload), &payload); err != nil {
			t.Fatal(err)
		}
		requireEqual(t, "notification", payload.Conversation+" "+payload.Head, alice+" "+head)
	})

	t.Run("LISTEN through the pooler reaches the wrong client", func(t *testing.T) {
		// c3 LISTENs through the bouncer: the LISTEN stays with the server
		// connection, which c1 then uses for its transaction; the
		// notification arrives with c1's COMMIT, to c1, which never listened.
		heard := make(chan *pgconn.Notification, 10)
		cfg, err := pgx.ParseConfig(b.url(t, appURL, "default_query_exec_mode=exec"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) { heard <- n }
		other, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		c3 := b.connect(t, appURL)
		if _, err := c3.Exec(ctx, `LISTEN convo_head`); err != nil {
			t.Fatal(err)
		}
		defer c3.Exec(ctx, `UNLISTEN *`)
		if err := pgx.BeginFunc(ctx, other, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL convo.owner_id = 'alice'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT convo.append_message($1, 'user', '[{"type": "text", "text": "Again"}]')`, alice)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if n, err := c3.WaitForNotification(wait); err == nil {
			t.Fatalf("the client that listened heard %s through the pooler; want nothing", n.Payload)
		} else if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
			t.Fatal(err)
		}
		select {
		case n := <-heard:
			t.Logf("the client that never listened got: %s %s", n.Channel, n.Payload)
		default:
			t.Fatal("want the notification delivered to the client holding the server connection at commit")
		}
	})
}
