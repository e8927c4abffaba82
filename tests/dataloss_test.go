package tests

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgconvo/pgconvo/migrator"
	pgconvosql "github.com/pgconvo/pgconvo/sql"
)

// TestCheckDataLoss asks the database what going down would drop: nothing
// on a freshly migrated database (the state machine's rows are the
// migration's own), the tables holding rows once there are conversations
// and tools, and nothing for a step that drops no table.
func TestCheckDataLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	latest := latestVersion(t)
	if err := m.CheckDataLoss(ctx, 0); err != nil {
		t.Fatalf("at version 0: %v", err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckDataLoss(ctx, 0); err != nil {
		t.Fatalf("a fresh database holds no rows of its users, yet: %v", err)
	}

	mustExec(t, pool, `SELECT convo.create_conversation('owner-1', 'You are helpful.')`)
	mustExec(t, pool, `SELECT convo.register_tool('buy', true, '{"type": "object"}')`)
	requireLoss := func(to uint, want ...string) {
		t.Helper()
		err := m.CheckDataLoss(ctx, to)
		var loss *migrator.DataLossError
		if !errors.As(err, &loss) {
			t.Fatalf("down to %d: want a DataLossError, got %v", to, err)
		}
		var got []string
		for _, tr := range loss.Tables {
			got = append(got, tr.String())
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") || loss.From != latest || loss.To != to {
			t.Fatalf("down to %d: got %d to %d: %q, want %d to %d: %q", to, loss.From, loss.To, got, latest, to, want)
		}
		if !strings.Contains(err.Error(), want[0]) {
			t.Fatalf("the error names no table: %v", err)
		}
	}
	requireLoss(0, "convo.conversation_head_log (1 row)", "convo.conversations (1 row)",
		"convo.messages (1 row)", "convo.tools (1 row)")
	requireLoss(1, "convo.tools (1 row)")
	for _, to := range []uint{2, latest, latest + 1} {
		if err := m.CheckDataLoss(ctx, to); err != nil {
			t.Fatalf("down to %d drops no table with rows: %v", to, err)
		}
	}
	requireVersion(t, m, latest) // Checking changed nothing.
}

// TestCheckDataLossUnreadable: a migrating role that may not read a table,
// or whose reads row-level security would filter, and that may not act as
// convo_owner, cannot tell that the table is empty, so the check fails
// instead of passing.
func TestCheckDataLossUnreadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	pool := newPool(t, dbURL, pgx.QueryExecModeDescribeExec)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	role := "loss_check_" + strings.ReplaceAll(newID()[:8], "-", "")
	mustExec(t, pool, fmt.Sprintf(`CREATE ROLE %s LOGIN`, role))
	t.Cleanup(func() {
		pool.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE %s`, role, role))
	})
	mustExec(t, pool, fmt.Sprintf(`GRANT SELECT ON public.schema_migrations TO %s`, role))
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	weak := newMigrator(t, u.String())
	// It may not act as convo_owner either (no CREATEROLE, no membership),
	// as the role that installed pgconvo does: the error says so.
	err = weak.CheckDataLoss(ctx, 0)
	if err == nil || !strings.Contains(err.Error(), "permission denied") ||
		!strings.Contains(err.Error(), "the check counts as convo_owner, the tables' owner, which role "+role+" may not act as") ||
		!strings.Contains(err.Error(), "GRANT convo_owner TO "+role) {
		t.Fatalf("without SELECT: want permission denied, naming the grant, got %v", err)
	}

	// With SELECT on the tables (the private ones too, which have no
	// policies) and no policy for the role, row-level security would show
	// it no rows: the count must fail, not say 0.
	mustExec(t, pool, fmt.Sprintf(`GRANT USAGE ON SCHEMA convo, convo_private TO %s;
		GRANT SELECT ON ALL TABLES IN SCHEMA convo, convo_private TO %s`, role, role))
	mustExec(t, pool, `SELECT convo.create_conversation('owner-1', 'You are helpful.')`)
	if err := weak.CheckDataLoss(ctx, 0); err == nil || !strings.Contains(err.Error(), "row-level security") {
		t.Fatalf("under row-level security: want an error naming it, got %v", err)
	}
}

// TestMigratorReportsSteps: OnStep hears of each migration applied or
// reverted, and of nothing else (not force, not a step with nothing to do).
func TestMigratorReportsSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	all, err := migrator.List(pgconvosql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	m.OnStep(func(s migrator.Step) { got = append(got, s.String()) })
	expect := func(what string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s reported:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		got = nil
	}
	step := func(i int, what string) string { return fmt.Sprintf("%04d %s: %s", all[i].Version, all[i].Name, what) }

	if err := m.Goto(ctx, 1); err != nil {
		t.Fatal(err)
	}
	expect("goto 1", step(0, "applied"))
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var applied []string
	for i := 1; i < len(all); i++ {
		applied = append(applied, step(i, "applied"))
	}
	expect("up", applied...)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	expect("up with nothing to do")
	if err := m.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	expect("down 1", step(len(all)-1, "reverted"))
	if err := m.Force(ctx, len(all)); err != nil {
		t.Fatal(err)
	}
	expect("force")
	if err := m.Force(ctx, len(all)-1); err != nil {
		t.Fatal(err)
	}
	if err := m.Down(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var reverted []string
	for i := len(all) - 2; i >= 0; i-- {
		reverted = append(reverted, step(i, "reverted"))
	}
	expect("down -all", reverted...)
}

// TestMigratorRefusesUnknownVersions: force and goto take 0 (-1 too, for
// force) or a version of the migration set, and down no more steps than are
// applied; a refusal records nothing.
func TestMigratorRefusesUnknownVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := newEmptyDB(t)
	m := newMigrator(t, dbURL)
	latest := latestVersion(t)
	for _, v := range []int{int(latest) + 1, -2} {
		if err := m.Force(ctx, v); err == nil || !strings.Contains(err.Error(), "there is no migration") {
			t.Fatalf("force %d: want a refusal, got %v", v, err)
		}
		requireVersion(t, m, 0)
	}
	if err := m.Goto(ctx, latest+1); err == nil || !strings.Contains(err.Error(), "there is no migration") {
		t.Fatalf("goto %d: want a refusal, got %v", latest+1, err)
	}
	for _, v := range []int{1, 0, int(latest), -1} {
		if err := m.Force(ctx, v); err != nil {
			t.Fatalf("force %d: %v", v, err)
		}
		requireVersion(t, m, uint(max(v, 0)))
	}
	if err := m.Goto(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Down(ctx, 2); err == nil || !strings.Contains(err.Error(), "only 1 migration(s) are applied") {
		t.Fatalf("down 2 at version 1: want a refusal, got %v", err)
	}
	requireVersion(t, m, 1)
}
