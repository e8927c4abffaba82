package migrator

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered migration and whether the database has it.
type Migration struct {
	// Version is the number in the file name, 1 for 0001_tree.up.sql.
	Version uint
	// Name is the part of the file name after the number, "tree" for
	// 0001_tree.up.sql.
	Name string
	// Applied reports whether the database is at this version or past it.
	Applied bool
	// Dirty reports whether this migration started but did not finish.
	Dirty bool
}

// fileRe matches golang-migrate file names: NNNN_name.up.sql or .down.sql.
var fileRe = regexp.MustCompile(`^([0-9]+)_([A-Za-z0-9_]+)\.(up|down)\.sql$`)

// migrationFile is one parsed migration file name.
type migrationFile struct {
	version   uint
	name      string
	direction string
	file      string
}

// List returns the migrations found at the root of fsys, in version order,
// after checking them with Check. Applied is always false.
func List(fsys fs.FS) ([]Migration, error) {
	if err := Check(fsys); err != nil {
		return nil, err
	}
	files, err := parseFiles(fsys)
	if err != nil {
		return nil, err
	}
	seen := map[uint]bool{}
	var out []Migration
	for _, f := range files {
		if !seen[f.version] {
			seen[f.version] = true
			out = append(out, Migration{Version: f.version, Name: f.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Check verifies the migration set at the root of fsys without touching a
// database: every .sql file is named NNNN_name.up.sql or NNNN_name.down.sql,
// versions run from 1 without gaps, no version is used by two names, and
// every version has both an up and a down file. It reports every problem it
// finds, not only the first.
func Check(fsys fs.FS) error {
	files, err := parseFiles(fsys)
	if err != nil {
		return err
	}
	var problems []string
	names := map[uint]string{}
	dirs := map[uint]map[string]bool{}
	for _, f := range files {
		if f.direction == "" {
			problems = append(problems, fmt.Sprintf("%s: not named NNNN_name.up.sql or NNNN_name.down.sql", f.file))
			continue
		}
		if f.version == 0 {
			problems = append(problems, fmt.Sprintf("%s: version 0 is not allowed, numbering starts at 1", f.file))
			continue
		}
		if prev, ok := names[f.version]; ok && prev != f.name {
			problems = append(problems, fmt.Sprintf("version %d is used by two names: %q and %q", f.version, prev, f.name))
			continue
		}
		names[f.version] = f.name
		if dirs[f.version] == nil {
			dirs[f.version] = map[string]bool{}
		}
		dirs[f.version][f.direction] = true
	}
	if len(names) == 0 && len(problems) == 0 {
		problems = append(problems, "no migrations found")
	}
	for v := uint(1); v <= uint(len(names)); v++ {
		if _, ok := names[v]; !ok {
			problems = append(problems, fmt.Sprintf("version %d is missing: versions must run from 1 without gaps", v))
		}
	}
	for v, name := range names {
		if v > uint(len(names)) {
			problems = append(problems, fmt.Sprintf("version %d (%s) is beyond %d: versions must run from 1 without gaps", v, name, len(names)))
		}
		for _, d := range []string{"up", "down"} {
			if !dirs[v][d] {
				problems = append(problems, fmt.Sprintf("version %d (%s) has no %s file", v, name, d))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.New("bad migration set:\n  " + strings.Join(problems, "\n  "))
	}
	return nil
}

// parseFiles reads the .sql file names at the root of fsys. A file whose name
// does not parse is returned with no direction so that Check can report it.
func parseFiles(fsys fs.FS) ([]migrationFile, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("reading migration directory: %w", err)
	}
	var files []migrationFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m := fileRe.FindStringSubmatch(e.Name())
		if m == nil {
			files = append(files, migrationFile{file: e.Name()})
			continue
		}
		v, err := strconv.ParseUint(m[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parsing version of %s: %w", e.Name(), err)
		}
		files = append(files, migrationFile{version: uint(v), name: m[2], direction: m[3], file: e.Name()})
	}
	return files, nil
}
