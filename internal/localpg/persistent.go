package localpg

import (
	"bufio"
	"bytes"
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

// lockTimeout bounds the wait for another process that is starting or
// stopping the same local server. The lock goes with the process that holds
// it, so only a process that hangs makes anyone wait this long.
const lockTimeout = 3 * time.Minute

// orphanTimeout bounds the wait, after the postmaster died, for the server
// processes it left behind to notice and exit.
const orphanTimeout = 10 * time.Second

// Persistent is the local server EnsurePersistent found or started.
type Persistent struct {
	// URL is the URL of database pgconvo on it, as the superuser.
	URL string
	// Started reports that this call started the server (it was not
	// running); Initialized, that it also created the cluster with initdb.
	Started, Initialized bool
}

// EnsurePersistent starts, or reuses, a long-lived server under dir (the
// CLI passes ".pgconvo"): data in dir/data, log in dir/postgres.log, port in
// dir/port (or, when the server's OS user cannot reach dir, in the directory
// serverDir links from dir/server). The server is started detached with
// pg_ctl so it outlives this process; stop it with StopPersistent. It
// creates database pgconvo when missing and returns its URL.
//
// Calls for the same dir take turns on the lock file dir/lock, so a second
// process waits for the first to start the server and then reuses it. A
// server whose postmaster died (killed, or the machine rebooted) leaves a
// stale postmaster.pid: it is recognised at once and the server restarted.
func EnsurePersistent(ctx context.Context, dir string) (*Persistent, error) {
	u, err := serverUser()
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dir, err = serverDir(dir, u)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")

	if pid, port, ok := readPostmasterPID(dataDir); ok {
		if pidAlive(pid) {
			err := waitReady(ctx, port, persistentStartTimeout, logPath, func() bool { return !pidAlive(pid) })
			if err == nil {
				if err := createDatabase(ctx, port, Database); err != nil {
					return nil, err
				}
				return &Persistent{URL: URL(port, Database)}, nil
			}
			if !errors.Is(err, errServerGone) {
				return nil, fmt.Errorf("reusing the local server in %s: %w", dir, err)
			}
		}
		if err := clearStale(ctx, dir, dataDir, pid); err != nil {
			return nil, err
		}
	}

	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", dir, err)
	}
	if err := u.chown(dir); err != nil {
		return nil, err
	}
	p := &Persistent{Started: true}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initdb(ctx, binDir, dataDir, u, false); err != nil {
			return nil, err
		}
		p.Initialized = true
	}
	port, err := choosePort(dir)
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -h 127.0.0.1 -k %s", port, shellQuote(socketDir(dir, port)))
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_ctl"),
		"start", "-D", dataDir, "-l", logPath, "-w", "-t", strconv.Itoa(int(persistentStartTimeout.Seconds())), "-o", opts)
	cmd.Dir = dir
	u.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("starting the local server with pg_ctl: %w\n%s\nlog %s ends:\n%s",
			err, tail(out, 10), logPath, logTail(logPath))
	}
	if err := waitReady(ctx, port, persistentStartTimeout, logPath, nil); err != nil {
		return nil, err
	}
	if err := createDatabase(ctx, port, Database); err != nil {
		return nil, err
	}
	p.URL = URL(port, Database)
	return p, nil
}

// StopPersistent stops the server EnsurePersistent started under dir, if it
// is running, and reports whether it was. The data stays.
func StopPersistent(ctx context.Context, dir string) (bool, error) {
	u, err := serverUser()
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil // Never started here: nothing to lock or stop.
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return false, err
	}
	defer unlock()
	dir, err = serverDir(dir, u)
	if err != nil {
		return false, err
	}
	return stopIn(ctx, dir, u)
}

// stopIn stops the server whose files are in dir (serverDir's answer), if
// it is running, and reports whether it was. The caller holds the lock.
func stopIn(ctx context.Context, dir string, u *osUser) (bool, error) {
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

// Purged is what PurgePersistent did.
type Purged struct {
	// Stopped reports that the server was running and was stopped.
	Stopped bool
	// Removed are the directories removed, absolute: dir, and the
	// directory under /var/tmp its server kept its files in when the
	// server's OS user could not reach dir.
	Removed []string
}

// PurgePersistent stops the server EnsurePersistent started under dir, if it
// is running, and removes everything it kept: its data directory, log and
// port (in dir, or in the /var/tmp/pgconvo-<hash> directory serverDir
// chose when the server's OS user could not reach dir) and dir itself. The
// next EnsurePersistent starts from an empty cluster. Nothing there is
// nothing to do.
func PurgePersistent(ctx context.Context, dir string) (*Purged, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	// Only root's servers live under /var/tmp: another user's never do,
	// unless a link of dir's says so.
	alt := fallbackDir(abs)
	_, dirErr := os.Lstat(abs)
	_, altErr := os.Lstat(alt)
	if target, err := os.Readlink(filepath.Join(abs, "server")); altErr == nil && os.Geteuid() != 0 && (err != nil || target != alt) {
		altErr = os.ErrNotExist
	}
	if errors.Is(dirErr, os.ErrNotExist) && altErr != nil {
		return &Purged{}, nil
	}
	u, err := serverUser()
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(ctx, abs)
	if err != nil {
		return nil, err
	}
	defer unlock()
	p := &Purged{}
	// The server's files are in abs, or in alt when abs/server links there
	// (or, the link lost, when alt exists and is ours).
	dirs := []string{abs}
	if altErr == nil {
		if checkOurs(alt, u) != nil {
			return p, fmt.Errorf("%s is not a directory this command made (a link, or another user's): "+
				"look at it and remove it yourself; nothing was removed", alt)
		}
		dirs = append(dirs, alt)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "data")); err != nil {
			continue
		}
		stopped, err := stopIn(ctx, d, u)
		if err != nil {
			return p, fmt.Errorf("%w; nothing was removed", err)
		}
		p.Stopped = p.Stopped || stopped
		left, err := waitProcessesGone(ctx, filepath.Join(d, "data"))
		if err != nil {
			return p, err
		}
		if len(left) > 0 {
			return p, fmt.Errorf("processes %v still use %s: stop them, then purge again; nothing was removed", left, filepath.Join(d, "data"))
		}
	}
	if altErr == nil {
		if err := os.RemoveAll(alt); err != nil {
			return p, fmt.Errorf("removing %s: %w", alt, err)
		}
		p.Removed = append(p.Removed, alt)
	}
	if err := os.RemoveAll(abs); err != nil {
		return p, fmt.Errorf("removing %s: %w", abs, err)
	}
	p.Removed = append(p.Removed, abs)
	return p, nil
}

// lockDir takes the lock file dir/lock (making dir if needed), waiting while
// another process holds it, and returns the function that lets it go. It is
// an flock: the kernel drops it when its holder exits, however it exits.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making %s: %w", dir, err)
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file %s: %w", path, err)
	}
	deadline := time.Now().Add(lockTimeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // Closing the file drops the lock.
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another process has held %s for %v while starting or stopping the local server: "+
				"find it with `fuser %s` and stop it", path, lockTimeout, path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process to start or stop the local server in %s: %w", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readPostmasterPID reads dataDir/postmaster.pid: the postmaster's pid and
// its port. ok is false when there is no such file or it is incomplete.
func readPostmasterPID(dataDir string) (pid, port int, ok bool) {
	f, err := os.Open(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	// Line 1 is the PID, line 4 the port; see postmaster.pid in the docs.
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if len(lines) < 4 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(lines[0])
	port, err2 := strconv.Atoi(lines[3])
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, port, true
}

// runningPort returns the port of the server whose data is in dataDir when
// its postmaster is alive.
func runningPort(dataDir string) (int, bool) {
	pid, port, ok := readPostmasterPID(dataDir)
	if !ok || !pidAlive(pid) {
		return 0, false
	}
	return port, true
}

// pidAlive reports whether pid is a running PostgreSQL process. A zombie is
// not: a postmaster that was killed stays one when nobody reaps it (a
// container whose init does not), and signalling a zombie succeeds, so
// kill(pid, 0) alone would wait for a server that is gone. Nor is a process
// of another program that got the pid after a reboot. Without /proc it falls
// back to kill(pid, 0).
func pidAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, procErr := os.Stat("/proc/self/stat"); procErr != nil {
			err := syscall.Kill(pid, 0)
			return err == nil || errors.Is(err, syscall.EPERM)
		}
		return false
	}
	// The format is "pid (comm) state ...", and comm may hold anything.
	open, closing := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || closing < open || closing+2 >= len(stat) {
		return false
	}
	comm, state := string(stat[open+1:closing]), stat[closing+2]
	return strings.Contains(comm, "postgres") && state != 'Z' && state != 'X'
}

// clearStale makes the data directory startable again after its postmaster
// (pid) died: it waits for the server processes left behind to exit, then
// removes the postmaster.pid and socket lock files naming pid, which
// PostgreSQL would otherwise take for a live server when pid is a zombie.
func clearStale(ctx context.Context, dir, dataDir string, pid int) error {
	left, err := waitProcessesGone(ctx, dataDir)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("the local server in %s is not running (postmaster %d is gone), but processes %v "+
			"still use its data directory: stop them, then retry", dir, pid, left)
	}
	locks, _ := filepath.Glob(filepath.Join(dir, ".s.PGSQL.*.lock"))
	locks = append(locks, filepath.Join(dataDir, "postmaster.pid"))
	for _, path := range locks {
		body, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(body), "\n")
		if strings.TrimSpace(first) != strconv.Itoa(pid) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the stale %s: %w", path, err)
		}
	}
	return nil
}

// waitProcessesGone waits, up to orphanTimeout, until no process runs in
// dataDir, and returns those still there then. Server processes outlive
// their postmaster by a moment (pg_ctl stop returns when the postmaster is
// gone, and a loaded machine may not have scheduled the rest yet), so one
// look would take a stopping server for a stuck one.
func waitProcessesGone(ctx context.Context, dataDir string) ([]int, error) {
	deadline := time.Now().Add(orphanTimeout)
	for {
		left := processesIn(dataDir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left, nil
		}
		select {
		case <-ctx.Done():
			return left, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// processesIn returns the live processes whose working directory is
// dataDir: PostgreSQL's server processes all run there. Without /proc it
// finds none.
func processesIn(dataDir string) []int {
	want, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && cwd == want {
			out = append(out, pid)
		}
	}
	return out
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
	alt := fallbackDir(dir)
	if err := u.checkTraversable(alt); err != nil {
		return "", fmt.Errorf("%w; and no fallback under /var/tmp: %v", reachErr, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	if err := os.Mkdir(alt, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("making %s: %w", alt, err)
	}
	if err := checkOurs(alt, u); err != nil {
		return "", err
	}
	link := filepath.Join(dir, "server")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		if err := os.Symlink(alt, link); err != nil {
			return "", fmt.Errorf("linking %s to %s: %w", link, alt, err)
		}
	}
	return alt, nil
}

// fallbackDir is the directory under /var/tmp that serverDir gives the
// server under dir (absolute) when the server's OS user cannot reach dir.
func fallbackDir(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join("/var/tmp", "pgconvo-"+hex.EncodeToString(sum[:6]))
}

// checkOurs fails unless alt is a directory (not a link) of root or u:
// one serverDir made, not one someone else planted there.
func checkOurs(alt string, u *osUser) error {
	info, err := os.Lstat(alt)
	if err != nil {
		return fmt.Errorf("checking %s: %w", alt, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || (st.Uid != 0 && (u == nil || st.Uid != u.uid) && int(st.Uid) != os.Geteuid()) {
		name := "us"
		if u != nil {
			name = u.name
		}
		return fmt.Errorf("%s exists and is not a directory of root or %s: remove it yourself, or run from a directory %s can reach", alt, name, name)
	}
	return nil
}

// HasPersistent reports whether EnsurePersistent has made a server under
// dir: its data directory is there, in dir or where dir/server links. It
// only looks, so a command that must not create a server can ask first.
func HasPersistent(dir string) bool {
	for _, data := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "server", "data")} {
		if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
			return true
		}
	}
	return false
}
