package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The path read is the hot path: a chat UI reads it on every page load. These
// benchmarks time convo.path beside a baseline run in the same database and
// the same loop, a flat (conversation_id, seq) list holding the same
// messages, and report the ratio, so a noisy shared machine moves both sides
// alike. Run them with:
//
//	go test ./tests -run '^$' -bench . -benchtime 2000x
//
// naive/flat is a recursive walk up parent_id, for comparison with the
// branch-segment walk that convo.path_from does. app-path/app-flat is the
// read as the application runs it: a login member of convo_app, each read in
// a transaction that first sets the owner (SET LOCAL), beside the same
// transaction reading the flat list; the API function then also runs as the
// owner role and checks the owner once.

const benchSchema = `
CREATE SCHEMA bench;
CREATE TABLE bench.flat (
    conversation_id uuid NOT NULL,
    seq             int  NOT NULL,
    role            text NOT NULL,
    parts           jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, seq)
);`

const naivePath = `
WITH RECURSIVE up AS (
    SELECT m.id, m.parent_id, m.depth FROM convo.messages m
     WHERE m.conversation_id = $1
       AND m.id = (SELECT head_message_id FROM convo.conversations WHERE id = $1)
    UNION ALL
    SELECT p.id, p.parent_id, p.depth FROM up
      JOIN convo.messages p ON p.conversation_id = $1 AND p.id = up.parent_id
)
SELECT up.depth, up.id, m.role, m.parts, m.created_at
  FROM up JOIN convo.messages m ON m.conversation_id = $1 AND m.id = up.id
 ORDER BY up.depth`

// benchConversation builds a conversation whose live path has pathLen
// messages, with a branch (an edit and an abandoned reply) every branchEvery
// messages, and copies the live path into bench.flat. It returns the id.
func benchConversation(b *testing.B, db *pgxpool.Pool, pathLen, branchEvery int) string {
	b.Helper()
	ctx := context.Background()
	var conv string
	if err := db.QueryRow(ctx, `SELECT convo.create_conversation('bench', 'You are terse.')::text`).Scan(&conv); err != nil {
		b.Fatal(err)
	}
	text := `[{"type":"text","text":"` + fmt.Sprintf("%0200d", 0) + `"}]`
	for i := 1; i < pathLen; i++ {
		role := "user"
		if i%2 == 0 {
			role = "assistant"
		}
		var id string
		if err := db.QueryRow(ctx, `SELECT convo.append_message($1, $2, $3::jsonb)::text`, conv, role, text).Scan(&id); err != nil {
			b.Fatal(err)
		}
		if branchEvery > 0 && role == "user" && i%branchEvery == 1 {
			// An abandoned alternative: the old user turn gets a reply, then is edited.
			if _, err := db.Exec(ctx, `SELECT convo.append_message($1, 'assistant', $2::jsonb)`, conv, text); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(ctx, `SELECT convo.edit_and_resend($1, $2, $3::jsonb)`, conv, id, text); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO bench.flat (conversation_id, seq, role, parts)
		SELECT $1, p.depth, p.role, p.parts FROM convo.path($1) p`, conv); err != nil {
		b.Fatal(err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM convo.path($1)`, conv).Scan(&n); err != nil || n != pathLen {
		b.Fatalf("path has %d messages (err %v), want %d", n, err, pathLen)
	}
	if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return conv
}

// timeQuery runs query once and returns how long it took to read every row.
func timeQuery(b *testing.B, db *pgxpool.Pool, query string, args ...any) time.Duration {
	start := time.Now()
	rows, err := db.Query(context.Background(), query, args...)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// timeAsOwner runs query in a transaction that first sets the owner with
// SET LOCAL, as an application does, and returns how long the whole
// transaction took.
func timeAsOwner(b *testing.B, db *pgxpool.Pool, owner, query string, args ...any) time.Duration {
	start := time.Now()
	if err := asOwner(db, owner, query, args...); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func BenchmarkPathRead(b *testing.B) {
	for _, shape := range []struct {
		name                 string
		pathLen, branchEvery int
	}{
		{"linear-20", 20, 0},
		{"linear-200", 200, 0},
		{"branched-200", 200, 10},
	} {
		b.Run(shape.name, func(b *testing.B) {
			db := newDB(b)
			if _, err := db.Exec(context.Background(), benchSchema); err != nil {
				b.Fatal(err)
			}
			conv := benchConversation(b, db, shape.pathLen, shape.branchEvery)
			web := loginAs(b, db, "convo_app")
			if _, err := db.Exec(context.Background(), `GRANT USAGE ON SCHEMA bench TO convo_app;
				GRANT SELECT ON bench.flat TO convo_app`); err != nil {
				b.Fatal(err)
			}
			const flat = `SELECT seq, role, parts, created_at FROM bench.flat WHERE conversation_id = $1 ORDER BY seq`
			const path = `SELECT * FROM convo.path($1)`
			var tFlat, tPath, tNaive, tAppFlat, tAppPath time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tFlat += timeQuery(b, db, flat, conv)
				tPath += timeQuery(b, db, path, conv)
				tNaive += timeQuery(b, db, naivePath, conv)
				tAppFlat += timeAsOwner(b, web, "bench", flat, conv)
				tAppPath += timeAsOwner(b, web, "bench", path, conv)
			}
			b.ReportMetric(float64(tPath)/float64(tFlat), "path/flat")
			b.ReportMetric(float64(tAppPath)/float64(tAppFlat), "app-path/app-flat")
			b.ReportMetric(float64(tNaive)/float64(tFlat), "naive/flat")
			b.ReportMetric(float64(tPath.Microseconds())/float64(b.N), "path-µs/op")
			b.ReportMetric(float64(tFlat.Microseconds())/float64(b.N), "flat-µs/op")
		})
	}
}

// BenchmarkAppend times append_message (tree placement, part checks, head
// move and head-log row in one call) beside a plain INSERT into the flat list.
func BenchmarkAppend(b *testing.B) {
	db := newDB(b)
	ctx := context.Background()
	if _, err := db.Exec(ctx, benchSchema); err != nil {
		b.Fatal(err)
	}
	var conv string
	if err := db.QueryRow(ctx, `SELECT convo.create_conversation('bench', 'You are terse.')::text`).Scan(&conv); err != nil {
		b.Fatal(err)
	}
	text := `[{"type":"text","text":"` + fmt.Sprintf("%0200d", 0) + `"}]`
	var tFlat, tAppend time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := db.Exec(ctx, `INSERT INTO bench.flat (conversation_id, seq, role, parts) VALUES ($1, $2, 'user', $3::jsonb)`, conv, i, text); err != nil {
			b.Fatal(err)
		}
		tFlat += time.Since(start)
		start = time.Now()
		if _, err := db.Exec(ctx, `SELECT convo.append_message($1, 'user', $2::jsonb)`, conv, text); err != nil {
			b.Fatal(err)
		}
		tAppend += time.Since(start)
	}
	b.ReportMetric(float64(tAppend)/float64(tFlat), "append/insert")
}
