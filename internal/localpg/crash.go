package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Crash kills the server at once, as a power cut would end it: SIGKILL to
// the postmaster and to every process it started, with no shutdown. The
// data directory stays; Restart starts the server on it again, and
// PostgreSQL recovers from its write-ahead log. It is for crash tests.
func (s *Server) Crash() error {
	pid := s.cmd.Process.Pid
	children := childrenOf(pid)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing the postmaster: %w", err)
	}
	for _, c := range children {
		syscall.Kill(c, syscall.SIGKILL) // Already gone is fine.
	}
	<-s.exited
	// The children were killed too; wait until none is left in /proc.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range children {
		for alive(c) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// Restart starts the server again on its data directory after Crash (or
// after it died), on a free port, and waits until it accepts connections,
// which is after crash recovery. URL and Port answer for the new port.
func (s *Server) Restart(ctx context.Context, opts Options) error {
	if !s.gone() {
		return errors.New("restarting a server that is still running")
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 200
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	binDir, err := FindBinaries()
	if err != nil {
		return err
	}
	u, err := serverUser()
	if err != nil {
		return err
	}
	// A killed postmaster leaves its pid file behind; with every process of
	// it gone, it is stale.
	os.Remove(filepath.Join(s.dir, "data", "postmaster.pid"))
	for attempt := 1; ; attempt++ {
		n, err := runPostgres(ctx, binDir, s.dir, u, opts)
		if errors.Is(err, errAddrInUse) && attempt < 3 {
			continue
		}
		if err != nil {
			return err
		}
		s.port, s.cmd, s.exited, s.waitErr = n.port, n.cmd, n.exited, nil
		return nil
	}
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid is a process that has not exited (a zombie
// counts as gone).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
