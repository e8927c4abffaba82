package migrator

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// Distribution is where a database stands with Citus.
type Distribution struct {
	// Citus is true when the citus extension is installed in the database.
	Citus bool
	// Distributed is true when pgconvo's tables are distributed (Distribute).
	Distributed bool
	// Workers counts the active primary nodes other than the coordinator.
	Workers int
}

// String says it in a line, for `migrate status`.
func (d Distribution) String() string {
	switch {
	case !d.Citus:
		return "one server (no Citus)"
	case !d.Distributed:
		return fmt.Sprintf("Citus installed, %d worker(s), not distributed: run `migrate distribute`", d.Workers)
	default:
		return fmt.Sprintf("distributed over %d Citus worker(s)", d.Workers)
	}
}

// querier is what the distribution checks read through: a *sql.DB, a
// *sql.Conn or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReadDistribution tells whether db has Citus and whether pgconvo's tables
// are distributed. It only reads.
func ReadDistribution(ctx context.Context, db querier) (Distribution, error) {
	var d Distribution
	err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&d.Citus)
	if err != nil || !d.Citus {
		return d, err
	}
	err = db.QueryRowContext(ctx, `
		SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('convo.conversations')),
		       (SELECT count(*) FROM pg_dist_node WHERE isactive AND noderole = 'primary' AND groupid <> 0)`).
		Scan(&d.Distributed, &d.Workers)
	if err != nil {
		return d, fmt.Errorf("reading the Citus metadata: %w", err)
	}
	return d, nil
}

// Distribution reads where the Migrator's database stands with Citus.
func (g *Migrator) Distribution(ctx context.Context) (Distribution, error) {
	return ReadDistribution(ctx, g.db)
}

// pgconvoRoles are the roles every node needs before anything of
// pgconvo's is distributed: Citus creates objects on the workers owned by
// them and connects there as the caller, whose memberships must hold there.
var pgconvoRoles = []struct{ name, options string }{
	{"convo_owner", "NOLOGIN"},
	{"convo_app", "NOLOGIN"},
	{"convo_reader", "NOLOGIN"},
	{"convo_admin", "NOLOGIN IN ROLE convo_app, convo_reader"},
}

// DistributeError is a database that cannot be distributed as it is, with
// what to do first.
type DistributeError struct{ Reason string }

func (e *DistributeError) Error() string {
	return "distribute refused, nothing was changed: " + e.Reason
}

// Distribute spreads a migrated pgconvo database over its Citus cluster:
// the four roles on every node, the tables distributed (a conversation's
// rows on the node of its id, an owner's receipts and their erasure records
// on the node of the owner, the allowlist and the state machine on every
// node), every function on every node, and the API routed (convo_node,
// sql/citus): each call that names a conversation handed whole to the node
// that holds it, as the caller. Notifications are turned off on every
// node. It must run on the coordinator, with the workers added, at the
// latest version, as a superuser or a member of convo_owner; it switches to
// no role. Run again, it changes only what a later migration left unrouted.
// The foreign keys Citus cannot keep are returned (none, with pgconvo's
// tables as they are).
func Distribute(ctx context.Context, db *sql.DB) ([]string, error) {
	d, err := ReadDistribution(ctx, db)
	if err != nil {
		return nil, err
	}
	if !d.Citus {
		return nil, &DistributeError{"the citus extension is not installed in this database: " +
			"CREATE EXTENSION citus on the coordinator and every worker, and add the workers (citus_add_node), first"}
	}
	if d.Workers == 0 {
		return nil, &DistributeError{"this coordinator has no worker: add them first (SELECT citus_add_node('host', port))"}
	}
	latest, err := Latest()
	if err != nil {
		return nil, err
	}
	h, err := ReadHistory(ctx, db)
	if err != nil {
		return nil, err
	}
	if h.Version != latest || h.Dirty {
		return nil, &DistributeError{fmt.Sprintf("the database is at version %d%s, not %d: run `migrate up` first",
			h.Version, map[bool]string{true: " (dirty)"}[h.Dirty], latest)}
	}
	var may bool
	if err := db.QueryRowContext(ctx, `SELECT pg_has_role(current_user, 'convo_owner', 'USAGE')
		OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&may); err != nil {
		return nil, err
	}
	if !may {
		return nil, &DistributeError{"the connected role is neither a superuser nor a member of convo_owner, " +
			"which owns the tables it distributes: GRANT convo_owner TO the role first (and revoke it after)"}
	}
	if err := createRolesOnWorkers(ctx, db); err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // Committed below on success.
	if err := prepareDistributedTx(ctx, tx); err != nil {
		return nil, err
	}
	if err := installNode(ctx, tx); err != nil {
		return nil, err
	}
	var unkept []string
	if !d.Distributed {
		rows, err := tx.QueryContext(ctx, `SELECT * FROM convo_node.distribute_tables()`)
		if err != nil {
			return nil, fmt.Errorf("distributing the tables: %w", err)
		}
		for rows.Next() {
			var fk string
			if err := rows.Scan(&fk); err != nil {
				rows.Close()
				return nil, err
			}
			unkept = append(unkept, fk)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("distributing the tables: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("distributing the tables: %w", err)
		}
	}
	if err := routeAPI(ctx, tx); err != nil {
		return nil, err
	}
	var dbname string
	if err := tx.QueryRowContext(ctx, `SELECT current_database()`).Scan(&dbname); err != nil {
		return nil, err
	}
	// The application's SET LOCAL convo.owner_id reaches the node a call
	// runs on only with this.
	if _, err := tx.ExecContext(ctx, `ALTER DATABASE `+ident(dbname)+` SET citus.propagate_set_commands = 'local'`); err != nil {
		return nil, fmt.Errorf("setting citus.propagate_set_commands: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("distributing: %w", err)
	}
	// No notifications: a NOTIFY cannot take part in the two-phase commit
	// of a transaction that wrote on two nodes, and one sent on a worker
	// reaches only that worker's listeners (docs/scaling.md).
	notifyOff := `ALTER DATABASE ` + ident(dbname) + ` SET convo.notify = off`
	if _, err := db.ExecContext(ctx, notifyOff); err != nil {
		return nil, fmt.Errorf("turning notifications off: %w", err)
	}
	if err := onEveryWorker(ctx, db, notifyOff); err != nil {
		return nil, fmt.Errorf("turning notifications off: %w", err)
	}
	return unkept, nil
}

// prepareDistributedTx makes tx fit for changing a distributed schema:
// Citus runs the shards' changes one connection at a time (several
// statements of one transaction over many connections otherwise deadlock
// or fail), and lets the guards (triggers) be distributed with their
// tables.
func prepareDistributedTx(ctx context.Context, tx *sql.Tx) error {
	for _, s := range []string{
		`SET LOCAL citus.multi_shard_modify_mode = 'sequential'`,
		`SET LOCAL citus.enable_unsafe_triggers = on`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// retiredNodeFunctions are the functions of earlier versions of sql/citus
// that installNode drops: node_keys before it named only conversations'
// nodes, and register_tool's per-node calls before a worker's copy of the
// allowlist could only follow the coordinator's.
var retiredNodeFunctions = []string{
	"convo_node.register_tool_on_node_delegated(uuid, text[], boolean[], jsonb[], text[], interval[], text[], text[])",
	"convo_node.register_tool_on_node(uuid, text, boolean, jsonb, text, interval, text, text)",
	"convo_node.register_tool_here(text, boolean, jsonb, text, interval, text, text)",
	"convo_node.node_keys(regclass)",
}

// installNode installs schema convo_node and its functions from
// sql/citus, as the migrating role, with convo_owner owning them and
// nobody else allowed to run them.
func installNode(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS convo_node AUTHORIZATION convo_owner`); err != nil {
		return fmt.Errorf("creating schema convo_node: %w", err)
	}
	// Functions of earlier sql/citus files that are gone or changed their
	// result: a copy left behind would still be callable.
	for _, f := range retiredNodeFunctions {
		if _, err := tx.ExecContext(ctx, `DROP FUNCTION IF EXISTS `+f); err != nil {
			return fmt.Errorf("dropping %s: %w", f, err)
		}
	}
	// The files go in by name; a function is checked when it runs.
	if _, err := tx.ExecContext(ctx, `SET LOCAL check_function_bodies = off`); err != nil {
		return err
	}
	names, err := fs.Glob(pgconvosql.Citus, "citus/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(pgconvosql.Citus, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	_, err = tx.ExecContext(ctx, `DO $$ DECLARE f regprocedure; BEGIN
		     FOR f IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'convo_node'::regnamespace
		                 AND p.proowner <> 'convo_owner'::regrole LOOP
		         EXECUTE format('ALTER FUNCTION %s OWNER TO convo_owner', f);
		         EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
		     END LOOP; END $$`)
	if err != nil {
		return fmt.Errorf("installing convo_node: %w", err)
	}
	_, err = tx.ExecContext(ctx, `SET LOCAL check_function_bodies = on`)
	return err
}

// routeAPI routes the API (route_api) and puts every function of pgconvo's
// on every node.
func routeAPI(ctx context.Context, tx *sql.Tx) error {
	// Every function on every node, before and after routing: a body
	// delegated to a worker calls the private functions there by name, and
	// a delegated function is checked there against its body.
	// Those whose arguments or result are a type of the package's go
	// first: Citus then creates the type on the workers with them, before a
	// PL/pgSQL function that only declares a variable of it (which Citus
	// does not count as needing it) is checked there.
	everywhere := `DO $$ DECLARE f regprocedure; BEGIN
		FOR f IN SELECT p.oid FROM pg_proc p
		          WHERE p.pronamespace IN ('convo'::regnamespace, 'convo_private'::regnamespace, 'convo_node'::regnamespace)
		            AND NOT EXISTS (SELECT FROM pg_dist_object o
		                             WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
		          ORDER BY NOT EXISTS (SELECT FROM unnest(p.proargtypes::oid[] || p.prorettype) AS a (t)
		                                 JOIN pg_type ty ON ty.oid = a.t
		                                 LEFT JOIN pg_type el ON el.oid = ty.typelem
		                                WHERE coalesce(el.typnamespace, ty.typnamespace)
		                                      IN ('convo'::regnamespace, 'convo_private'::regnamespace)),
		                   p.oid LOOP
		    PERFORM create_distributed_function(f);
		END LOOP; END $$`
	for _, s := range []string{everywhere, `SELECT convo_node.route_api()`, `SELECT convo_private.apply_grants()`, everywhere} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("routing the API: %w", err)
		}
	}
	return nil
}

// createRolesOnWorkers creates pgconvo's four roles on every worker that
// lacks them, as they are on the coordinator: NOLOGIN, convo_admin a member
// of convo_app and convo_reader.
func createRolesOnWorkers(ctx context.Context, db *sql.DB) error {
	for _, r := range pgconvoRoles {
		cmd := fmt.Sprintf(`DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s %s; END IF; END$$`,
			r.name, r.name, r.options)
		if err := onEveryWorker(ctx, db, cmd); err != nil {
			return fmt.Errorf("creating role %s on the workers: %w", r.name, err)
		}
	}
	return nil
}

// onEveryWorker runs cmd on each worker, one at a time, over a connection
// of Citus's own as the connected role, for that worker alone: a worker
// with Citus's metadata would otherwise pass a role or database change on
// to the other nodes, all at once, and deadlock.
func onEveryWorker(ctx context.Context, db *sql.DB, cmd string) error {
	cmd = `SET citus.enable_ddl_propagation = off; ` + cmd
	rows, err := db.QueryContext(ctx,
		`SELECT nodename, nodeport, success, result FROM run_command_on_workers($1, parallel => false)`, cmd)
	if err != nil {
		return err
	}
	defer rows.Close()
	var failed []string
	for rows.Next() {
		var host, result string
		var port int
		var ok bool
		if err := rows.Scan(&host, &port, &ok, &result); err != nil {
			return err
		}
		if !ok {
			failed = append(failed, fmt.Sprintf("%s:%d: %s", host, port, result))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

// prepareForCitus readies the migrations' connection for the database's
// place in a Citus cluster. On one server it does nothing. On a coordinator
// not yet distributed, pgconvo's roles are made on every worker first, and
// the migrations create everything else on the coordinator
// alone (Citus would otherwise copy each new schema and function to the
// workers as it is made, connecting as the role that makes it); Distribute
// puts on the workers what they need. On a distributed database, each
// migration runs as runDistributed says. restore undoes it.
func (g *Migrator) prepareForCitus(ctx context.Context) (restore func(), err error) {
	d, err := g.Distribution(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case d.Distributed:
		g.drv.distributed = true
		return func() { g.drv.distributed = false }, nil
	case d.Citus:
		// The roles first, on every node: Citus passes a login role made
		// on the coordinator, a member of convo_app, on to the workers.
		if d.Workers > 0 {
			if err := createRolesOnWorkers(ctx, g.db); err != nil {
				return nil, err
			}
		}
		if err := g.drv.Driver.Run(strings.NewReader("SET citus.enable_ddl_propagation = off")); err != nil {
			return nil, err
		}
		return func() { g.drv.Driver.Run(strings.NewReader("RESET citus.enable_ddl_propagation")) }, nil //nolint:errcheck
	}
	return func() {}, nil
}
