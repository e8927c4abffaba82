package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MustExec runs sql and fails the test on error.
func MustExec(t testing.TB, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec %s: %v", sql, err)
	}
}

// QueryRow runs sql, which returns one row of one column, and returns that
// value; it fails the test on error or on no row.
func QueryRow[T any](t testing.TB, db *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("query %s: %v", sql, err)
	}
	return v
}

// QueryRows runs query, which returns one column, and returns its values.
func QueryRows[T any](t testing.TB, db *pgxpool.Pool, query string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	return out
}

// RequireSQLState fails the test unless err is a PostgreSQL error with
// SQLSTATE code.
func RequireSQLState(t testing.TB, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		t.Fatalf("want SQLSTATE %s, got no error", code)
	case !errors.As(err, &pgErr):
		t.Fatalf("want SQLSTATE %s, got a non-PostgreSQL error: %v", code, err)
	case pgErr.Code != code:
		t.Fatalf("want SQLSTATE %s, got %s: %v", code, pgErr.Code, err)
	}
}

// RequireCount fails the test unless query, a count(*) query, returns want.
func RequireCount(t testing.TB, db *pgxpool.Pool, want int64, query string, args ...any) {
	t.Helper()
	if got := QueryRow[int64](t, db, query, args...); got != want {
		t.Fatalf("want count %d, got %d from: %s", want, got, query)
	}
}

// RequireEqual fails unless got equals want, printing both.
func RequireEqual[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// SQLState returns err's SQLSTATE, or "" when err is not a PostgreSQL error.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// EnvCount is $name as a positive number, else def; anything else there
// fails the test. The long tests take their sizes from it.
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s %q: want a positive number", name, v)
		}
		return n
	}
	return def
}

// NewID returns a random version-4 UUID, for client-supplied ids.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux.
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// TextParts returns the parts of a message made of one text part.
func TextParts(text string) string {
	b, err := json.Marshal([]map[string]string{{"type": "text", "text": text}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Nullable turns "" into a NULL argument.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
