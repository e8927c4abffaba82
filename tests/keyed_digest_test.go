package tests

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/localpg"
)

// Tests of the keyed digests: every digest of content the ledger and the
// receipts keep (scope and idempotency keys, request digests) is an
// HMAC-SHA256 under a secret of the database that only the owner role
// reads, so that what erasure keeps cannot be hashed back into the content.

// digestKey reads the database's secret (as the superuser) and returns the
// HMAC key it holds: the inner pad XOR 0x36 (RFC 2104).
func digestKey(t testing.TB, db *pgxpool.Pool) []byte {
	t.Helper()
	inner := queryRow[[]byte](t, db, `SELECT inner_pad FROM convo_private.digest_key`)
	outer := queryRow[[]byte](t, db, `SELECT outer_pad FROM convo_private.digest_key`)
	if len(inner) != 64 || len(outer) != 64 {
		t.Fatalf("pads of %d and %d bytes, want 64", len(inner), len(outer))
	}
	key := make([]byte, 64)
	for i := range key {
		key[i] = inner[i] ^ 0x36
		if outer[i]^0x5c != key[i] {
			t.Fatalf("the outer pad is not the same key XOR 0x5c at byte %d", i)
		}
	}
	return key
}

// plainDigest is the SHA-256 hex of s.
func plainDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// keyedDigest is HMAC-SHA256(key, the plain digest of s), in hex: what the
// database stores for content s.
func keyedDigest(key []byte, s string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(plainDigest(s)))
	return hex.EncodeToString(mac.Sum(nil))
}

// TestErasureKeepsNoDigestOfContent: a tool call whose input holds a 4-digit
// PIN, and a receipt whose request holds it, are erased. What erasure keeps
// (the scope and idempotency keys, the request digest) matches none of the
// 10,000 candidates hashed as the keys were before they were keyed; with
// the database's secret (which an attacker does not have) the same search
// finds the PIN, so the search is the one that used to work. The digests are
// HMAC-SHA256 as Go computes it.
func TestErasureKeepsNoDigestOfContent(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustExec(t, db, `SELECT convo.register_tool('check_pin', true, '{"type": "object"}', p_idempotency_scope => 'conversation_args')`)
	registerTestTool(t, db, "file_followup", true, `{"type": "object"}`)
	conv := createConversation(t, db, "owner-1", "")
	appendMsg(t, db, conv, "user", textParts("My PIN is 4821."))
	appendMsg(t, db, conv, "assistant", effToolUses(effCall{ID: "call_pin", Name: "check_pin", Input: map[string]any{"pin": "4821"}}))
	receipt := beginReceipt(t, db, "owner-1", "follow-pin-0001", "file_followup", `{"pin": "4821"}`).ID
	key := digestKey(t, db)

	material := func(pin string) string { // the scope's input, as record_tool_call spells it
		return conv + "|check_pin|" + `{"pin": "` + pin + `"}`
	}
	request := func(pin string) string { return `{"pin": "` + pin + `"}` }
	e := effRead(t, db, conv, effForCall(t, db, conv, "call_pin").EffectID)
	requireEqual(t, "scope key", e.ScopeKey, "conversation_args:"+keyedDigest(key, material("4821")))
	requireEqual(t, "idempotency key", e.Key, e.ScopeKey)
	requireEqual(t, "receipt digest", queryRow[string](t, db, `SELECT request_digest FROM convo.tool_receipts WHERE id = $1`, receipt),
		keyedDigest(key, request("4821")))
	requireEqual(t, "keyed_digest", queryRow[string](t, db, `SELECT convo_private.keyed_digest('abc')`),
		func() string {
			m := hmac.New(sha256.New, key)
			m.Write([]byte("abc"))
			return hex.EncodeToString(m.Sum(nil))
		}())

	mustExec(t, db, `SELECT * FROM convo.erase_conversation($1, 'asked by the customer')`, conv)
	mustExec(t, db, `SELECT * FROM convo.erase_owner('owner-1', 'asked by the customer')`)
	reader := loginAs(t, db, "convo_reader")
	kept := queryAsOwner(t, reader, "", `SELECT scope_key || ' ' || idempotency_key || ' ' || arguments::text FROM convo.tool_effects WHERE conversation_id = $1`, conv)[0]
	digest := queryAsOwner(t, reader, "", `SELECT coalesce(request_digest, 'none') || ' ' || request::text FROM convo.tool_receipts WHERE id = $1`, receipt)[0]
	requireEqual(t, "the erased receipt's digest", strings.Fields(digest)[0], "none")
	if strings.Contains(kept+digest, "4821") {
		t.Fatalf("erasure kept the PIN: %s, %s", kept, digest)
	}
	var plain, keyed []string
	for n := 0; n < 10000; n++ {
		pin := fmt.Sprintf("%04d", n)
		for _, found := range []string{plainDigest(material(pin)), plainDigest(request(pin))} {
			if strings.Contains(kept, found) || strings.Contains(digest, found) {
				plain = append(plain, pin)
			}
		}
		for _, found := range []string{keyedDigest(key, material(pin)), keyedDigest(key, request(pin))} {
			if strings.Contains(kept, found) || strings.Contains(digest, found) {
				keyed = append(keyed, pin)
			}
		}
	}
	requireSlice(t, "PINs found from the kept digests without the secret", plain, nil)
	requireSlice(t, "PINs found with the secret (the scope key alone: the receipt keeps no digest)", keyed, []string{"4821"})
}

// TestDigestKeyIsTheOwnerRolesOnly: no login of convo_app, convo_reader or
// convo_admin reads the secret or computes a keyed digest.
func TestDigestKeyIsTheOwnerRolesOnly(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, role := range []string{"convo_app", "convo_reader", "convo_admin"} {
		login := loginAs(t, db, role)
		for _, st := range []string{`SELECT * FROM convo_private.digest_key`, `SELECT convo_private.keyed_digest('abc')`} {
			requireSQLState(t, asOwner(login, "", st), "42501")
		}
	}
}

// TestDigestKeySurvivesBackupAndRestore: a database dumped with pg_dump and
// restored into another keeps its secret, so a re-run of a charged call
// there is linked to the charge (reuse), not charged again.
func TestDigestKeySurvivesBackupAndRestore(t *testing.T) {
	t.Parallel()
	binDir, err := localpg.FindBinaries() // pg_dump and pg_restore stand beside the server's
	if err != nil {
		t.Fatal(err)
	}
	src := newDB(t)
	effRegisterPurchase(t, src, "buy", "fork_args", "1 hour")
	conv := createConversation(t, src, "owner-1", "You sell credits.")
	user := appendMsg(t, src, conv, "user", textParts("Buy 500 credits."))
	appendMsg(t, src, conv, "assistant", effToolUses(effBuy("call_1", "buy", 500)))
	charge := effForCall(t, src, conv, "call_1")
	effSettle(t, src, conv, charge.EffectID, "ch_1")

	_, dstURL := newEmptyDB(t)
	dump := exec.Command(filepath.Join(binDir, "pg_dump"), "-Fc", "-d", src.Config().ConnString())
	var out, stderr bytes.Buffer
	dump.Stdout, dump.Stderr = &out, &stderr
	if err := dump.Run(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, stderr.String())
	}
	restore := exec.Command(filepath.Join(binDir, "pg_restore"), "--exit-on-error", "-d", dstURL)
	restore.Stdin, restore.Stderr = &out, &stderr
	if err := restore.Run(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, stderr.String())
	}
	dst := newPool(t, dstURL, pgx.QueryExecModeDescribeExec)
	requireEqual(t, "the secret after restore", hex.EncodeToString(digestKey(t, dst)), hex.EncodeToString(digestKey(t, src)))
	editMsg(t, dst, conv, user, textParts("Buy 500 credits, please."))
	appendMsg(t, dst, conv, "assistant", effToolUses(effBuy("call_2", "buy", 500)))
	rerun := effForCall(t, dst, conv, "call_2")
	requireEqual(t, "the re-run after restore", [3]string{rerun.Decision, rerun.EffectID, rerun.Key},
		[3]string{"reuse", charge.EffectID, charge.Key})
}
