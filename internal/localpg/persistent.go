package localpg

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Database is the database EnsurePersistent creates and returns a URL for.
const Database = "pgconvo"

// persistentStartTimeout bounds the wait for a persistent server to start.
const persistentStartTimeout = 60 * time.Second

// EnsurePersistent starts, or reuses, a long-lived server under dir (the
// CLI passes ".pgconvo"): data in dir/data, log in dir/postgres.log, port in
// dir/port (or, when the server's OS user cannot reach dir, in the directory
// serverDir links from dir/server). The server is started detached with
// pg_ctl so it outlives this process; stop it with StopPersistent. It
// creates database pgconvo when missing and returns its URL.
func EnsurePersistent(ctx context.Context, dir string) (string, error) {
	u, err := serverUser()
	if err != nil {
		return "", err
	}
	dir, err = serverDir(dir, u)
	if err != nil {
		return "", err
	}
	dataDir := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")

	if port, ok := runningPort(dataDir); ok {
		if err := waitReady(ctx, port, persistentStartTimeout, logPath, nil); err != nil {
			return "", fmt.Errorf("reusing the local server in %s: %w", dir, err)
		}
		if err := createDatabase(ctx, port, Database); err != nil {
			return "", err
		}
		return URL(port, Database), nil
	}

	binDir, err := FindBinaries()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	if err := u.chown(dir); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initdb(ctx, binDir, dataDir, u, false); err != nil {
			return "", err
		}
	}
	port, err := choosePort(dir)
	if err != nil {
		return "", err
	}
	opts := fmt.Sprintf("-p %d -h 127.0.0.1 -k %s", port, shellQuote(socketDir(dir, port)))
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_ctl"),
		"start", "-D", dataDir, "-l", logPath, "-w", "-t", strconv.Itoa(int(persistentStartTimeout.Seconds())), "-o", opts)
	cmd.Dir = dir
	u.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("starting the local server with pg_ctl: %w\n%s\nlog %s ends:\n%s",
			err, tail(out, 10), logPath, logTail(logPath))
	}
	if err := waitReady(ctx, port, persistentStartTimeout, logPath, nil); err != nil {
		return "", err
	}
	if err := createDatabase(ctx, port, Database); err != nil {
		return "", err
	}
	return URL(port, Database), nil
}

// StopPersistent stops the server EnsurePersistent started under dir, if it
// is running, and reports whether it was. The data stays.
func StopPersistent(ctx context.Context, dir string) (bool, error) {
	u, err := serverUser()
	if err != nil {
		return false, err
	}
	dir, err = serverDir(dir, u)
	if err != nil {
		return false, err
	}
	dataDir := filepath.Join(dir, "data")
	if _, ok := runningPort(dataDir); !ok {
		return false, nil
	}
	binDir, err := FindBinaries()
	if err != nil {
		return false, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_ctl"), "stop", "-D", dataDir, "-m", "fast", "-w")
	cmd.Dir = dir
	u.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("stopping the local server with pg_ctl: %w\n%s", err, tail(out, 10))
	}
	return true, nil
}

// runningPort reads dataDir/postmaster.pid and returns the server's port
// when the process it names is alive.
func runningPort(dataDir string) (int, bool) {
	f, err := os.Open(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	// Line 1 is the PID, line 4 the port; see postmaster.pid in the docs.
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if len(lines) < 4 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(lines[0])
	port, err2 := strconv.Atoi(lines[3])
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false // Stale: the server crashed or the machine rebooted.
	}
	return port, true
}

// choosePort returns the port recorded in dir/port when it is still free,
// else a fresh free port, which it records.
func choosePort(dir string) (int, error) {
	path := filepath.Join(dir, "port")
	if body, err := os.ReadFile(path); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(body))); err == nil && portFree(port) {
			return port, nil
		}
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("recording the port in %s: %w", path, err)
	}
	return port, nil
}

// shellQuote quotes s for the POSIX shell pg_ctl hands its -o options to.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// serverDir returns the absolute directory the server under dir keeps its
// files in: dir itself, or, when we are root and the server's OS user cannot
// reach dir (a clone under /root, say), a directory of its own under
// /var/tmp named after dir and linked from dir/server, so that
// `go run ./cmd/migrate up` works wherever the clone is.
func serverDir(dir string, u *osUser) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	reachErr := u.checkTraversable(dir)
	if reachErr == nil {
		return dir, nil
	}
	sum := sha256.Sum256([]byte(dir))
	alt := filepath.Join("/var/tmp", "pgconvo-"+hex.EncodeToString(sum[:6]))
	if err := u.checkTraversable(alt); err != nil {
		return "", fmt.Errorf("%w; and no fallback under /var/tmp: %v", reachErr, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	if err := os.Mkdir(alt, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("making %s: %w", alt, err)
	}
	// Refuse a directory someone else planted there (or a link to elsewhere).
	info, err := os.Lstat(alt)
	if err != nil {
		return "", fmt.Errorf("checking %s: %w", alt, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || (st.Uid != 0 && st.Uid != u.uid) {
		return "", fmt.Errorf("%s exists and is not a directory of root or %s: remove it, or run from a directory %s can reach", alt, u.name, u.name)
	}
	link := filepath.Join(dir, "server")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink(alt, link); err != nil {
			return "", fmt.Errorf("linking %s to %s: %w", link, alt, err)
		}
	}
	return alt, nil
}
