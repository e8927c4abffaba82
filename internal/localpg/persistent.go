package localpg

import (
	"bufio"
	"context"
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
// dir/port. The server is started detached with pg_ctl so it outlives this
// process; stop it with StopPersistent. It creates database pgconvo when
// missing and returns its URL.
func EnsurePersistent(ctx context.Context, dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
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
	u, err := serverUser()
	if err != nil {
		return "", err
	}
	if err := u.checkTraversable(dir); err != nil {
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
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("resolving %s: %w", dir, err)
	}
	dataDir := filepath.Join(dir, "data")
	if _, ok := runningPort(dataDir); !ok {
		return false, nil
	}
	binDir, err := FindBinaries()
	if err != nil {
		return false, err
	}
	u, err := serverUser()
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
