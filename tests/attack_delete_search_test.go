package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Attacks on migration 0044 (delete_conversation, erase_due,
// search_conversations). Each test asserts the promised behaviour and fails
// while the hole is open.

// TestAttackStaleGenerationsListsDeletedConversation: a generation that
// was streaming when its owner deleted the chat (the worker died) stays
// listed in convo.stale_generations to the owner's application session:
// the deleted conversation's id, the model and the prompt message's id,
// after delete_conversation promised that it no longer exists for the
// owner (every other call answers CV002). Unlike orphaned_applied_effects
// and stale_pending_effects, the docs make no exception for this view, and
// the only cleanup the application can do on the row (fail_generation)
// answers CV002, so the row is stuck for good.
func TestAttackStaleGenerationsListsDeletedConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-sg", "")
	prompt := appendMsg(t, db, conv, "user", textParts("a chat to delete mid-stream"))
	gen := newID()
	// Backdated as TestStaleGenerations does (instead of waiting ten minutes).
	mustExec(t, db, `INSERT INTO convo.generations (conversation_id, id, prompt_message_id, head_at_begin, model, started_at)
		VALUES ($1, $2, $3, $3, 'model-old', clock_timestamp() - interval '11 minutes')`, conv, gen, prompt)
	if got := queryAsOwner(t, app, "owner-sg", `SELECT generation_id::text FROM convo.stale_generations`); len(got) != 1 {
		t.Fatalf("before the deletion stale_generations lists %v, want the one generation", got)
	}
	if err := asOwner(app, "owner-sg", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	if err := asOwner(app, "owner-sg", `SELECT convo.fail_generation($1, $2, 'worker_died')`, conv, gen); sqlState(err) != "CV002" {
		t.Fatalf("fail_generation on the deleted conversation: %v, want CV002", err)
	}
	if got := queryAsOwner(t, app, "owner-sg",
		`SELECT conversation_id::text || ' ' || model FROM convo.stale_generations WHERE conversation_id = $1`, conv); len(got) != 0 {
		t.Fatalf("stale_generations shows the deleted conversation to its owner's application: %v", got)
	}
}

// TestAttackCreateConversationRetryRevealsDeletedConversation:
// create_conversation with p_conversation_id of the owner's deleted
// conversation is taken as a retry and returns the id, as if the
// conversation were there (path then answers CV002). Another owner's id
// answers CV009; a deleted one must not answer differently from an id the
// owner cannot see. The retry's comparison (metadata, system prompt) is
// also an oracle on the deleted conversation's content: a guessed system
// prompt succeeds, a wrong one is CV009.
func TestAttackCreateConversationRetryRevealsDeletedConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	conv := createConversation(t, db, "owner-cr", "You are Dr. Smith's private assistant.")
	appendMsg(t, db, conv, "user", textParts("a chat to delete"))
	if err := asOwner(app, "owner-cr", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	theirs := createConversation(t, db, "owner-other", "")
	want := sqlState(asOwner(app, "owner-cr", `SELECT convo.create_conversation('owner-cr', NULL, '{}', $1)`, theirs))
	if want != "CV009" {
		t.Fatalf("create_conversation with another owner's id: %s, want CV009", want)
	}
	before := fingerprint(t, db)
	err := asOwner(app, "owner-cr",
		`SELECT convo.create_conversation('owner-cr', 'You are Dr. Smith''s private assistant.', '{}', $1)`, conv)
	if sqlState(err) != want {
		t.Fatalf("create_conversation with the id of the owner's deleted conversation (right system prompt): %v, want %s as for an id the owner cannot see", err, want)
	}
	requireFingerprint(t, db, "the refused create", before)
}

// TestAttackImportRepeatRevealsDeletedConversation: importing again the
// same ChatGPT export whose conversation the owner has deleted is taken as a
// repeat (import_repeat reads convo.imports, not whether the conversation
// is deleted): import_chatgpt returns the deleted conversation's id and
// import_history its title (set by the owner before deleting, content) and
// message count, to the owner's application, after delete_conversation
// promised every call would answer as if it did not exist.
func TestAttackImportRepeatRevealsDeletedConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	doc := tinyChatGPT("src-deleted-1", "Hi.")
	conv := mustImport(t, app, "owner-ir", "chatgpt", doc)
	if err := asOwner(app, "owner-ir", `SELECT convo.set_title($1, 'Divorce lawyer shortlist')`, conv); err != nil {
		t.Fatal(err)
	}
	if err := asOwner(app, "owner-ir", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := inOwnerTx(app, "owner-ir", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT conversation_id::text || ' ' || created || ' ' || coalesce(title, '')
		                              FROM convo.import_history('chatgpt', 'owner-ir', $1::jsonb)`, doc)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err == nil {
		for _, row := range got {
			if row == fmt.Sprintf("%s false Divorce lawyer shortlist", conv) {
				t.Fatalf("a repeated import answers with the deleted conversation and its title: %q", row)
			}
		}
	}
	if err != nil && sqlState(err) != "CV002" && sqlState(err) != "CV009" {
		t.Fatalf("a repeated import of a deleted conversation: %v", err)
	}
}

// TestAttackDirectUndeleteOfErasedConversation: restore_deleted_conversation
// refuses a conversation erase_due erased (CV006: its content is gone), and
// conversations_guard holds direct writes of deleted_at to the API's rules
// (TestDeletionOutsideTheAPI), but a superuser's direct UPDATE deleted_at =
// NULL brings an erased conversation back to its owner's application
// (readable and writable again, yet never listed: erased_at stays).
func TestAttackDirectUndeleteOfErasedConversation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	app := loginAs(t, db, "convo_app")
	admin := loginAs(t, db, "convo_admin")
	conv := createConversation(t, db, "owner-ue", "")
	appendMsg(t, db, conv, "user", textParts("gone for good"))
	if err := asOwner(app, "owner-ue", `SELECT convo.delete_conversation($1)`, conv); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `SELECT convo.set_deletion_retention('0')`)
	requireEqual(t, "erase_due", queryRow[int64](t, admin, `SELECT convo.erase_due()`), int64(1))
	if _, err := admin.Exec(context.Background(), `SELECT convo.restore_deleted_conversation($1)`, conv); sqlState(err) != "CV006" {
		t.Fatalf("restore of the erased conversation: %v, want CV006", err)
	}
	before := fingerprint(t, db)
	_, err := db.Exec(context.Background(), `UPDATE convo.conversations SET deleted_at = NULL WHERE id = $1`, conv)
	if sqlState(err) != "CV006" && sqlState(err) != "CV005" {
		t.Fatalf("a direct UPDATE un-deleting an erased conversation: %v, want it refused (CV006 or CV005)", err)
	}
	requireFingerprint(t, db, "the refused un-delete", before)
}

// TestAttackRetentionOverflowBreaksEraseDue: set_deletion_retention accepts
// any interval of 0 or more, but erase_due computes clock_timestamp() -
// deletion_retention(), which is out of range for a period of some
// thousands of years: every sweep then fails with 22008 (timestamp out of
// range) and no deleted conversation is ever erased, until a DBA notices.
// Either the period is refused (CV011) or the sweep works.
func TestAttackRetentionOverflowBreaksEraseDue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	admin := loginAs(t, db, "convo_admin")
	_, err := admin.Exec(context.Background(), `SELECT convo.set_deletion_retention('10000 years')`)
	if err != nil {
		if sqlState(err) != "CV011" {
			t.Fatalf("set_deletion_retention('10000 years'): %v, want success or CV011", err)
		}
		return
	}
	if _, err := admin.Exec(context.Background(), `SELECT convo.erase_due()`); err != nil {
		t.Fatalf("erase_due after set_deletion_retention('10000 years') was accepted: %v", err)
	}
}
