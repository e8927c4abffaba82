package migrator

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// packageRoles are the cluster-wide roles 0003_trust creates when missing.
var packageRoles = []string{"convo_owner", "convo_app", "convo_reader", "convo_admin"}

// Need is one privilege a migration needs and the migrating role lacks.
type Need struct {
	// What is the privilege ("CREATEROLE"), Why the migration that needs
	// it and for what.
	What, Why string
	// Grant is the statement a superuser can run to give it ("ALTER ROLE
	// m CREATEROLE"); Instead, when there is none, what to do.
	Grant, Instead string
}

// PrivilegeError is a migration run refused before it started because the
// migrating role lacks what a pending migration needs.
type PrivilegeError struct {
	Role    string
	Missing []Need
}

// Error names, on one line, what is missing and why, and what to do: the
// statements a role that may grant it can run.
func (e *PrivilegeError) Error() string {
	var lacks, grants, instead []string
	for _, n := range e.Missing {
		lacks = append(lacks, n.What+" ("+n.Why+")")
		if n.Grant != "" {
			grants = append(grants, n.Grant)
		}
		if n.Instead != "" {
			instead = append(instead, n.Instead)
		}
	}
	list := lacks[0]
	if len(lacks) > 1 {
		list = strings.Join(lacks[:len(lacks)-1], ", ") + " and " + lacks[len(lacks)-1]
	}
	// Not "a superuser" alone: a managed server has none to migrate as.
	fix := "migrate as a role that has " + pronoun(len(lacks)) + " (the role that installed pgconvo, a superuser, " +
		"or a managed server's administrative role)"
	if len(grants) > 0 {
		fix += ", or have one of those run " + strings.Join(grants, "; ") + " and migrate again"
		for _, g := range grants {
			if strings.HasPrefix(g, "GRANT convo_owner TO ") {
				fix += " (then REVOKE convo_owner FROM " + ident(e.Role) + ")"
			}
		}
	}
	if len(instead) > 0 {
		fix += "; or " + strings.Join(instead, "; or ")
	}
	return fmt.Sprintf("role %s lacks %s: %s", ident(e.Role), list, fix)
}

// pronoun is "it" for one missing privilege, "them" for more.
func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// rolePrivileges is what the catalog says the connected role may do, as
// far as the migrations care.
type rolePrivileges struct {
	role, database              string
	super, createRole           bool
	createOnDB, grantCreateOnDB bool
	missingRoles                []string
	ownerMember, ownerCreates   bool
	createOnSchema              bool
	historyReadWrite            bool
	convoOwner                  string // the owner of schema convo, "" when there is none
	ownsConvo                   bool
}

// readPrivileges reads rolePrivileges for the connected role; h is the
// history it read (the table's schema and whether it exists).
func readPrivileges(ctx context.Context, db *sql.DB, h *History) (*rolePrivileges, error) {
	p := &rolePrivileges{}
	var missing string
	err := db.QueryRowContext(ctx, `
		SELECT current_user::text, current_database()::text, r.rolsuper, r.rolcreaterole,
		       has_database_privilege(current_database(), 'CREATE'),
		       has_database_privilege(current_database(), 'CREATE WITH GRANT OPTION'),
		       coalesce((SELECT string_agg(x, ',' ORDER BY o) FROM unnest($1::text[]) WITH ORDINALITY AS u (x, o)
		                  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = x)), ''),
		       CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'convo_owner')
		            THEN pg_has_role('convo_owner', 'MEMBER') ELSE false END,
		       CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'convo_owner')
		            THEN has_database_privilege('convo_owner', current_database(), 'CREATE') ELSE false END,
		       CASE WHEN $2::text = '' THEN false ELSE has_schema_privilege($2::text, 'CREATE') END,
		       CASE WHEN NOT $3::boolean THEN false
		            ELSE has_table_privilege(format('%I.%I', $2::text, $4::text), 'SELECT')
		             AND has_table_privilege(format('%I.%I', $2::text, $4::text), 'INSERT')
		             AND has_table_privilege(format('%I.%I', $2::text, $4::text), 'TRUNCATE') END,
		       coalesce((SELECT pg_get_userbyid(n.nspowner)::text FROM pg_namespace n WHERE n.nspname = 'convo'), ''),
		       coalesce((SELECT pg_has_role(n.nspowner, 'USAGE') FROM pg_namespace n WHERE n.nspname = 'convo'), false)
		  FROM pg_roles r WHERE r.rolname = current_user`,
		packageRoles, h.Schema, h.Exists, historyTable).
		Scan(&p.role, &p.database, &p.super, &p.createRole, &p.createOnDB, &p.grantCreateOnDB, &missing,
			&p.ownerMember, &p.ownerCreates, &p.createOnSchema, &p.historyReadWrite, &p.convoOwner, &p.ownsConvo)
	if err != nil {
		return nil, fmt.Errorf("reading the migrating role's privileges: %w", err)
	}
	if missing != "" {
		p.missingRoles = strings.Split(missing, ",")
	}
	return p, nil
}

// CheckPrivileges fails with a *PrivilegeError, before anything is run,
// unless the connected role may run every migration between h.Version
// (what the database has, as ReadHistory read it) and version to, up or
// down, and keep the history: a migration refused half way leaves the
// database dirty, so this asks the catalog first. It mirrors what the
// migrations do: 0001_tree creates schema convo (CREATE on the database);
// 0003_trust creates the package's roles when missing (CREATEROLE), grants
// CREATE on the database to convo_owner (the grant option, which the
// database's owner has) and hands schema convo to it (its ownership); and
// every migration from 0003 on, up or down, acts as convo_owner (membership,
// or CREATEROLE to grant it for the migration's transaction). A superuser
// may do all of it.
func CheckPrivileges(ctx context.Context, db *sql.DB, h *History, to uint) error {
	from := h.Version
	if from == to && h.Exists {
		return nil
	}
	p, err := readPrivileges(ctx, db, h)
	if err != nil {
		return err
	}
	if p.super {
		return nil
	}
	role, dbName := ident(p.role), ident(p.database)
	lo, hi := min(from, to), max(from, to) // the migrations run are lo+1 .. hi
	runs := func(v uint) bool { return lo < v && v <= hi }
	up := to > from
	var missing []Need

	switch {
	case h.Schema == "" && !h.Exists:
		missing = append(missing, Need{What: "a schema to keep the migration history in",
			Why:   "the search path names no schema that exists",
			Grant: fmt.Sprintf("ALTER ROLE %s SET search_path = public", role)})
	case !h.Exists && !p.createOnSchema:
		missing = append(missing, Need{What: "CREATE on schema " + ident(h.Schema),
			Why:   "the migration history, " + h.Table + ", is created there",
			Grant: fmt.Sprintf("GRANT CREATE ON SCHEMA %s TO %s", ident(h.Schema), role)})
	case h.Exists && !p.historyReadWrite:
		missing = append(missing, Need{What: "SELECT, INSERT and TRUNCATE on " + h.Table,
			Why:   "the migration history is kept there",
			Grant: fmt.Sprintf("GRANT SELECT, INSERT, TRUNCATE ON %s TO %s", h.Table, role)})
	}
	if up && runs(1) && !p.createOnDB {
		missing = append(missing, Need{What: "CREATE on database " + dbName,
			Why:   "0001_tree creates schema convo",
			Grant: fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s", dbName, role)})
	}
	actsAsOwner := hi >= 3 && lo < hi // up or down, a migration from 0003 on runs
	if up && runs(3) && len(p.missingRoles) > 0 && !p.createRole {
		missing = append(missing, Need{What: "CREATEROLE",
			Why: fmt.Sprintf("0003_trust creates the roles %s, and every migration from it on acts as convo_owner",
				strings.Join(p.missingRoles, ", ")),
			Grant: fmt.Sprintf("ALTER ROLE %s CREATEROLE", role)})
	} else if actsAsOwner && !p.ownerMember && !p.createRole {
		missing = append(missing, Need{What: "CREATEROLE or membership in convo_owner",
			Why:   "every migration from 0003 on, up or down, acts as convo_owner",
			Grant: fmt.Sprintf("GRANT convo_owner TO %s", role)})
	}
	if up && runs(3) && !p.ownerCreates && !p.grantCreateOnDB {
		missing = append(missing, Need{What: "CREATE on database " + dbName + " with the grant option",
			Why:   "0003_trust grants CREATE on it to convo_owner",
			Grant: fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s WITH GRANT OPTION", dbName, role)})
		// One grant gives both CREATE and its grant option.
		for i, n := range missing {
			if n.Grant == fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s", dbName, role) {
				missing[i].Grant = ""
			}
		}
	}
	if up && runs(3) && !runs(1) && p.convoOwner != "" && !p.ownsConvo {
		missing = append(missing, Need{What: "ownership of schema convo",
			Why:     "0003_trust hands it to convo_owner, and " + ident(p.convoOwner) + " owns it",
			Instead: "migrate as " + ident(p.convoOwner) + ", the role that applied 0001 and 0002"})
	}
	if len(missing) > 0 {
		return &PrivilegeError{Role: p.role, Missing: missing}
	}
	return nil
}

// simpleIdent matches an identifier SQL reads as written, unquoted.
var simpleIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ident spells name as an SQL identifier: as it is when it needs no
// quotes, double-quoted otherwise.
func ident(name string) string {
	if simpleIdent.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// actAs makes the rest of tx run as role, the way every migration from 0003
// on acts as convo_owner: a member switches to it (SET LOCAL ROLE); a role
// that is not one but may grant it to itself (CREATEROLE) becomes a member
// first, for tx only, so the caller must roll tx back. It reports false,
// having changed nothing, when the connected role may do neither.
func actAs(ctx context.Context, tx *sql.Tx, role string) (bool, error) {
	setRole := `SELECT set_config('role', $1, true)`
	try := func(stmts ...string) (bool, error) {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT act_as`); err != nil {
			return false, err
		}
		for _, s := range stmts {
			var err error
			if s == setRole {
				_, err = tx.ExecContext(ctx, s, role)
			} else {
				_, err = tx.ExecContext(ctx, s)
			}
			if isInsufficientPrivilege(err) {
				_, err = tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT act_as`)
				return false, err
			}
			if err != nil {
				return false, err
			}
		}
		_, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT act_as`)
		return err == nil, err
	}
	if ok, err := try(setRole); ok || err != nil {
		return ok, err
	}
	return try(`GRANT `+ident(role)+` TO CURRENT_USER`, setRole)
}

// isInsufficientPrivilege reports whether err is PostgreSQL's 42501.
func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}
