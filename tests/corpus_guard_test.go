package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordingTB stands in for a test in TestRequireCorpus: it records what
// requireCorpus did (skip, fail, or neither) instead of ending a test.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

// stop is what recordingTB panics with to leave requireCorpus, as Skip and
// Fatal leave a test.
type stop struct{}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Skip(args ...any)          { r.skipped = fmt.Sprint(args...); panic(stop{}) }
func (r *recordingTB) Fatal(args ...any)         { r.failed = fmt.Sprint(args...); panic(stop{}) }
func (r *recordingTB) Fatalf(f string, a ...any) { r.Fatal(fmt.Sprintf(f, a...)) }

// TestRequireCorpus: a missing corpus skips with one line naming it and why
// it is not here; with CI set the same line fails instead; a corpus in place
// lets the test go on.
func TestRequireCorpus(t *testing.T) {
	dir := t.TempDir()
	present := corpus{dir, "a folder that is there"}
	absent := corpus{filepath.Join(dir, "nowhere"), "a folder that is not"}
	call := func(ci string, c ...corpus) *recordingTB {
		t.Setenv(ciEnv, ci)
		r := &recordingTB{TB: t}
		func() {
			defer func() {
				if p := recover(); p != nil {
					if _, ok := p.(stop); !ok {
						panic(p)
					}
				}
			}()
			requireCorpus(r, c...)
		}()
		return r
	}
	want := absent.shown() + " is not beside this clone (a folder that is not)"

	for _, ci := range []string{"", "0", "false"} {
		r := call(ci, present, absent)
		if r.skipped != "skipping: "+want || r.failed != "" {
			t.Errorf("CI=%q, a corpus missing: skipped %q, failed %q; want a skip with %q", ci, r.skipped, r.failed, want)
		}
		if strings.Contains(r.skipped, "\n") {
			t.Errorf("the skip is more than one line: %q", r.skipped)
		}
	}
	for _, ci := range []string{"true", "1"} {
		r := call(ci, absent)
		if r.failed != "failing (CI is set): "+want || r.skipped != "" {
			t.Errorf("CI=%q, a corpus missing: skipped %q, failed %q; want a failure with %q", ci, r.skipped, r.failed, want)
		}
	}
	if r := call("true", present); r.skipped != "" || r.failed != "" {
		t.Errorf("a corpus in place: skipped %q, failed %q; want neither", r.skipped, r.failed)
	}
	if _, err := os.Stat(absent.path); err == nil {
		t.Fatal("the absent corpus exists")
	}
}
