package tests

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgconvo/pgconvo/internal/pgtest"
)

// The helpers this package shares with tests/stress live in
// internal/pgtest; these are their names here.
var (
	newDB              = pgtest.NewDB
	newEmptyDB         = pgtest.NewEmptyDB
	newPool            = pgtest.NewPool
	mustExec           = pgtest.MustExec
	requireSQLState    = pgtest.RequireSQLState
	requireCount       = pgtest.RequireCount
	sqlState           = pgtest.SQLState
	newID              = pgtest.NewID
	textParts          = pgtest.TextParts
	nullable           = pgtest.Nullable
	createConversation = pgtest.CreateConversation
	appendMsg          = pgtest.AppendMsg
	editMsg            = pgtest.EditMsg
	regenerateMsg      = pgtest.RegenerateMsg
	moveHead           = pgtest.MoveHead
	headOf             = pgtest.HeadOf
	readHeadHistory    = pgtest.ReadHeadHistory
	requireHeadChain   = pgtest.RequireHeadChain
	loginAs            = pgtest.LoginAs
	inOwnerTx          = pgtest.InOwnerTx
	failingChecks      = pgtest.FailingChecks

	effRegisterPurchase = pgtest.EffRegisterPurchase
	effToolResults      = pgtest.EffToolResults
	effSettle           = pgtest.EffSettle
	effFail             = pgtest.EffFail
	effCompensate       = pgtest.EffCompensate
	effConfirm          = pgtest.EffConfirm
	effDecline          = pgtest.EffDecline
)

type headMove = pgtest.HeadMove

// effCall is pgtest.EffCall as a type of this package: go vet asks for
// field names in a literal of another package's struct, and this package's
// tests write effCall{"c1", tool, input} throughout.
type effCall pgtest.EffCall

// effBuy is pgtest.EffBuy.
func effBuy(id, tool string, amount int) effCall {
	return effCall(pgtest.EffBuy(id, tool, amount))
}

// effToolUses is pgtest.EffToolUses.
func effToolUses(calls ...effCall) string {
	shared := make([]pgtest.EffCall, len(calls))
	for i, c := range calls {
		shared[i] = pgtest.EffCall(c)
	}
	return pgtest.EffToolUses(shared...)
}

const effPurchaseSchema = pgtest.EffPurchaseSchema

// queryRow is pgtest.QueryRow.
func queryRow[T any](t testing.TB, db *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	return pgtest.QueryRow[T](t, db, sql, args...)
}

// queryRowsAs is pgtest.QueryRows.
func queryRowsAs[T any](t testing.TB, db *pgxpool.Pool, query string, args ...any) []T {
	t.Helper()
	return pgtest.QueryRows[T](t, db, query, args...)
}

// requireEqual is pgtest.RequireEqual.
func requireEqual[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	pgtest.RequireEqual(t, what, got, want)
}
