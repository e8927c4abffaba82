package tests

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestRestoreProperty: import_conversation accepts a document exactly when
// every row is one the API could have written, as a property over
// generated histories rather than a list of cases.
//
// Round trip: each random history (restore_property_history_test.go),
// exported, restores into a fresh database for a convo_admin login,
// re-exports the same (but what a restore assigns) and leaves self_check
// clean. Mutations: each field changed on its own, a sample per document,
// is either refused with CV011 naming the row and nothing written, or
// restores to what the API could have written: self_check clean, the
// re-export equal to the mutated document, and the rules of the API that
// neither sees held (restore_property_oracle_test.go). A mutation that is
// accepted is checked inside the restoring transaction and rolled back, so
// that every mutation meets the same empty database. Refusals with the
// contract's own SQLSTATE for what they are about pass too: CV007 for a
// tool registered otherwise, CV004 or CV008 for parts that do not fit a
// changed role (as TestImportRefusesMalformedExports has them).
//
// PGCONVO_RESTORE_SEED (or -restore.seed) replays a run; PGCONVO_RESTORE_HISTORIES,
// PGCONVO_RESTORE_OPS (operations per history) and PGCONVO_RESTORE_MUTATIONS
// (per document, besides the conversation's times at their bounds) size
// it. Failures are reported one of each kind, the first in full
// (PGCONVO_RESTORE_VERBOSE=1: every one; 2: every mutation, passed too).
func TestRestoreProperty(t *testing.T) {
	t.Parallel()
	s := rpSettingsFromEnv(t)
	replay := fmt.Sprintf("PGCONVO_RESTORE_SEED=%d PGCONVO_RESTORE_HISTORIES=%d PGCONVO_RESTORE_OPS=%d PGCONVO_RESTORE_MUTATIONS=%d go test ./tests -run TestRestoreProperty",
		s.seed, s.histories, s.ops, s.mutations)
	t.Logf("seed %d (replay: %s)", s.seed, replay)

	src, dst, mut := newDB(t), newDB(t), newDB(t)
	rpRegisterTools(t, src, dst, mut)
	srcApp, srcAdmin := loginAs(t, src, "convo_app"), loginAs(t, src, "convo_admin")
	dstApp, dstAdmin := loginAs(t, dst, "convo_app"), loginAs(t, dst, "convo_admin")
	mutAdmin := loginAs(t, mut, "convo_admin")
	dstAdminName := queryRow[string](t, dstAdmin, `SELECT current_user::text`)
	empty := fingerprint(t, mut)

	var failures []string
	classes := map[string][]string{}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failures = append(failures, msg)
		c := rpClass(msg)
		classes[c] = append(classes[c], msg)
		if os.Getenv("PGCONVO_RESTORE_VERBOSE") != "" {
			t.Errorf("seed %d: %s", s.seed, msg)
		}
	}
	for i := 0; i < s.histories; i++ {
		rng := rand.New(rand.NewPCG(s.seed, uint64(i)+1))
		h := &rpHistory{t: t, rng: rng, app: srcApp, admin: srcAdmin, owner: fmt.Sprintf("owner-%d-%d", s.seed%1000, i)}
		h.start(rpStarts[i%len(rpStarts)])
		for j := 0; j < s.ops; j++ {
			h.step()
		}
		doc := exportAs(t, srcApp, h.owner, h.conv)
		t.Logf("history %d, conversation %s of %s: %s", i, h.conv, h.owner, strings.Join(h.trail, "; "))
		where := fmt.Sprintf("history %d", i)

		if p := rpAPIProblem(rpDecode(doc), time.Now()); p != "" {
			fail("%s: the oracle flags a document the API wrote (a bug of the test): %s", where, p)
		}

		// Round trip, committed in dst.
		roundTripFailed := false
		if _, err := importAs(dstAdmin, h.owner, "conversation", doc); err != nil {
			roundTripFailed = true
			fail("%s: the export does not restore: %v", where, rpErrText(err))
		} else {
			if diff := rpDiff(t, doc, exportAs(t, dstApp, h.owner, h.conv)); diff != "" {
				fail("%s: the restored conversation re-exports otherwise:\n%s", where, diff)
			}
			if checks := failingChecks(t, dst); checks != "" {
				fail("%s: self_check after the restore:\n%s", where, checks)
			}
			// Every row names the restore, seq kept in order as source_seq.
			t.Run(fmt.Sprintf("history %d restored rows", i), func(t *testing.T) {
				requireRestoredRows(t, dst, h.conv, dstAdminName, doc)
			})
			// A restore is the API's too: the restored conversation's export
			// restores again (into mut, rolled back), carrying the record.
			again := rpMutation{name: "the restored conversation's export, restored again", doc: exportAs(t, dstApp, h.owner, h.conv)}
			if problem := rpTryMutation(t, mutAdmin, h.owner, again); problem != "" && !strings.HasPrefix(problem, "accepted") {
				fail("%s: the restored conversation's export does not restore again: %s", where, problem)
			} else if problem != "" {
				fail("%s: %s: %s", where, again.name, problem)
			}
			requireFingerprint(t, mut, "restoring the restored conversation", empty)
		}

		// Mutations, each into the empty mut database; of a document that
		// restores, or each would fail as the document does.
		if roundTripFailed {
			t.Logf("history %d: no mutations, the document itself does not restore", i)
			continue
		}
		ms := rpMutations(doc, rng, s.mutations)
		for _, m := range ms {
			problem := rpTryMutation(t, mutAdmin, h.owner, m)
			if problem != "" {
				fail("history %d, mutation %s: %s", i, m.name, problem)
			} else if os.Getenv("PGCONVO_RESTORE_VERBOSE") == "2" {
				t.Logf("history %d, mutation %s: as the property allows", i, m.name)
			}
			requireFingerprint(t, mut, "mutation "+m.name, empty)
		}
		t.Logf("history %d: %d operations, %d messages, %d effects, %d mutations", i, len(h.trail),
			len(rows(h.doc, "messages")), len(rows(h.doc, "effects")), len(ms))
	}
	// One report per class of failure, with its first instance in full
	// (PGCONVO_RESTORE_VERBOSE=1 reports every one).
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		t.Errorf("seed %d: %d× %s; the first:\n%s", s.seed, len(classes[c]), c, classes[c][0])
	}
	if len(failures) > 0 {
		t.Logf("%d failures in %d classes; replay: %s", len(failures), len(classes), replay)
	}
}

// rpSettings sizes a run.
type rpSettings struct {
	seed                      uint64
	histories, ops, mutations int
}

var rpSeedFlag = flag.String("restore.seed", "", "TestRestoreProperty's seed (default $PGCONVO_RESTORE_SEED, else random)")

func rpSettingsFromEnv(t testing.TB) rpSettings {
	s := rpSettings{seed: rand.Uint64(), histories: 5, ops: 25, mutations: 40}
	seed := *rpSeedFlag
	if seed == "" {
		seed = os.Getenv("PGCONVO_RESTORE_SEED")
	}
	if seed != "" {
		n, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			t.Fatalf("PGCONVO_RESTORE_SEED %q: %v", seed, err)
		}
		s.seed = n
	}
	for name, p := range map[string]*int{"PGCONVO_RESTORE_HISTORIES": &s.histories, "PGCONVO_RESTORE_OPS": &s.ops,
		"PGCONVO_RESTORE_MUTATIONS": &s.mutations} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s %q: want a count", name, v)
			}
			*p = n
		}
	}
	return s
}

// errRPRollback ends the transaction of an accepted mutation once checked.
var errRPRollback = errors.New("rolled back on purpose")

// rpTryMutation restores m's document as convo_admin and returns "" when
// the outcome is one the property allows, else what went wrong.
func rpTryMutation(t testing.TB, admin *pgxpool.Pool, owner string, m rpMutation) string {
	t.Helper()
	var problem string
	err := inOwnerTx(admin, "", func(ctx context.Context, tx pgx.Tx) error {
		var conv string
		if err := tx.QueryRow(ctx, `SELECT convo.import_conversation($1, $2::jsonb)::text`, owner, m.doc).Scan(&conv); err != nil {
			return err
		}
		// Deferred checks fire now, as they would at commit.
		if _, err := tx.Exec(ctx, `SET CONSTRAINTS ALL IMMEDIATE`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT check_name || ': ' || detail FROM convo.self_check() WHERE NOT ok ORDER BY 1`)
		if err != nil {
			return err
		}
		checks, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		var again string
		if err := tx.QueryRow(ctx, `SELECT convo.export_conversation($1)::text`, conv).Scan(&again); err != nil {
			return err
		}
		switch {
		case len(checks) > 0:
			problem = "accepted, and self_check fails: " + strings.Join(checks, "; ")
		default:
			if diff := rpDiff(t, m.doc, again); diff != "" {
				problem = "accepted, and the re-export differs from the mutated document:\n" + diff
			} else if p := rpAPIProblem(rpDecode(m.doc), time.Now()); p != "" {
				problem = "accepted a history the API could not have written: " + p
			}
		}
		return errRPRollback
	})
	if errors.Is(err, errRPRollback) {
		return problem
	}
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
		return fmt.Sprintf("not a PostgreSQL error: %v", err)
	case pgErr.Code == "CV007" && m.tool:
		// A tool the restoring database registered otherwise is the
		// contract's unknown_tool (TestImportRefusesMalformedExports).
		return ""
	case (pgErr.Code == "CV004" || pgErr.Code == "CV008") && strings.Contains(m.name, ".role = "):
		// Parts that do not fit their message's role are the contract's
		// wrong_role and invalid_parts, as for a new message.
		return ""
	case pgErr.Code != "CV011":
		return fmt.Sprintf("refused with SQLSTATE %s, not CV011: %s", pgErr.Code, rpErrText(err))
	}
	// The refusal names the changed row, or, for a rule between rows (a
	// chain, a link, a count), the row where the rule breaks: a row of the
	// document by its id, seq or call id, or the array of a removed row.
	// Every DETAIL names the conversation, which names no row.
	text := pgErr.Message + "\n" + pgErr.Detail + "\n" + pgErr.Hint
	for _, name := range append(append([]string{}, m.row...), m.anyRow...) {
		if strings.Contains(text, name) {
			return ""
		}
	}
	return fmt.Sprintf("refused with CV011 naming no row (want %s): %s", strings.Join(m.row, " or "), rpErrText(err))
}

// rpErrText is an error with its DETAIL.
func rpErrText(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s %s (DETAIL %s)", pgErr.Code, pgErr.Message, pgErr.Detail)
	}
	return err.Error()
}

// rpSeqKeys are the arrays whose order is their seq: the restore numbers
// them anew in that order.
var rpSeqKeys = map[string]bool{"head_log": true, "effect_events": true, "changes": true}

// rpCanonical is a document as a restore must read it back: without what
// a restore assigns (assigned), the arrays ordered by seq where seq orders
// them and as sets elsewhere (an export lists rows in its own order). Of a
// restored document (restored), the record of that restore is left out:
// the one import record naming no import, which the restore wrote; every
// row it carried names it.
func rpCanonical(t testing.TB, doc string, restored bool) string {
	t.Helper()
	return editExport(t, doc, func(x map[string]any) {
		for key, v := range x {
			arr, ok := v.([]any)
			if !ok {
				continue
			}
			if rpSeqKeys[key] {
				sort.SliceStable(arr, func(i, j int) bool {
					a, _ := strconv.ParseFloat(fmt.Sprint(arr[i].(map[string]any)["seq"]), 64)
					b, _ := strconv.ParseFloat(fmt.Sprint(arr[j].(map[string]any)["seq"]), 64)
					return a < b
				})
			}
			kept := []any{}
			for _, r := range arr {
				row := r.(map[string]any)
				if restored && key == "imports" && row["import_id"] == nil {
					continue
				}
				for _, k := range assigned {
					delete(row, k)
				}
				kept = append(kept, row)
			}
			if !rpSeqKeys[key] {
				sort.Slice(kept, func(i, j int) bool { return rpJSON(kept[i]) < rpJSON(kept[j]) })
			}
			x[key] = kept
		}
	})
}

// rpDiff is "" when got, the export of want's restore, reads as want
// (rpCanonical), else the first row of each array that differs.
func rpDiff(t testing.TB, want, got string) string {
	t.Helper()
	restores := 0
	for _, r := range rows(rpDecode(got), "imports") {
		if r["import_id"] == nil {
			restores++
			if r["format"] != "pgconvo" {
				return fmt.Sprintf("the record of the restore is of format %v", r["format"])
			}
		}
	}
	if restores != 1 {
		return fmt.Sprintf("the re-export holds %d import records naming no import, want 1 (the restore's)", restores)
	}
	w, g := rpCanonical(t, want, false), rpCanonical(t, got, true)
	if w == g {
		return ""
	}
	x, y := rpDecode(w), rpDecode(g)
	var out []string
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, aok := x[k].([]any)
		b, bok := y[k].([]any)
		if !aok || !bok {
			if rpJSON(x[k]) != rpJSON(y[k]) {
				out = append(out, fmt.Sprintf("  %s: want %s\n  %s:  got %s", k, rpJSON(x[k]), k, rpJSON(y[k])))
			}
			continue
		}
		for i := 0; i < len(a) || i < len(b); i++ {
			var ra, rb string
			if i < len(a) {
				ra = rpJSON(a[i])
			}
			if i < len(b) {
				rb = rpJSON(b[i])
			}
			if ra != rb {
				out = append(out, fmt.Sprintf("  %s[%d]: want %s\n  %s[%d]:  got %s", k, i, ra, k, i, rb))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// rpClass is the kind of a failure, for the summary: the outcome, and for
// a refusal its message with the ids, times and numbers left out.
func rpClass(msg string) string {
	_, rest, _ := strings.Cut(msg, ": ")
	if strings.HasPrefix(msg, "history") && !strings.Contains(msg, "mutation") {
		rest = "round trip: " + rest
	} else if i := strings.Index(msg, "mutation "); i >= 0 {
		// the field changed, without its row's index and value
		field := msg[i+len("mutation "):]
		field, _, _ = strings.Cut(field, ": ")
		field, _, _ = strings.Cut(field, " = ")
		field = rpDigits.ReplaceAllString(field, "[]")
		rest = field + ": " + rest
	}
	rest, _, _ = strings.Cut(rest, "\n")
	rest = rpWant.ReplaceAllString(rest, "")
	rest = rpUUID.ReplaceAllString(rest, "ID")
	rest = rpTime.ReplaceAllString(rest, "TIME")
	if i := strings.Index(rest, " (DETAIL"); i >= 0 && !strings.Contains(rest, "not well formed") {
		rest = rest[:i]
	}
	return rpNumber.ReplaceAllString(rest, "N")
}

var (
	rpUUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rpTime   = regexp.MustCompile(`-?infinity|\d{4}-\d\d-\d\dT[0-9:.]+\+00:00`)
	rpDigits = regexp.MustCompile(`\[\d+\]`)
	rpNumber = regexp.MustCompile(`\b\d+\b`)
	rpWant   = regexp.MustCompile(` \(want [^)]*\)`)
)

// rpJSON is v as JSON text, for comparing and sorting rows.
func rpJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
