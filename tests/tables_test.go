package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgconvo/pgconvo/internal/apidocs"
)

// TestTablesFilesUpToDate holds each domain's sql/DOMAIN/tables.sql to the
// catalog of a freshly migrated database, and a domain without tables to
// no such file.
func TestTablesFilesUpToDate(t *testing.T) {
	t.Parallel()
	want, err := apidocs.GenerateTables(context.Background(), newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range apidocs.Domains {
		if text, ok := want[d]; ok {
			requireUpToDate(t, apidocs.TablesPath(d), text)
		} else if _, err := os.Stat(filepath.Join("..", apidocs.TablesPath(d))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists, but domain %s has no tables (run `%s`)", apidocs.TablesPath(d), d, apidocs.Command)
		}
	}
	if !strings.Contains(want["ledger"], "CREATE TABLE convo.tool_effects (") ||
		!strings.Contains(want["tree"], "ALTER TABLE convo.messages ADD CONSTRAINT") {
		t.Errorf("the ledger's or the tree's tables.sql lacks its tables or keys:\n%s", want["tree"])
	}
}

// TestDatabaseFromFilesMatchesMigrations builds a database from sql/'s
// files alone (each domain's tables.sql, the foreign keys last, then the
// object files, the triggers of package_triggers, and the hand-over and
// the grants a migration ends with)
// and compares it, object for object, with one the migrations built: the
// files are the whole current schema, not a summary of it.
func TestDatabaseFromFilesMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	migrated := stdlib.OpenDBFromPool(newDB(t))
	t.Cleanup(func() { migrated.Close() })
	_, url := newEmptyDB(t)
	built := newPool(t, url, pgx.QueryExecModeSimpleProtocol)
	conn, err := built.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	run := func(what, text string) error {
		_, err := conn.Exec(ctx, text, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	// The tables, every domain's before any foreign key.
	var keys []string
	for _, d := range apidocs.Domains {
		body, err := os.ReadFile(filepath.Join("..", apidocs.TablesPath(d)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		tables, fks, _ := strings.Cut(string(body), apidocs.ForeignKeysMarker)
		if err := run(apidocs.TablesPath(d), tables); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, fks)
	}
	for _, k := range keys {
		if err := run("the foreign keys", k); err != nil {
			t.Fatal(err)
		}
	}
	// The objects, functions with their bodies checked when they run (as
	// a migration's are); a SQL-standard body or a view that needs
	// another object is tried again once that one exists.
	if err := run("check_function_bodies", `SET check_function_bodies = off`); err != nil {
		t.Fatal(err)
	}
	for _, kinds := range [][]string{{"api", "private", "views"}} {
		var pending []string
		for _, kind := range kinds {
			paths, err := filepath.Glob(filepath.Join("..", "sql", "*", kind, "*.sql"))
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, paths...)
		}
		for len(pending) > 0 {
			var failed []string
			var last error
			for _, p := range pending {
				body, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := run(p, "BEGIN;\n"+string(body)+"\nCOMMIT;"); err != nil {
					_ = run("rollback", "ROLLBACK")
					failed, last = append(failed, p), err
				}
			}
			if len(failed) == len(pending) {
				t.Fatalf("%d object files do not apply to a database built from the files, first: %v", len(failed), last)
			}
			pending = failed
		}
	}
	if err := run("the triggers, the hand-over and the grants", `SELECT convo_private.create_triggers();
		SELECT convo_private.hand_over_objects(); SELECT convo_private.apply_grants();`); err != nil {
		t.Fatal(err)
	}
	fromFiles := stdlib.OpenDBFromPool(built)
	t.Cleanup(func() { fromFiles.Close() })
	if diff := diffSnapshots(snapshotPackage(t, migrated), snapshotPackage(t, fromFiles)); diff != "" {
		t.Fatalf("a database built from sql/'s files differs from the migrations' (run `%s`, or fix the files):\n%s",
			apidocs.Command, diff)
	}
}

// TestGuideTriggerTableUpToDate holds docs/guide.md's table of triggers to
// convo_private.package_triggers(), the list they are created from.
func TestGuideTriggerTableUpToDate(t *testing.T) {
	t.Parallel()
	table, err := apidocs.GenerateTriggerTable(context.Background(), newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join("..", apidocs.GuidePath))
	if err != nil {
		t.Fatal(err)
	}
	want, err := apidocs.SpliceTriggerTable(string(guide), table)
	if err != nil {
		t.Fatal(err)
	}
	requireUpToDate(t, apidocs.GuidePath, want)
	if !strings.Contains(table, "| `messages` | `messages_90_append_only` | BEFORE DELETE OR TRUNCATE, for each statement |") {
		t.Errorf("the table of triggers lacks messages_90_append_only:\n%s", table)
	}
}

// TestAPIGroupsAreDomains: each group of docs/api.md names exactly the
// functions and views whose files are in its domains' folders
// (sql/DOMAIN/api and views), so the reference's sections and sql/'s
// folders cannot drift apart.
func TestAPIGroupsAreDomains(t *testing.T) {
	t.Parallel()
	inGroup := map[string]string{}
	for _, g := range apidocs.Default().Groups {
		for _, name := range g.Names {
			inGroup[name] = g.Title
			found := false
			for _, d := range g.Domains {
				for _, kind := range []string{"api", "views"} {
					if _, err := os.Stat(filepath.Join("..", "sql", d, kind, name+".sql")); err == nil {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s (group %q) has no file in sql/%v/api or views", name, g.Title, g.Domains)
			}
		}
	}
	paths, err := filepath.Glob(filepath.Join("..", "sql", "*", "*", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		kind := filepath.Base(filepath.Dir(p))
		if kind != "api" && kind != "views" {
			continue
		}
		if name := strings.TrimSuffix(filepath.Base(p), ".sql"); inGroup[name] == "" {
			t.Errorf("%s is in no group of apidocs.Default()", p)
		}
	}
}
