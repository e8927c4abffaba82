package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// database is the database a command works on, and where it came from.
type database struct {
	// url is the URL to connect with.
	url string
	// arg is the -database argument that repeats this choice in a command
	// to paste, spelled for the shell; empty for the local server.
	arg string
	// from says where url came from: "-database" or "DATABASE_URL".
	from string
	// local is the local server, when that is the database.
	local *localpg.Persistent
}

// chooseDatabase picks the database: the flag, else $DATABASE_URL, else
// the local server, which it starts if it is stopped. Only a verb that
// migrates (create: up and goto) makes a new local server; any other has
// nothing to read or change on an empty one, so it says how to make one
// instead of running initdb.
func chooseDatabase(ctx context.Context, flagURL string, create bool) (*database, error) {
	db := &database{url: flagURL, from: "-database", arg: shellQuote(maskURL(flagURL))}
	if db.url == "" {
		db.url, db.from, db.arg = os.Getenv("DATABASE_URL"), "DATABASE_URL", `"$DATABASE_URL"`
	}
	if db.url != "" {
		if !strings.HasPrefix(db.url, "postgres://") && !strings.HasPrefix(db.url, "postgresql://") {
			return nil, fmt.Errorf("the database URL (%s) must start with postgres:// or postgresql://", db.from)
		}
		if _, err := pgx.ParseConfig(db.url); err != nil {
			return nil, fmt.Errorf("the database URL (%s) does not parse: fix it (postgres://USER@HOST:PORT/DATABASE)", db.from)
		}
		return db, nil
	}
	if !create && !localpg.HasPersistent(localDir) {
		return nil, fmt.Errorf("there is no local server under %s/ yet: `%s up` makes one and installs pgconvo, "+
			"or give a database with -database or DATABASE_URL", localDir, command)
	}
	local, err := localpg.EnsurePersistent(ctx, localDir)
	if err != nil {
		return nil, localServerError(err)
	}
	return &database{url: local.URL, local: local}, nil
}

// localServerError says why there is no local server, and what to do.
func localServerError(err error) error {
	if errors.Is(err, localpg.ErrNoBinaries) {
		return fmt.Errorf("%w: %s, or give a database with -database or DATABASE_URL", err, localpg.InstallHint)
	}
	return fmt.Errorf("starting the local server (give -database or DATABASE_URL to use another database): %w", err)
}

// command returns the command line that repeats this choice of database
// with verb, for a message to paste from.
func (db *database) command(verb string) string {
	if db.arg == "" {
		return command + " " + verb
	}
	return command + " -database " + db.arg + " " + verb
}

// describe names the database for the first line of output: its URL with
// any password masked, and where the choice came from.
func (db *database) describe() string {
	switch {
	case db.local == nil:
		return fmt.Sprintf("%s (from %s)", maskURL(db.url), db.from)
	case db.local.Started:
		return fmt.Sprintf("%s (the local server in %s/, started now for this command; "+
			"`%s stop` stops it)", db.url, localDir, command)
	default:
		return fmt.Sprintf("%s (the local server in %s/)", db.url, localDir)
	}
}

// openDB opens db for database/sql and checks that it answers; a failure
// says what to do (connectError).
func openDB(ctx context.Context, db *database) (*sql.DB, error) {
	conn, err := sql.Open("pgx", db.url)
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return nil, connectError(db, err)
	}
	return conn, nil
}

// connect opens one pgx connection to db; a failure says what to do.
func connect(ctx context.Context, db *database) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return nil, connectError(db, err)
	}
	return conn, nil
}

// connectError turns a failed connection into one line that names the
// server and says what to do: start the server (for the local one, how),
// create the database, or fix the URL.
func connectError(db *database, err error) error {
	cfg, perr := pgx.ParseConfig(db.url)
	if perr != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		server = fmt.Sprintf("the socket in %s, port %d", cfg.Host, cfg.Port)
	}
	from := db.from
	if from == "" {
		from = "the local server's URL"
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return fmt.Errorf("database %q does not exist on %s: create it (`createdb %s`, or CREATE DATABASE %s; as a superuser "+
			"or a role with CREATEDB), or fix the database name in the URL (%s)",
			cfg.Database, server, shellQuote(cfg.Database), sqlIdent(cfg.Database), from)
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return fmt.Errorf("%s refused user %q (%s, SQLSTATE %s): fix the user or password in the URL (%s)",
			server, cfg.User, pgErr.Message, pgErr.Code, from)
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) && strings.HasPrefix(cfg.Host, "/"):
		if isLocalServer(cfg) {
			return fmt.Errorf("nothing answers at %s: that is the local server in %s/, and it is stopped: "+
				"`%s up` starts it (or run without -database and DATABASE_URL, which starts it too)", server, localDir, command)
		}
		return fmt.Errorf("nothing answers at %s (connection refused): start PostgreSQL there, or fix the host and port in the URL (%s)",
			server, from)
	case errors.As(err, &pgErr):
		return fmt.Errorf("connecting to %s: %s (SQLSTATE %s)", server, pgErr.Message, pgErr.Code)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("the host %q of the URL (%s) does not resolve: fix it", cfg.Host, from)
	}
	return fmt.Errorf("connecting to %s: %s: check that PostgreSQL runs there and the URL (%s)", server, oneLine(err), from)
}

// isLocalServer reports whether cfg points at the port of the local server
// under .pgconvo/ (as recorded there, or in the directory it links to).
func isLocalServer(cfg *pgx.ConnConfig) bool {
	if cfg.Host != "127.0.0.1" && cfg.Host != "localhost" && cfg.Host != "::1" {
		return false
	}
	for _, p := range []string{filepath.Join(localDir, "port"), filepath.Join(localDir, "server", "port")} {
		body, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if port, err := strconv.Atoi(strings.TrimSpace(string(body))); err == nil && port == int(cfg.Port) {
			return true
		}
	}
	return false
}

// oneLine joins the lines of err's message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// maskURL returns rawURL with its password, in the user part or a
// password= parameter, replaced by xxxxx.
func maskURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if q := u.Query(); q.Get("password") != "" {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	if password, _ := u.User.Password(); password != "" {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// shellQuote quotes s for a POSIX shell; "" stays "".
func shellQuote(s string) string {
	if s == "" {
		return ""
	}
	if simpleWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// simpleWord matches a word the shell reads as written.
var simpleWord = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// plainIdent matches an SQL identifier that needs no quotes.
var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// sqlIdent spells name as an SQL identifier, quoted only when it must be.
func sqlIdent(name string) string {
	if plainIdent.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}
