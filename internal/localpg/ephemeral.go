package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ephemeralPrefix starts the name of every ephemeral server's directory.
const ephemeralPrefix = "pgconvo-pg-"

// Options tune an ephemeral server.
type Options struct {
	// MaxConnections is the server's max_connections; 0 means 200.
	MaxConnections int
	// StartTimeout bounds the wait for the server to accept connections;
	// 0 means 60 seconds.
	StartTimeout time.Duration
	// Durable keeps PostgreSQL's defaults for fsync, synchronous_commit and
	// full_page_writes (all on), so that a commit waits for the disk; by
	// default an ephemeral server turns all three off for speed.
	Durable bool
	// Settings are more server settings, "name=value" each, passed to
	// postgres as -c flags after the others.
	Settings []string
}

// Server is a running ephemeral PostgreSQL server.
type Server struct {
	dir     string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stop    sync.Once
	stopErr error
}

// StartEphemeral starts a throwaway server for tests and benchmarks: a
// fresh directory under the system temp dir, a fresh free port, durability
// switched off for speed unless opts.Durable. The server is killed if this
// process dies, so a crashed run leaves nothing behind; Stop shuts it down
// and removes the directory.
func StartEphemeral(ctx context.Context, opts Options) (*Server, error) {
	opts, binDir, u, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	sweepStale()
	dir, err := os.MkdirTemp("", ephemeralPrefix)
	if err != nil {
		return nil, fmt.Errorf("making a directory for the test server: %w", err)
	}
	s, err := startEphemeral(ctx, binDir, dir, u, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// prepare fills in opts' defaults and finds the server binaries and the OS
// user to run them as.
func prepare(opts Options) (Options, string, *osUser, error) {
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 200
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	binDir, err := FindBinaries()
	if err != nil {
		return opts, "", nil, err
	}
	u, err := serverUser()
	return opts, binDir, u, err
}

// startEphemeral does StartEphemeral's work in dir, retrying on a new port
// when another process takes the chosen one first.
func startEphemeral(ctx context.Context, binDir, dir string, u *osUser, opts Options) (*Server, error) {
	if err := u.checkTraversable(dir); err != nil {
		return nil, err
	}
	if err := u.chown(dir); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := initdb(ctx, binDir, dataDir, u, true); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s, err := runPostgres(ctx, binDir, dir, u, opts)
		if errors.Is(err, errAddrInUse) && attempt < 3 {
			continue
		}
		return s, err
	}
}

// runPostgres starts postgres in the foreground as our child on a free port
// and waits until it accepts connections.
func runPostgres(ctx context.Context, binDir, dir string, u *osUser, opts Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating server log: %w", err)
	}
	defer logFile.Close() // The child has its own copy.
	args := []string{
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-h", "127.0.0.1",
		"-k", socketDir(dir, port),
		"-c", "max_connections=" + strconv.Itoa(opts.MaxConnections),
	}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, setting := range opts.Settings {
		args = append(args, "-c", setting)
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Kill the server when the test binary dies, however it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	u.apply(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	s := &Server{dir: dir, port: port, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := waitReady(ctx, port, opts.StartTimeout, logPath, s.gone); err != nil {
		s.kill()
		if addrInUse(logPath) {
			return nil, fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return nil, err
	}
	return s, nil
}

// gone reports whether the server process has exited.
func (s *Server) gone() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Port returns the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() int { return s.port }

// URL returns the URL of database on this server, as the superuser.
func (s *Server) URL(database string) string { return URL(s.port, database) }

// Stop shuts the server down (fast shutdown, then a kill after 30 seconds)
// and removes its directory. It is safe to call more than once.
func (s *Server) Stop() error {
	s.stop.Do(func() {
		if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("signalling postgres to stop: %w", err)
		}
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.kill()
		}
		if err := os.RemoveAll(s.dir); err != nil {
			s.stopErr = errors.Join(s.stopErr, fmt.Errorf("removing %s: %w", s.dir, err))
		}
	})
	return s.stopErr
}

// kill ends the server at once and waits for it to go.
func (s *Server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// sweepStale removes the directories of ephemeral servers that died with
// their test run (killed, so Stop never ran): those older than ten minutes
// whose postmaster is not alive. Younger ones may still be starting up.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), ephemeralPrefix+"*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < 10*time.Minute {
			continue
		}
		if _, alive := runningPort(filepath.Join(dir, "data")); alive {
			continue
		}
		os.RemoveAll(dir)
	}
}
