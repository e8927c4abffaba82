// Package localpg starts a PostgreSQL server from the binaries installed on
// this machine: a throwaway one for tests (StartEphemeral) or a long-lived
// one under .pgconvo/ for the CLI (EnsurePersistent). The server listens on
// 127.0.0.1 and its own unix socket directory only, and trusts every local
// connection, so it is for development and CI, never for real data.
package localpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Superuser is the role initdb creates and the URLs connect as.
const Superuser = "postgres"

// URL returns the connection URL for database on a local server at port.
func URL(port int, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// initdb creates a cluster in dataDir, owned by u, whose superuser is
// postgres and which trusts local and loopback connections.
func initdb(ctx context.Context, binDir, dataDir string, u *osUser, fast bool) error {
	args := []string{"-D", dataDir, "-U", Superuser, "--auth-local=trust", "--auth-host=trust",
		"-E", "UTF8", "--locale=C"}
	if fast {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = filepath.Dir(dataDir)
	u.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("running initdb in %s: %w\n%s", dataDir, err, tail(out, 20))
	}
	return checkLoopbackOnly(filepath.Join(dataDir, "pg_hba.conf"))
}

// checkLoopbackOnly fails unless every host line of the pg_hba.conf at path
// is for a loopback address, because the cluster trusts whoever connects.
func checkLoopbackOnly(path string) error {
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || fields[0] == "local" {
			continue
		}
		if len(fields) < 4 || (fields[3] != "127.0.0.1/32" && fields[3] != "::1/128") {
			return fmt.Errorf("%s allows a non-loopback connection (%q): refusing to run a trusting server", path, sc.Text())
		}
	}
	return nil
}

// freePort asks the kernel for a TCP port on 127.0.0.1 that nobody is using.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free TCP port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether port on 127.0.0.1 can be listened on now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// socketDir returns dir when a socket path inside it fits the kernel's limit
// of about 107 bytes, and "" (no unix socket; TCP only) otherwise.
func socketDir(dir string, port int) string {
	if len(filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port)+".lock")) > 100 {
		return ""
	}
	return dir
}

// ping reports whether the server at port accepts a connection.
func ping(ctx context.Context, port int) error {
	cfg, err := pgx.ParseConfig(URL(port, "postgres"))
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// errServerGone says that the server died while waitReady waited for it.
var errServerGone = errors.New("PostgreSQL exited")

// waitReady polls the server at port until it accepts a connection, the
// timeout passes, or gone (which may be nil) reports that the server died.
// Failures carry the tail of the server log at logPath.
func waitReady(ctx context.Context, port int, timeout time.Duration, logPath string, gone func() bool) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = ping(ctx, port); last == nil {
			return nil
		}
		if gone != nil && gone() {
			return fmt.Errorf("%w while starting on port %d; log %s ends:\n%s", errServerGone, port, logPath, logTail(logPath))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for PostgreSQL on port %d: %w", port, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL on port %d did not accept connections within %v (last error: %w); log %s ends:\n%s",
				port, timeout, last, logPath, logTail(logPath))
		}
	}
}

// logTail returns the last lines of the file at path, or a note saying why
// it cannot.
func logTail(path string) string {
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tail(body, 30)
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// createDatabase creates database name on the server at port unless it
// exists already.
func createDatabase(ctx context.Context, port int, name string) error {
	conn, err := pgx.Connect(ctx, URL(port, "postgres"))
	if err != nil {
		return fmt.Errorf("connecting to create database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("checking for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // Created meanwhile by another run.
			return nil
		}
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// errAddrInUse is matched in the server log to retry on another port.
var errAddrInUse = errors.New("port taken")

// addrInUse reports whether the server log says its port was taken.
func addrInUse(logPath string) bool {
	body, _ := os.ReadFile(logPath)
	return bytes.Contains(body, []byte("could not bind")) || bytes.Contains(body, []byte("Address already in use"))
}
