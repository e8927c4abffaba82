package apidocs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Domains are sql/'s folders, in the order a database is built from them;
// TableDomains places each table of convo and convo_private in one.
// GenerateTables fails naming a table none holds.
var Domains = []string{"access", "tree", "sidebar", "search", "generations", "ledger", "receipts", "imports", "erasure", "operations"}

// TableDomains is the domain of each table, and of each composite type.
var TableDomains = map[string]string{
	"convo.conversations":          "tree",
	"convo.messages":               "tree",
	"convo.conversation_head_log":  "tree",
	"convo.live_path":              "tree",
	"convo.keyed_parts":            "tree",
	"convo_private.owner_holds":    "tree",
	"convo.conversation_changes":   "sidebar",
	"convo.generations":            "generations",
	"convo.tools":                  "ledger",
	"convo.effect_transitions":     "ledger",
	"convo.tool_effects":           "ledger",
	"convo.tool_effect_calls":      "ledger",
	"convo.tool_effect_events":     "ledger",
	"convo.tool_receipts":          "receipts",
	"convo.imports":                "imports",
	"convo.import_origins":         "imports",
	"convo.erasures":               "erasure",
	"convo.erasure_places":         "erasure",
	"convo.owner_erasures":         "erasure",
	"convo_private.digest_key":     "erasure",
	"convo_private.settings":       "operations",
	"convo_private.message_search": "search",
	"convo_private.new_message":    "tree",
}

// TablesPath is a domain's tables.sql, from the repository's root.
func TablesPath(domain string) string { return filepath.Join("sql", domain, "tables.sql") }

// ForeignKeysMarker opens the part of a tables.sql that adds its tables'
// foreign keys: a database built from the files runs every file's part
// above it first, since the keys cross domains (and cycles: a conversation
// names its head message, a message its conversation).
const ForeignKeysMarker = "-- Foreign keys, added once every domain's tables exist."

// GenerateTables returns the text of each domain's tables.sql, by domain
// (none for a domain without tables),
// for the database behind db: its tables as the migrations leave them
// (columns, keys, constraints, indexes, row-level security and policies,
// comments), printed as SQL from the catalog, the foreign keys last;
// access's holds the two schemas, which are created first. Grants come from
// convo_private.apply_grants and triggers from their object files, so
// neither is here.
func GenerateTables(ctx context.Context, db Beginner) (map[string]string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog, pg_temp`); err != nil {
		return nil, err
	}
	rels, err := readRelations(ctx, tx)
	if err != nil {
		return nil, err
	}
	type part struct{ body, keys []string }
	parts := map[string]*part{}
	for _, d := range Domains {
		parts[d] = &part{}
	}
	schemas, err := strings1(ctx, tx, `
		SELECT format('CREATE SCHEMA %I;', n.nspname)
		       || coalesce(format(E'\nCOMMENT ON SCHEMA %I IS %L;', n.nspname, obj_description(n.oid, 'pg_namespace')), '')
		  FROM pg_namespace n WHERE n.nspname IN ('convo', 'convo_private') ORDER BY n.nspname = 'convo_private'`)
	if err != nil {
		return nil, err
	}
	parts["access"].body = append(parts["access"].body, strings.Join(schemas, "\n\n"))
	types, err := compositeTypes(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, ty := range types {
		domain := TableDomains[ty.name]
		if parts[domain] == nil {
			return nil, fmt.Errorf("type %s is in no domain of apidocs.Domains: place it in apidocs.TableDomains", ty.name)
		}
		parts[domain].body = append(parts[domain].body, ty.text)
	}
	for _, rel := range rels {
		if rel.kind != "table" {
			continue
		}
		qualified := rel.schema + "." + rel.name
		domain := TableDomains[qualified]
		if parts[domain] == nil {
			return nil, fmt.Errorf("table %s is in no domain of apidocs.Domains: place it in apidocs.TableDomains", qualified)
		}
		body, keys, err := tableText(ctx, tx, qualified)
		if err != nil {
			return nil, fmt.Errorf("describing %s: %w", qualified, err)
		}
		parts[domain].body = append(parts[domain].body, body)
		if keys != "" {
			parts[domain].keys = append(parts[domain].keys, keys)
		}
	}
	out := map[string]string{}
	for _, d := range Domains {
		p := parts[d]
		if len(p.body) == 0 {
			continue
		}
		var b strings.Builder
		what := "the tables of the " + d + " domain"
		if d == "access" {
			what = "the two schemas, created before any domain's tables,"
		}
		fmt.Fprintf(&b, "-- %s: %s as the migrations (sql/migrations) leave them, read from\n"+
			"-- the catalog of a freshly migrated database. Do not edit: change a table in a new migration, then\n"+
			"-- run `%s`, which rewrites this file; a test fails when it is stale, and another builds a database\n"+
			"-- from these files and the object files and compares it with the migrations'. Grants come from\n"+
			"-- convo_private.apply_grants, triggers from their files in triggers/.\n", TablesPath(d), what, Command)
		for _, s := range p.body {
			b.WriteString("\n" + s + "\n")
		}
		if len(p.keys) > 0 {
			b.WriteString("\n" + ForeignKeysMarker + "\n")
			for _, s := range p.keys {
				b.WriteString("\n" + s + "\n")
			}
		}
		out[d] = b.String()
	}
	return out, nil
}

// compositeTypes reads the composite types of convo and convo_private (a
// CREATE TYPE ... AS and its comment each), by name.
func compositeTypes(ctx context.Context, tx pgx.Tx) ([]struct{ name, text string }, error) {
	rows, err := tx.Query(ctx, `
		SELECT c.oid::regclass::text,
		       format(E'CREATE TYPE %s AS (\n    %s\n);', c.oid::regclass,
		              (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod), E',\n    '
		                                 ORDER BY a.attnum)
		                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
		       || coalesce(format(E'\nCOMMENT ON TYPE %s IS %L;', c.oid::regclass, obj_description(c.reltype, 'pg_type')), '')
		  FROM pg_class c
		 WHERE c.relnamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace) AND c.relkind = 'c'
		 ORDER BY c.relname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("reading composite types: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{ name, text string }, error) {
		var t struct{ name, text string }
		err := r.Scan(&t.name, &t.text)
		return t, err
	})
}

// tableText prints one table: its CREATE TABLE with every constraint but
// the foreign keys, then its indexes, row-level security, policies and
// comments; and apart, its foreign keys with their comments.
func tableText(ctx context.Context, tx pgx.Tx, qualified string) (body, keys string, err error) {
	columns, err := strings1(ctx, tx, `
		SELECT quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
		       || CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
		                             WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
		       || CASE WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid, true) || ') STORED'
		               WHEN d.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid, true) ELSE '' END
		       || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
		  FROM pg_attribute a
		  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		 WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		 ORDER BY a.attnum`, qualified)
	if err != nil {
		return "", "", err
	}
	constraints, err := strings1(ctx, tx, `
		SELECT 'CONSTRAINT ' || quote_ident(k.conname) || ' ' || pg_get_constraintdef(k.oid, true)
		  FROM pg_constraint k
		 WHERE k.conrelid = $1::regclass AND k.contype <> 'f'
		 ORDER BY position(k.contype IN 'pucxt'), k.conname COLLATE "C"`, qualified)
	if err != nil {
		return "", "", err
	}
	after, err := strings1(ctx, tx, `
		SELECT s FROM (
		    `+indexesAndRowSecurity+`
		    UNION ALL
		    SELECT 4, '', format('COMMENT ON TABLE %s IS %L;', $1::text, obj_description($1::regclass, 'pg_class'))
		     WHERE obj_description($1::regclass, 'pg_class') IS NOT NULL
		    UNION ALL
		    SELECT 5, lpad(a.attnum::text, 5, '0'),
		           format('COMMENT ON COLUMN %s.%I IS %L;', $1, a.attname, col_description(a.attrelid, a.attnum))
		      FROM pg_attribute a
		     WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		       AND col_description(a.attrelid, a.attnum) IS NOT NULL
		    UNION ALL
		    SELECT 6, k.conname COLLATE "C", format('COMMENT ON CONSTRAINT %I ON %s IS %L;', k.conname, $1, d.description)
		      FROM pg_constraint k JOIN pg_description d ON d.objoid = k.oid AND d.classoid = 'pg_constraint'::regclass
		     WHERE k.conrelid = $1::regclass AND k.contype <> 'f'
		    UNION ALL
		    SELECT 7, i.indexrelid::regclass::text COLLATE "C",
		           format('COMMENT ON INDEX %s IS %L;', i.indexrelid::regclass, obj_description(i.indexrelid, 'pg_class'))
		      FROM pg_index i WHERE i.indrelid = $1::regclass AND obj_description(i.indexrelid, 'pg_class') IS NOT NULL
		) x ORDER BY x.o, x.k`, qualified)
	if err != nil {
		return "", "", err
	}
	foreign, err := strings1(ctx, tx, `
		SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s;', $1::text, k.conname, pg_get_constraintdef(k.oid, true))
		       || coalesce(format(E'\nCOMMENT ON CONSTRAINT %I ON %s IS %L;', k.conname, $1,
		                          obj_description(k.oid, 'pg_constraint')), '')
		  FROM pg_constraint k
		 WHERE k.conrelid = $1::regclass AND k.contype = 'f'
		 ORDER BY k.conname COLLATE "C"`, qualified)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n    %s\n);\n", qualified, strings.Join(append(columns, constraints...), ",\n    "))
	if len(after) > 0 {
		b.WriteString(strings.Join(after, "\n") + "\n")
	}
	return strings.TrimRight(b.String(), "\n"), strings.Join(foreign, "\n"), nil
}

// GuidePath is docs/guide.md, whose table of triggers GenerateTriggerTable
// writes between TriggersBegin and TriggersEnd.
const (
	GuidePath     = "docs/guide.md"
	TriggersBegin = "<!-- The triggers, written from convo_private.package_triggers() by `go run ./cmd/apidocs`: do not edit. -->"
	TriggersEnd   = "<!-- End of the triggers. -->"
)

// GenerateTriggerTable returns the Markdown table of every trigger of the
// package, as convo_private.package_triggers() lists them (the list they
// are created from), markers included.
func GenerateTriggerTable(ctx context.Context, db Beginner) (string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	rows, err := strings1(ctx, tx, `
		SELECT format('| `+"`%s`"+` | `+"`%s`"+` | %s %s, for each %s | `+"`%s`"+` | %s | %s |',
		              t.table_name, t.trigger_name, t.timing, t.events, lower(t.level), t.function_call,
		              CASE WHEN t.when_clause IS NULL THEN 'always'
		                   WHEN t.when_clause = '%s' THEN 'outside pgconvo''s code'
		                   ELSE replace(format(t.when_clause, 'outside pgconvo''s code'), '|', '\|') END,
		              t.guards)
		  FROM convo_private.package_triggers() t`)
	if err != nil {
		return "", err
	}
	return TriggersBegin + "\n\n| table | trigger | fires | runs | when | guards |\n|---|---|---|---|---|---|\n" +
		strings.Join(rows, "\n") + "\n\n" + TriggersEnd, nil
}

// SpliceTriggerTable puts table between the markers of doc, or fails when
// doc lacks them.
func SpliceTriggerTable(doc, table string) (string, error) {
	i, j := strings.Index(doc, TriggersBegin), strings.Index(doc, TriggersEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("%s lacks the markers %q and %q", GuidePath, TriggersBegin, TriggersEnd)
	}
	return doc[:i] + table + doc[j+len(TriggersEnd):], nil
}
