package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Attacks on a stopped or failed answer kept with p_parts
// (cancel_generation, fail_generation; migration 0044). Each test asserts
// the behaviour the contract promises and fails on the commit it was
// written against.

// TestAttackStopPre0044ExportRestores shows that a document exported from
// a database before migration 0044 (format version 3, without
// conversation.deleted_at, conversation.erased_at and messages[].incomplete)
// no longer restores: import_conversation's read-back comparison finds the
// new columns missing and refuses it (CV011 "does not read back
// identically ... field deleted_at"), although docs/erasure.md promises "A
// document from before migration 0044 has no deleted_at, erased_at or
// incomplete: it restores as it did". Every backup taken before the upgrade
// is refused; a real version 2 document (which also lacks them) is too.
func TestAttackStopPre0044ExportRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, srcURL := newEmptyDB(t)
	m := newMigrator(t, srcURL)
	if err := m.Goto(ctx, 43); err != nil {
		t.Fatal(err)
	}
	src := newPool(t, srcURL, pgx.QueryExecModeDescribeExec)
	conv := queryRow[string](t, src, `SELECT convo.create_conversation('owner-old', '')::text`)
	prompt := queryRow[string](t, src, `SELECT convo.append_message($1, 'user', $2)::text`, conv, textParts("hello"))
	gen := queryRow[string](t, src, `SELECT convo.begin_generation($1, $2, 'model-x')::text`, conv, prompt)
	mustExec(t, src, `SELECT convo.complete_generation($1, $2, $3)`, conv, gen, textParts("Hello."))
	doc := queryRow[string](t, src, `SELECT convo.export_conversation($1)::text`, conv)

	dst := newDB(t) // at the latest migration
	id, err := restoreDoc(dst, "owner-old", doc)
	if err != nil {
		t.Fatalf("restoring a document exported before migration 0044: %v", err)
	}
	requireEqual(t, "the restored id", id, conv)
	requireEqual(t, "the restored marks", queryRow[string](t, dst,
		`SELECT string_agg(incomplete::text, ',' ORDER BY depth) FROM convo.path($1)`, conv), "false,false,false")
}

// TestAttackStopDirectWriteSecondGenerationClaimsKeptAnswer shows that a
// session writing the tables itself (every actor of asEachActor) can end a
// streaming generation as cancelled (or failed) naming the incomplete answer
// that ANOTHER generation kept: generations_transition only checks that the
// message is an incomplete assistant child of the prompt, not that it is
// this generation's own answer. Two generations then claim one partial
// answer (the second claims a stop that kept text it never streamed), which
// no API call can produce: each cancel/fail with p_parts writes a new
// message. Expected: CV006, nothing written.
//
//	UPDATE convo.generations SET state = 'cancelled', message_id = '<answer kept by g1>',
//	       finished_at = clock_timestamp() WHERE conversation_id = '<c>' AND id = '<g2>';
func TestAttackStopDirectWriteSecondGenerationClaimsKeptAnswer(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	conv := createConversation(t, db, "owner-dw", "")
	prompt := appendMsg(t, db, conv, "user", textParts("write a poem"))
	first := beginGeneration(t, db, conv, prompt, "model-x")
	second := beginGeneration(t, db, conv, prompt, "model-x")
	kept := queryRow[string](t, db, `SELECT convo.cancel_generation($1, $2, $3)::text`, conv, first, textParts("Roses are"))
	grantee := createGrantedRole(t, db)
	before := fingerprint(t, db)
	asEachActor(t, db, grantee, func(t *testing.T, conn *pgx.Conn) {
		ctx := context.Background()
		if _, err := conn.Exec(ctx, `SELECT set_config('convo.owner_id', 'owner-dw', false)`); err != nil {
			t.Fatal(err)
		}
		for _, update := range []string{
			`UPDATE convo.generations SET state = 'cancelled', message_id = $3, finished_at = clock_timestamp()
			  WHERE conversation_id = $1 AND id = $2`,
			`UPDATE convo.generations SET state = 'failed', error_code = 'dropped', error = '{}', message_id = $3,
			        finished_at = clock_timestamp()
			  WHERE conversation_id = $1 AND id = $2`,
		} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, update, conv, second, kept)
			if sqlState(err) != "CV006" {
				t.Errorf("generation %s ended naming the answer generation %s kept: got %v, want CV006", second, first, err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	requireFingerprint(t, db, "the refused writes", before)
}

// TestAttackStopRestoreTwoGenerationsClaimOneKeptAnswer shows that
// import_conversation (convo_admin restore) accepts a document in which two
// generations name the same incomplete answer: restore_problem checks that
// each generation's message is an incomplete assistant child of its prompt
// and that each incomplete message has some cancelled/failed generation,
// but not that a kept answer belongs to one generation only. The API cannot
// write that (each cancel/fail with p_parts writes its own message), so the
// restore must refuse it with CV011 and write nothing.
//
// The forged document: export a conversation where g1 was cancelled with
// parts (kept M) and g2 cancelled without, then set g2's message_id to M.
func TestAttackStopRestoreTwoGenerationsClaimOneKeptAnswer(t *testing.T) {
	t.Parallel()
	src, dst := newDB(t), newDB(t)
	conv := createConversation(t, src, "owner-rs", "")
	prompt := appendMsg(t, src, conv, "user", textParts("write a poem"))
	first := beginGeneration(t, src, conv, prompt, "model-x")
	second := beginGeneration(t, src, conv, prompt, "model-x")
	kept := queryRow[string](t, src, `SELECT convo.cancel_generation($1, $2, $3)::text`, conv, first, textParts("Roses are"))
	mustExec(t, src, `SELECT convo.cancel_generation($1, $2)`, conv, second)
	doc := queryRow[string](t, src, `SELECT convo.export_conversation($1)::text`, conv)
	forged := editExport(t, doc, func(x map[string]any) {
		n := 0
		for _, g := range rows(x, "generations") {
			if fmt.Sprint(g["id"]) == second {
				g["message_id"] = kept
				n++
			}
		}
		if n != 1 {
			t.Fatalf("generation %s not in the export", second)
		}
	})
	before := fingerprint(t, dst)
	_, err := restoreDoc(dst, "owner-rs", forged)
	requireSQLState(t, err, "CV011")
	requireFingerprint(t, dst, "the refused restore", before)
}
