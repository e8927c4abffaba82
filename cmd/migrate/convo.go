package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgconvo/pgconvo/internal/chatimport"
)

// uuidRe matches a conversation id.
var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// exportConversation prints convo.export_conversation(ID) on standard
// output and nothing else: the database line goes to standard error. With
// -owner it reads as that owner (SET LOCAL convo.owner_id, in a read-only
// transaction), as an application login must.
func exportConversation(ctx context.Context, o options, args []string) error {
	id, err := oneArg("export", "the conversation ID", args)
	if err != nil {
		return err
	}
	if !uuidRe.MatchString(id) {
		return usagef("export", "export: ID must be a conversation id (a uuid), got %q", id)
	}
	db, err := chooseDatabase(ctx, o.dbURL, false)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "database:", db.describe())
	conn, err := connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var doc string
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if o.owner != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, o.owner); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT convo.export_conversation($1::uuid)::text`, id).Scan(&doc)
	})
	if err != nil {
		return sqlError("export", conn.Config().User, o.owner, err)
	}
	if _, err := fmt.Fprintln(os.Stdout, doc); err != nil {
		return fmt.Errorf("writing the export: %w", err)
	}
	return nil
}

// exportHead is what restore reads of a document before sending it.
type exportHead struct {
	Conversation *struct {
		ID      any `json:"id"`
		OwnerID any `json:"owner_id"`
	} `json:"conversation"`
}

// restoreConversation hands the document in FILE to
// convo.import_conversation, as a DBA (a member of convo_admin): the owner
// is the document's, and -owner, when given, must be the same one.
func restoreConversation(ctx context.Context, o options, args []string) error {
	path, err := oneArg("restore", "the FILE export wrote", args)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// What restore reads is what export writes: say so, and name the verb
	// for an export of another product, before connecting.
	wrote := fmt.Sprintf("give the file `%s export ID` wrote", command)
	format, err := chatimport.DetectFile(bytes.NewReader(body))
	switch {
	case errors.Is(err, chatimport.ErrEmpty):
		return fmt.Errorf("restore: %s is empty (0 bytes, or only whitespace): %s", path, wrote)
	case err == nil && format != "" && format != "pgconvo":
		return fmt.Errorf("restore: %s is %s, not a pgconvo export: import it with `%s -owner OWNER %s %s`",
			path, chatimport.Name(format), command, chatimport.Verb(format), shellQuote(path))
	}
	var top any
	if err := json.Unmarshal(body, &top); err != nil {
		return fmt.Errorf("restore: %s is not a JSON object (%v): %s", path, err, wrote)
	}
	if kind := jsonKind(top); kind != "object" {
		return fmt.Errorf("restore: %s is a JSON %s, not a pgconvo export (a JSON object): %s", path, kind, wrote)
	}
	var head exportHead
	if err := json.Unmarshal(body, &head); err != nil {
		return fmt.Errorf("restore: %s is not a pgconvo export (its \"conversation\" is not an object): %s", path, wrote)
	}
	owner := o.owner
	if owner == "" {
		s, ok := "", false
		if head.Conversation != nil {
			s, ok = head.Conversation.OwnerID.(string)
		}
		if !ok || s == "" {
			return fmt.Errorf("restore: %s names no owner (no conversation.owner_id): give the file `%s export ID` wrote, "+
				"or -owner OWNER", path, command)
		}
		owner = s
	}
	db, err := chooseDatabase(ctx, o.dbURL, false)
	if err != nil {
		return err
	}
	fmt.Println("database:", db.describe())
	conn, err := connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var id string
	written := true
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT convo.import_conversation($1, $2::jsonb)::text`, owner, string(body)).Scan(&id); err != nil {
			return err
		}
		// A repeat writes nothing, and so no record of a restore in this
		// transaction (since its start, now()). Asked in a savepoint, so
		// that a role that may not read the record still restores (and
		// is told "restored").
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if err := sp.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM convo.imports
			WHERE conversation_id = $1::uuid AND format = 'pgconvo' AND import_id IS NULL AND imported_at >= now())`,
			id).Scan(&written); err != nil {
			written = true
			return sp.Rollback(ctx)
		}
		return sp.Commit(ctx)
	})
	if err != nil {
		return sqlError("restore", conn.Config().User, owner, err)
	}
	if written {
		fmt.Printf("restored conversation %s for owner %s\n", id, owner)
	} else {
		fmt.Printf("conversation %s of owner %s is here already, as the document has it: nothing was written\n", id, owner)
	}
	return nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "object"
}

// sqlError is a refused export or restore as one line: PostgreSQL's
// message and DETAIL, the SQLSTATE, and what to do.
func sqlError(verb, role, owner string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %s", verb, oneLine(err))
	}
	msg := pgErr.Message
	if pgErr.Detail != "" && !strings.Contains(msg, strings.TrimPrefix(pgErr.Detail, "conversation ")) {
		msg += " (" + pgErr.Detail + ")"
	}
	next := ""
	switch {
	case pgErr.Code == "CV002" && owner == "":
		next = "check the ID, and give -owner OWNER, its owner: an application login sees only the owner it names"
	case pgErr.Code == "CV002":
		next = "check the ID and the owner (-owner " + owner + ")"
	case pgErr.Code == "42501" && verb == "export":
		next = fmt.Sprintf("export as a login member of convo_app (with -owner OWNER) or of convo_reader; have the DBA run GRANT convo_reader TO %s", role)
	case pgErr.Code == "42501":
		next = fmt.Sprintf("restore as a login member of convo_admin; have the DBA run GRANT convo_admin TO %s; nothing was written", role)
	case pgErr.Code == "CV011" && verb == "restore":
		next = "the document was refused, nothing was written"
		if pgErr.Hint != "" {
			next += "; " + strings.TrimSuffix(pgErr.Hint, ".")
		}
	case pgErr.Code == "3F000" || pgErr.Code == "42883":
		next = "this database is not migrated far enough: migrate it up first"
	case verb == "restore":
		next = "nothing was written"
		if pgErr.Hint != "" {
			next += "; " + strings.TrimSuffix(pgErr.Hint, ".")
		}
	}
	out := fmt.Sprintf("%s: %s (SQLSTATE %s)", verb, msg, pgErr.Code)
	if next != "" {
		out += ": " + next
	}
	return errors.New(strings.Join(strings.Fields(out), " "))
}
