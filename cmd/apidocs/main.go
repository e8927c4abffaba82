// Command apidocs rewrites docs/api.md, docs/schema.md, the table of
// triggers in docs/guide.md and each domain's sql/DOMAIN/tables.sql from
// the catalog:
//
//	go run ./cmd/apidocs                      # writes docs/api.md, docs/schema.md and the tables.sql files
//	go run ./cmd/apidocs -o FILE -schema FILE # writes those instead ("-" for stdout)
//	go run ./cmd/apidocs -tables=false        # leaves the tables.sql files alone
//
// It starts a throwaway PostgreSQL server (internal/localpg, as the tests
// do), migrates its database to the latest version, reads every function and
// view of schema convo, and every table and view of convo and convo_private,
// from the catalog (internal/apidocs) and writes the files; the server is then stopped and removed. The output depends only on
// the migrations, so a run on an unchanged tree rewrites the same bytes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/internal/apidocs"
	"github.com/pgconvo/pgconvo/internal/localpg"
	"github.com/pgconvo/pgconvo/migrator"
)

func main() {
	out := flag.String("o", apidocs.APIPath, `the API reference to write ("-" for standard output)`)
	schema := flag.String("schema", apidocs.SchemaPath, `the schema reference to write ("-" for standard output)`)
	writeTables = flag.Bool("tables", true, "also write each domain's sql/DOMAIN/tables.sql")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "apidocs: takes no arguments, got %v\nusage: go run ./cmd/apidocs [-o FILE] [-schema FILE]\n", flag.Args())
		os.Exit(2)
	}
	if err := run(context.Background(), *out, *schema); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

// writeTables is -tables.
var writeTables *bool

func run(ctx context.Context, out, schemaOut string) (err error) {
	srv, err := localpg.StartEphemeral(ctx, localpg.Options{MaxConnections: 20})
	if err != nil {
		if errors.Is(err, localpg.ErrNoBinaries) {
			return fmt.Errorf("%w: %s", err, localpg.InstallHint)
		}
		return err
	}
	defer func() {
		if stopErr := srv.Stop(); err == nil {
			err = stopErr
		}
	}()
	url := srv.URL("postgres")
	m, err := migrator.Open(url)
	if err != nil {
		return err
	}
	if err := m.Up(ctx); err != nil {
		m.Close()
		return fmt.Errorf("migrating: %w", err)
	}
	if err := m.Close(); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	text, err := apidocs.Generate(ctx, conn)
	if err != nil {
		return err
	}
	if missing, err := apidocs.Uncommented(ctx, conn); err != nil {
		return err
	} else if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "apidocs: without a COMMENT ON (add one in its object file): %v\n", missing)
	}
	schema, err := apidocs.GenerateSchema(ctx, conn)
	if err != nil {
		return err
	}
	tables, err := apidocs.GenerateTables(ctx, conn)
	if err != nil {
		return err
	}
	if err := write(out, text); err != nil {
		return err
	}
	if err := write(schemaOut, schema); err != nil {
		return err
	}
	triggers, err := apidocs.GenerateTriggerTable(ctx, conn)
	if err != nil {
		return err
	}
	guide, err := os.ReadFile(apidocs.GuidePath)
	if err != nil {
		return err
	}
	spliced, err := apidocs.SpliceTriggerTable(string(guide), triggers)
	if err != nil {
		return err
	}
	if err := write(apidocs.GuidePath, spliced); err != nil {
		return err
	}
	if !*writeTables {
		return nil
	}
	for _, d := range apidocs.Domains {
		if text, ok := tables[d]; ok {
			if err := write(apidocs.TablesPath(d), text); err != nil {
				return err
			}
		} else if err := os.Remove(apidocs.TablesPath(d)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// write puts text in the file named out, or on standard output for "-".
func write(out, text string) error {
	if out == "-" {
		_, err := os.Stdout.WriteString(text)
		return err
	}
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", out) // standard output may be the other document
	return nil
}
