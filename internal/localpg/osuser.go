package localpg

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// osUser is the unprivileged account the server runs as when we are root,
// because initdb and postgres refuse to run as root.
type osUser struct {
	name     string
	uid, gid uint32
}

// serverUser returns the account to run the server as: nil when the current
// process is not root (the server then runs as us), else `postgres`, or
// `nobody` when there is no `postgres` account.
func serverUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var firstErr error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("reading uid and gid of OS user %s: %q, %q", name, u.Uid, u.Gid)
		}
		return &osUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, and neither OS user postgres nor nobody exists to run the server: %w", firstErr)
}

// apply makes cmd run as u. A nil u leaves cmd running as us.
func (u *osUser) apply(cmd *exec.Cmd) {
	if u == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
}

// chown hands path to u. A nil u does nothing.
func (u *osUser) chown(path string) error {
	if u == nil {
		return nil
	}
	if err := os.Chown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("handing %s to OS user %s: %w", path, u.name, err)
	}
	return nil
}

// checkTraversable fails unless u can reach dir, that is, search every
// directory above it. A nil u (we are not root) always can.
func (u *osUser) checkTraversable(dir string) error {
	if u == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("checking %s: %w", p, err)
		}
		if !u.canSearch(info) {
			return fmt.Errorf("the server must run as OS user %s (initdb and postgres refuse root), "+
				"but %s cannot enter %s (mode %#o): run from a directory that user can reach "+
				"or `chmod o+x %s`", u.name, u.name, p, uint32(info.Mode().Perm()), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// canSearch reports whether u may enter the directory described by info.
func (u *osUser) canSearch(info os.FileInfo) bool {
	mode := info.Mode().Perm()
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case mode&0o001 != 0:
		return true
	case !ok:
		return false
	case st.Uid == u.uid:
		return mode&0o100 != 0
	case st.Gid == u.gid:
		return mode&0o010 != 0
	}
	return false
}
