package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Crash kills the server at once, as a power cut would end it: SIGKILL to
// the postmaster and to every process of the server (those running in its
// data directory), with no shutdown. The data directory stays; Restart
// starts the server on it again, and PostgreSQL recovers from its
// write-ahead log. It is for crash tests.
func (s *Server) Crash() error {
	processes := processesIn(filepath.Join(s.dir, "data"))
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing the postmaster: %w", err)
	}
	for _, pid := range processes {
		syscall.Kill(pid, syscall.SIGKILL) // Already gone is fine.
	}
	<-s.exited
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range processes {
		for pidAlive(pid) && time.Now().Before(deadline) {
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
	opts, binDir, u, err := prepare(opts)
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
