package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgBouncer in transaction mode (docs/deployment.md, "Poolers"): a client
// holds a server connection for one transaction only, so whatever a
// transaction names with SET LOCAL is its own, while a session's SET stays
// on the server connection for the next client, and LISTEN stays with a
// server connection that other clients' transactions run on. These tests
// run Debian's pgbouncer (apt-get install pgbouncer; .ci/run installs it)
// in front of the test server, with one server connection per user and
// database, so that every client of a user shares one.

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

// startBouncer starts pgbouncer in pool_mode=transaction in front of the
// test server, letting in users (trust, as the server trusts loopback), with
// one server connection per user and database, and stops it when the test
// ends.
func startBouncer(t *testing.T, users ...string) *bouncer {
	t.Helper()
	program := pgbouncerPath(t)
	server, err := url.Parse(serverURL)
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
	var userlist strings.Builder
	for _, u := range users {
		fmt.Fprintf(&userlist, "%q \"\"\n", u)
	}
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(userlist.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// The port is free when chosen; another process may take it before
	// pgbouncer binds it, so try a few.
	for attempt := 1; ; attempt++ {
		port := freeTCPPort(t)
		ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 1
max_client_conn = 100
ignore_startup_parameters = extra_float_digits
logfile =
pidfile =
`, server.Hostname(), serverPort, port, filepath.Join(dir, "userlist.txt"))
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
			t.Fatalf("pgbouncer did not start:\n%s", b.log.String())
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
// through PgBouncer in transaction mode, with SET LOCAL in each transaction
// as the examples do; shows that a session's SET is not the way to name an
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
	b := startBouncer(t, app, admin)

	t.Run("the examples", func(t *testing.T) {
		for _, ex := range examples {
			t.Run(ex.name, func(t *testing.T) {
				// pgx (the Go example) reads its exec mode from the URL; the
				// others prepare nothing by name (psycopg: prepare_threshold=None).
				var query []string
				if ex.name == "go" {
					query = []string{"default_query_exec_mode=exec"}
				}
				bouncedApp := b.url(t, appURL, query...)
				env := []string{"DATABASE_URL=" + bouncedApp, "ADMIN_DATABASE_URL=" + b.url(t, adminURL, query...)}
				before := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations WHERE owner_id = 'customer-7'`)
				runExample(t, env, ex.argv(t, bouncedApp)...)
				convs := queryRowsAs[string](t, db, `SELECT id::text FROM convo.conversations
					WHERE owner_id = 'customer-7' AND NOT id::text = ANY ($1)`, before)
				if len(convs) != 1 {
					t.Fatalf("the run made %d conversations, want 1: %v", len(convs), convs)
				}
				requirePurchaseStory(t, db, convs[0], app)
			})
		}
		requireCount(t, db, 1, `SELECT count(*) FROM convo.tools WHERE name = 'purchase_credits'`)
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
