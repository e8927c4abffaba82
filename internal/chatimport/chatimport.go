// Package chatimport imports a whole ChatGPT or Open WebUI export into
// pgconvo, as `go run ./cmd/migrate import-chatgpt|import-openwebui` does
// (import-mapping.md §6): it streams the export one conversation at a time
// and hands each to convo.import_chatgpt or convo.import_openwebui in a
// transaction of its own, as the application runs them (SET LOCAL
// convo.owner_id first). The mapping is the SQL functions'; this package
// only reads files, counts and reports.
package chatimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options say what to import.
type Options struct {
	Format   string    // "chatgpt", "openwebui" or "librechat"
	Owner    string    // the owner the conversations are imported for
	Path     string    // the export: a JSON file; for chatgpt also a directory or a .zip of shards
	Progress io.Writer // where to draw a progress bar (a terminal), or nil
}

// Refusal is a conversation the database refused; nothing of it was written.
type Refusal struct {
	Where  string // the JSON file and the conversation's 0-based index in it: conversations.json[3]
	Code   string // the SQLSTATE
	Error  string // the message
	Detail string // the DETAIL: ids only, the source's and the conversation's where the database could read them
}

// Summary is what a run did.
type Summary struct {
	Role, Owner string    // the login role and the owner imported for
	Imported    int       // conversations written now
	Present     int       // conversations the owner had already (a repeat import: nothing written)
	Refused     []Refusal // in the order met
	Messages    int64     // messages written now (each with its source node, verbatim, in import_origins)
	Dropped     int64     // message-less source nodes written now, verbatim, in metadata.import.dropped_nodes
	Elapsed     time.Duration
}

// Conversations is how many conversations the run met.
func (s *Summary) Conversations() int { return s.Imported + s.Present + len(s.Refused) }

// statements is the SQL of one format: the import function, and run, which
// imports one conversation ($1 the owner, $2 the conversation) and counts
// what it holds. The ids and the repeat rules stay the function's own: a
// repeat is told afterwards, from the head log (importOne).
type statements struct{ function, run string }

var formats = map[string]statements{
	"chatgpt": {
		function: "convo.import_chatgpt(text, jsonb)",
		run: `SELECT convo.import_chatgpt($1, x.c)::text, n.messages, n.dropped
		        FROM (SELECT $2::jsonb AS c) x,
		             LATERAL (SELECT count(*) FILTER (WHERE jsonb_typeof(e.node -> 'message') = 'object') AS messages,
		                             count(*) FILTER (WHERE jsonb_typeof(e.node -> 'message') IS DISTINCT FROM 'object') AS dropped
		                        FROM jsonb_each(CASE WHEN jsonb_typeof(x.c -> 'mapping') = 'object' THEN x.c -> 'mapping' END)
		                             AS e (key, node)) n`,
	},
	"openwebui": {
		function: "convo.import_openwebui(text, jsonb)",
		run: `SELECT convo.import_openwebui($1, x.c)::text, n.messages, 0::bigint
		        FROM (SELECT $2::jsonb AS c) x,
		             LATERAL (SELECT (CASE WHEN jsonb_typeof(x.c -> 'chat') = 'object' THEN x.c -> 'chat' ELSE x.c END)
		                             -> 'history' -> 'messages' AS m) h,
		             LATERAL (SELECT count(*) AS messages
		                        FROM jsonb_each(CASE WHEN jsonb_typeof(h.m) = 'object' THEN h.m END)) n`,
	},
	// A LibreChat export is one conversation (an array of them is read
	// too); a recursive one nests the replies in children, which jsonpath
	// counts in place.
	"librechat": {
		function: "convo.import_librechat(text, jsonb)",
		run: `SELECT convo.import_librechat($1, x.c)::text,
		             CASE WHEN jsonb_typeof(x.c -> 'messages') <> 'array' THEN 0
		                  WHEN x.c -> 'recursive' = 'true'
		                  THEN jsonb_array_length(jsonb_path_query_array(x.c -> 'messages',
		                           'strict $.**?(@.type() == "object" && exists(@.messageId)).messageId'))
		                  ELSE jsonb_array_length(x.c -> 'messages') END::bigint,
		             0::bigint
		        FROM (SELECT $2::jsonb AS c) x`,
	},
}

// Run imports the export opt names through conn, one conversation per
// transaction. A conversation the database refuses is rolled back, listed in
// the summary and skipped; the error is for what stops the run (a file that
// cannot be read or is not JSON, a lost connection), with the summary so far.
func Run(ctx context.Context, conn *pgx.Conn, opt Options) (*Summary, error) {
	st, ok := formats[opt.Format]
	if !ok {
		return nil, fmt.Errorf("unknown format %q", opt.Format)
	}
	sum := &Summary{Owner: opt.Owner}
	var callable bool
	err := conn.QueryRow(ctx, `SELECT current_user::text,
	                                  CASE WHEN (SELECT has_schema_privilege(n.oid, 'USAGE') FROM pg_namespace n WHERE n.nspname = 'convo')
	                                       THEN coalesce(has_function_privilege(to_regprocedure($1), 'EXECUTE'), false)
	                                       ELSE false END`, st.function).Scan(&sum.Role, &callable)
	if err != nil {
		return nil, err
	}
	if !callable {
		return nil, fmt.Errorf("role %s cannot call %s: connect as the application's login role, a member of convo_app, "+
			"on a database migrated by `go run ./cmd/migrate up`", sum.Role, st.function)
	}
	files, closer, err := texts(opt.Format, opt.Path)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		defer closer.Close()
	}
	bar := newProgress(opt.Progress, files)
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	for _, f := range files {
		r, err := f.open()
		if err != nil {
			return sum, err
		}
		err = Each(bar.reader(r), func(i int, raw json.RawMessage) error {
			err := importOne(ctx, conn, st, opt.Owner, raw, sum, fmt.Sprintf("%s[%d]", f.name, i))
			bar.done(sum.Conversations())
			return err
		})
		r.Close()
		if err != nil {
			bar.finish()
			return sum, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	bar.finish()
	return sum, nil
}

// importOne imports one conversation in a transaction of its own and
// counts it. Only a failure that is not the database refusing this
// conversation is returned.
func importOne(ctx context.Context, conn *pgx.Conn, st statements, owner string, raw json.RawMessage, sum *Summary, where string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	ref := Refusal{Where: where}
	refused := func(err error) error {
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || ctx.Err() != nil || conn.IsClosed() {
			return err
		}
		ref.Code, ref.Error, ref.Detail = pg.Code, pg.Message, pg.Detail
		sum.Refused = append(sum.Refused, ref)
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
		return err
	}
	var id string
	var messages, dropped int64
	if err := tx.QueryRow(ctx, st.run, owner, raw).Scan(&id, &messages, &dropped); err != nil {
		return refused(err)
	}
	// A repeat returns the id of a conversation the owner had already: its
	// head log began before this transaction did (now()). A first import's
	// head-log row is this transaction's. (A conversation with no message
	// has no head log: a repeat of one counts as imported.)
	var present bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM convo.head_history($1) h WHERE h.moved_at < now())`,
		id).Scan(&present); err != nil {
		return refused(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return refused(err) // a deferred constraint, or a serialization failure
	}
	if present {
		sum.Present++
	} else {
		sum.Imported++
		sum.Messages += messages
		sum.Dropped += dropped
	}
	return nil
}

// Print writes the summary: the counts, then each refused conversation with
// its place, ids, SQLSTATE and DETAIL.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "imported %d, already present %d, refused %d, of %d conversations (owner %s, as role %s)\n",
		s.Imported, s.Present, len(s.Refused), s.Conversations(), s.Owner, s.Role)
	fmt.Fprintf(w, "messages %d, message-less nodes kept verbatim %d\n", s.Messages, s.Dropped)
	if secs := s.Elapsed.Seconds(); secs > 0 {
		fmt.Fprintf(w, "%.1f s: %.0f conversations/s, %.0f messages/s\n",
			secs, float64(s.Conversations())/secs, float64(s.Messages)/secs)
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "refused %s: %s %s\n  DETAIL: %s\n", r.Where, r.Code, r.Error, orNone(r.Detail))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
