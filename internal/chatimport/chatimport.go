// Package chatimport imports a whole ChatGPT, Open WebUI or LibreChat
// export into pgconvo, as `go run ./cmd/migrate import-chatgpt` (and
// import-openwebui, import-librechat) does: it streams the export one
// conversation at a time and hands each to convo.import_history in a
// transaction of its own, as the application runs it (SET LOCAL
// convo.owner_id first). The mapping, the ids and what counts as a repeat
// are the SQL functions'; this package only reads files and reports what
// the database says it did.
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
	Where  string `json:"where"`  // the JSON file and the conversation's 0-based index in it: conversations.json[3]
	Code   string `json:"code"`   // the SQLSTATE
	Error  string `json:"error"`  // the message
	Detail string `json:"detail"` // the DETAIL: ids only, the source's and the conversation's where the database could read them
	Hint   string `json:"hint,omitempty"`
}

// Conversation is what the database did with one conversation of the
// export, as convo.import_history returns it.
type Conversation struct {
	Where     string `json:"where"`
	SourceKey string `json:"source_key"`      // the export's own id (or sha: and its keyed digest)
	ID        string `json:"conversation_id"` // pgconvo's id
	Created   bool   `json:"created"`         // false: it was there already, and nothing was written
	Messages  int64  `json:"messages"`
	NodesKept int64  `json:"nodes_kept"` // message-less source nodes kept verbatim
	Title     string `json:"title,omitempty"`
}

// Summary is what a run did.
type Summary struct {
	Role          string         `json:"role"`  // the login role
	Owner         string         `json:"owner"` // the owner imported for
	Imported      int            `json:"imported"`
	Present       int            `json:"already_present"` // repeats: nothing written
	Messages      int64          `json:"messages"`        // messages written now
	Dropped       int64          `json:"nodes_kept"`      // message-less source nodes written now
	Conversations []Conversation `json:"conversations"`   // in the order met
	Refused       []Refusal      `json:"refused"`         // in the order met
	Elapsed       time.Duration  `json:"-"`
	Seconds       float64        `json:"seconds"`
}

// Total is how many conversations the run met.
func (s *Summary) Total() int { return s.Imported + s.Present + len(s.Refused) }

// importSQL imports one conversation ($1 the format, $2 the owner, $3 the
// conversation) and says what it did.
const importSQL = `SELECT conversation_id::text, coalesce(source_key, ''), created, messages, nodes_kept, coalesce(title, '')
                     FROM convo.import_history($1, $2, $3::jsonb)`

// formats are the formats import_history takes.
var formats = map[string]bool{"chatgpt": true, "openwebui": true, "librechat": true}

// Run imports the export opt names through conn, one conversation per
// transaction. A conversation the database refuses is rolled back, listed in
// the summary and skipped; the error is for what stops the run (a file that
// cannot be read or is not JSON, a lost connection), with the summary so far.
// A file that is empty or in another format (Detect, on its first
// conversation) is a *FileError, with no summary when nothing was imported.
func Run(ctx context.Context, conn *pgx.Conn, opt Options) (*Summary, error) {
	if !formats[opt.Format] {
		return nil, fmt.Errorf("unknown format %q", opt.Format)
	}
	const function = "convo.import_history(text, text, jsonb)"
	sum := &Summary{Owner: opt.Owner, Conversations: []Conversation{}, Refused: []Refusal{}}
	var callable bool
	err := conn.QueryRow(ctx, `SELECT current_user::text,
	                                  CASE WHEN (SELECT has_schema_privilege(n.oid, 'USAGE') FROM pg_namespace n WHERE n.nspname = 'convo')
	                                       THEN coalesce(has_function_privilege(to_regprocedure($1), 'EXECUTE'), false)
	                                       ELSE false END`, function).Scan(&sum.Role, &callable)
	if err != nil {
		return nil, err
	}
	if !callable {
		return nil, fmt.Errorf("role %s cannot call %s: connect as the application's login role, a member of convo_app, "+
			"on a database migrated by `go run ./cmd/migrate up`", sum.Role, function)
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
	defer func() { sum.Elapsed = time.Since(start); sum.Seconds = sum.Elapsed.Seconds() }()
	for _, f := range files {
		r, err := f.open()
		if err != nil {
			return sum, err
		}
		err = Each(bar.reader(r), func(i int, raw json.RawMessage) error {
			// A file in another format is refused whole, before its first
			// conversation is sent: each would be refused alike.
			if found := Detect(raw); i == 0 && found != "" && found != opt.Format {
				return &FileError{Path: f.path, Format: opt.Format, Found: found}
			}
			err := importOne(ctx, conn, opt.Format, opt.Owner, raw, sum, fmt.Sprintf("%s[%d]", f.name, i))
			bar.done(sum.Imported+sum.Present, len(sum.Refused))
			return err
		})
		r.Close()
		if errors.Is(err, ErrEmpty) {
			err = &FileError{Path: f.path, Format: opt.Format}
		}
		var fe *FileError
		switch {
		case errors.As(err, &fe) && sum.Total() == 0:
			bar.finish()
			return nil, err // nothing was imported: no summary to print
		case errors.As(err, &fe):
			bar.finish()
			return sum, err
		case err != nil:
			bar.finish()
			return sum, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	bar.finish()
	return sum, nil
}

// importOne imports one conversation in a transaction of its own and
// records what the database did. Only a failure that is not the database
// refusing this conversation is returned.
func importOne(ctx context.Context, conn *pgx.Conn, format, owner string, raw json.RawMessage, sum *Summary, where string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	refused := func(err error) error {
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || ctx.Err() != nil || conn.IsClosed() {
			return err
		}
		sum.Refused = append(sum.Refused, Refusal{Where: where, Code: pg.Code, Error: pg.Message, Detail: pg.Detail, Hint: pg.Hint})
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('convo.owner_id', $1, true)`, owner); err != nil {
		return err
	}
	c := Conversation{Where: where}
	if err := tx.QueryRow(ctx, importSQL, format, owner, raw).Scan(&c.ID, &c.SourceKey, &c.Created, &c.Messages,
		&c.NodesKept, &c.Title); err != nil {
		return refused(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return refused(err) // a deferred constraint, or a serialization failure
	}
	sum.Conversations = append(sum.Conversations, c)
	if c.Created {
		sum.Imported++
		sum.Messages += c.Messages
		sum.Dropped += c.NodesKept
	} else {
		sum.Present++
	}
	return nil
}

// Print writes the summary: the counts; each conversation, the export's id
// to pgconvo's; then each refused one with its place, SQLSTATE, DETAIL and
// HINT. The rate is printed for a run of a second or more.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "imported %d, already present %d, refused %d, of %s (owner %s, as role %s)\n",
		s.Imported, s.Present, len(s.Refused), plural(s.Total(), "conversation"), s.Owner, s.Role)
	fmt.Fprintf(w, "messages %d, message-less nodes kept verbatim %d\n", s.Messages, s.Dropped)
	if secs := s.Elapsed.Seconds(); secs >= 1 {
		fmt.Fprintf(w, "%.1f s: %.0f conversations/s, %.0f messages/s\n",
			secs, float64(s.Total())/secs, float64(s.Messages)/secs)
	} else {
		fmt.Fprintf(w, "%.1f s\n", secs)
	}
	if len(s.Conversations) > 0 {
		fmt.Fprintln(w, "source id -> pgconvo conversation id:")
	}
	for _, c := range s.Conversations {
		what := "already present, nothing written"
		if c.Created {
			what = "imported, " + plural(int(c.Messages), "message")
		}
		fmt.Fprintf(w, "  %s %s -> %s (%s)\n", c.Where, orNone(c.SourceKey), c.ID, what)
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "refused %s: %s %s\n  DETAIL: %s\n", r.Where, r.Code, r.Error, orNone(r.Detail))
		if r.Hint != "" {
			fmt.Fprintf(w, "  HINT: %s\n", r.Hint)
		}
	}
}

// PrintJSON writes the summary as one JSON object.
func (s *Summary) PrintJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
