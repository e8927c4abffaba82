package migrator

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestCheck feeds Check good and bad migration sets and requires it to name
// each problem.
func TestCheck(t *testing.T) {
	t.Parallel()
	files := func(names ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, n := range names {
			fsys[n] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		return fsys
	}
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		want string // "" means no error
	}{
		{"good", files("0001_a.up.sql", "0001_a.down.sql", "0002_b.up.sql", "0002_b.down.sql", "embed.go"), ""},
		{"empty", files(), "no migrations found"},
		{"gap", files("0001_a.up.sql", "0001_a.down.sql", "0003_c.up.sql", "0003_c.down.sql"), "version 2 is missing"},
		{"not from 1", files("0002_b.up.sql", "0002_b.down.sql"), "version 1 is missing"},
		{"duplicate", files("0001_a.up.sql", "0001_a.down.sql", "1_b.up.sql", "1_b.down.sql"), "version 1 is used by two names"},
		{"no down", files("0001_a.up.sql"), "version 1 (a) has no down file"},
		{"no up", files("0001_a.down.sql"), "version 1 (a) has no up file"},
		{"bad name", files("0001_a.up.sql", "0001_a.down.sql", "0002-b.up.sql"), "0002-b.up.sql: not named"},
		{"zero", files("0000_z.up.sql", "0000_z.down.sql", "0001_a.up.sql", "0001_a.down.sql"), "version 0 is not allowed"},
	} {
		err := Check(tc.fsys)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: want no error, got %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
