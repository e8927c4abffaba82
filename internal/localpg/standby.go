package localpg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby starts a hot standby of s: a fresh directory filled by
// pg_basebackup -R from s (streaming replication, its primary_conninfo
// written for it), started on a free port, read-only. Stop it as any
// ephemeral server; it stops when s does not, so stop it first.
func (s *Server) StartStandby(ctx context.Context, opts Options) (*Server, error) {
	opts, binDir, u, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", ephemeralPrefix)
	if err != nil {
		return nil, fmt.Errorf("making a directory for the standby: %w", err)
	}
	standby, err := func() (*Server, error) {
		if err := u.checkTraversable(dir); err != nil {
			return nil, err
		}
		if err := u.chown(dir); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_basebackup"),
			"-D", filepath.Join(dir, "data"), "-R", "-X", "stream", "-c", "fast",
			"-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", Superuser)
		cmd.Dir = dir
		u.apply(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("pg_basebackup from port %d: %w\n%s", s.port, err, tail(out, 20))
		}
		return runPostgres(ctx, binDir, dir, u, opts)
	}()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return standby, nil
}

// WaitReplayed waits until the standby at standbyURL has replayed the
// primary's WAL up to where it is inserted now (a write committed on the
// primary before the call is then visible on the standby, even with
// synchronous_commit off), or timeout passes.
func WaitReplayed(ctx context.Context, primaryURL, standbyURL string, timeout time.Duration) error {
	primary, err := pgx.Connect(ctx, primaryURL)
	if err != nil {
		return err
	}
	defer primary.Close(ctx)
	var lsn string
	if err := primary.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return err
	}
	standby, err := pgx.Connect(ctx, standbyURL)
	if err != nil {
		return err
	}
	defer standby.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var done bool
		if err := standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby has not replayed up to %s in %s", lsn, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
