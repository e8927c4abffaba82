package localpg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinDir makes dir/<version>/bin holding the given programs as
// executable files and returns the bin directory.
func fakeBinDir(t *testing.T, root, version string, programs ...string) string {
	t.Helper()
	dir := filepath.Join(root, version, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFindBinaries: with nothing on PATH, the newest complete version under
// the Debian root wins (15 over 9.6, an incomplete 16 skipped); with none,
// the one clear message.
func TestFindBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no pg_config, no postgres
	root := t.TempDir()
	old := debianRoot
	debianRoot = root
	t.Cleanup(func() { debianRoot = old })

	if _, err := FindBinaries(); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("with no binaries: err = %v, want ErrNoBinaries", err)
	}
	if got := ErrNoBinaries.Error(); strings.Contains(got, "DATABASE_URL") {
		t.Fatalf("message = %q: it must not name a variable, each caller names its own", got)
	}

	fakeBinDir(t, root, "9.6", serverBinaries...)
	want := fakeBinDir(t, root, "15", serverBinaries...)
	fakeBinDir(t, root, "16", "initdb", "postgres") // no pg_ctl: not a server install
	got, err := FindBinaries()
	if err != nil || got != want {
		t.Fatalf("FindBinaries() = %q, %v; want %q", got, err, want)
	}
}
