package localpg

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries says that no PostgreSQL server binaries were found. It
// names no way out: the CLI and the tests each point at their own database
// variable, after InstallHint.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (initdb, postgres and pg_ctl)")

// InstallHint says how to get the binaries, for a message about
// ErrNoBinaries to go on from.
const InstallHint = "install PostgreSQL (for example `apt-get install postgresql`)"

// serverBinaries are the programs localpg runs; a directory counts only if
// it has all of them.
var serverBinaries = []string{"initdb", "postgres", "pg_ctl"}

// debianRoot is where Debian's packages put each major version's binaries.
var debianRoot = "/usr/lib/postgresql"

// FindBinaries returns the directory holding initdb, postgres and pg_ctl. It
// asks `pg_config --bindir` first, then looks on PATH, then in
// /usr/lib/postgresql/<version>/bin, newest version first.
func FindBinaries() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	versions, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	sort.Slice(versions, func(i, j int) bool { return versionOf(versions[i]) > versionOf(versions[j]) })
	for _, dir := range versions {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

// hasServerBinaries reports whether dir holds every server program.
func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionOf reads the number out of /usr/lib/postgresql/<version>/bin, so
// that 15 sorts after 9.6.
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}
