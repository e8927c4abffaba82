"""The seed's purchase story from Python, with psycopg 3.

A charge is applied; an edit re-runs the same purchase (reused, not charged
twice); a second edit asks for another amount (held for confirmation, then
confirmed and charged); the first charge, now on no live branch, is listed as
orphaned until a refund compensates it. examples/purchase.sql,
examples/node and examples/go tell the same story.

Run it with: DATABASE_URL=... /usr/bin/python3 examples/python/purchase.py
(psycopg 3 from Debian: apt-get install python3-psycopg; another python3 on
PATH may not see Debian's packages). DATABASE_URL connects as the application
(a login member of convo_app); ADMIN_DATABASE_URL, if set, as the DBA (a
member of convo_admin) for register_tool. Unset, DATABASE_URL does both (the
superuser URL that `migrate up` prints may). Every run makes a conversation of
its own, so it can run again on the same database. It prints each step and
exits 1 on any mismatch; tests/examples_test.go runs it twice. Whatever stops
it (no psycopg, no DATABASE_URL, a failed check, a database error) is said in
one line on stderr, with what to do.
"""

import contextlib
import os
import re
import sys
import uuid

NAME = "examples/python/purchase.py"


def fail(message):
    """Say why the story stops, in one line, and exit 1."""
    print(f"{NAME}: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(1)


try:
    import psycopg
    from psycopg.types.json import Jsonb
except ImportError:
    fail(f"psycopg 3 is missing for {sys.executable}: apt-get install python3-psycopg, "
         "and run the example with /usr/bin/python3, which sees Debian's packages")

OWNER = "customer-7"


class Stop(Exception):
    """An expected way for the story to stop: its message is the line to print."""


def expect(what, got, want):
    """Print what a step got and stop the story unless it is want."""
    print(f"{what}: {got!r}")
    if got != want:
        raise Stop(f"check failed: {what}: got {got!r}, want {want!r}; the database does not behave as this "
                   "checkout's pgconvo does: migrate it with this checkout (`go run ./cmd/migrate up`) "
                   "and run the example again")


@contextlib.contextmanager
def owner_tx(conn):
    """A transaction that names its owner first, with SET LOCAL
    (set_config(..., true) is SET LOCAL that takes a parameter); it commits
    only if the block succeeds."""
    with conn.transaction():
        conn.execute("SELECT set_config('convo.owner_id', %s, true)", [OWNER])
        yield


def next_step(decision, state):
    """What the loop does for a (decision, state) pair it reads, also after a
    crash: the state first, the decision only says why. After confirm_effect
    the decision stays 'confirm' while the state says 'pending': a loop that
    switched on the decision would ask again."""
    if decision == "replay":
        return "run"  # no effects: run the tool freely
    if state == "pending":
        return "send"  # (again) under idempotency_key, then settle
    if state == "awaiting_confirmation":
        return "ask"
    if state == "failed":
        return "answer 422" if decision == "rejected" else "report failure"
    return "report outcome"  # applied, compensated: never send again


class Processor:
    """A fake payment processor: a repeated idempotency key gets the first
    charge back, which is what makes re-sending after a crash safe."""

    def __init__(self):
        self.charges, self.sent = {}, 0

    def charge(self, key, amount_minor, currency):
        self.sent += 1
        return self.charges.setdefault(key, f"ch_{uuid.uuid4().hex[:8]}")

    def refund(self, charge_id):
        return "re_" + charge_id[3:]


# The settings README.md's first block registers, exactly.
SCHEMA = {
    "type": "object", "required": ["amount_minor", "currency"], "additionalProperties": False,
    "properties": {"amount_minor": {"type": "integer", "minimum": 1},
                   "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
}


def register(admin):
    """Allowlist purchase_credits as README.md does, as the DBA (register_tool
    is convo_admin's), and return its version. The same settings return the
    version registered; if the latest version has other settings,
    register_tool would make a new one: that is rolled back, and the story
    stops. jsonb goes in wrapped: Jsonb(value)."""
    with admin.transaction():
        (registered,) = admin.execute(
            "SELECT coalesce(max(version), 0) FROM convo.tools WHERE name = 'purchase_credits'").fetchone()
        (version,) = admin.execute(
            """SELECT convo.register_tool('purchase_credits', true, %s, p_idempotency_scope => 'fork_args',
                      p_amount_arg => 'amount_minor', p_currency_arg => 'currency')""", [Jsonb(SCHEMA)]).fetchone()
        if registered != 0 and version != registered:
            raise Stop(f"purchase_credits is registered with other settings (version {registered}); the example "
                       "expects the settings README.md registers (its first sql block): run it on a database "
                       "where purchase_credits is registered so, or not at all")
    return version


def buy(call_id, amount_minor):
    return [{"type": "tool_use", "id": call_id, "name": "purchase_credits",
             "input": {"amount_minor": amount_minor, "currency": "EUR"}}]


def main():
    app_url = os.environ.get("DATABASE_URL")
    if not app_url:
        raise Stop("DATABASE_URL is not set: export the URL `go run ./cmd/migrate up` printed")
    processor = Processor()

    # autocommit: each `with ....transaction()` is one BEGIN ... COMMIT.
    # prepare_threshold=None: no prepared statement under a name. By default
    # psycopg prepares a query as _pg3_0, _pg3_1, ... after its fifth run; a
    # pooler in transaction mode (PgBouncer before 1.21) leaves it on a server
    # connection it shares, and the next process to prepare that name there
    # fails with 42P05 (docs/deployment.md).
    with psycopg.connect(os.environ.get("ADMIN_DATABASE_URL") or app_url, autocommit=True,
                         prepare_threshold=None) as admin:
        print(f"purchase_credits: version {register(admin)}")

    with psycopg.connect(app_url, autocommit=True, prepare_threshold=None) as db:
        def one(sql, params):
            return db.execute(sql, params).fetchone()

        def effect_for(conv, call):
            return one("""SELECT effect_id, decision, state, idempotency_key, external_ref
                            FROM convo.effect_for_call(%s, %s)""", [conv, call])

        def append(conv, role, parts):
            return one("SELECT convo.append_message(%s, %s, %s)", [conv, role, Jsonb(parts)])[0]

        def edit(conv, message, text):
            return one("SELECT convo.edit_and_resend(%s, %s, %s)", [conv, message, Jsonb([{"type": "text", "text": text}])])[0]

        # 1. The model calls the tool: appending the call writes its ledger
        # row in the same transaction. Read what to do, and commit before sending.
        with owner_tx(db):
            (conv,) = one("SELECT convo.create_conversation(%s, %s)", [OWNER, "You sell credits."])
            ask = append(conv, "user", [{"type": "text", "text": "Buy me 500 credits, pleas"}])
            append(conv, "assistant", buy("toolu_p1", 500))
            charge, decision, state, key, _ = effect_for(conv, "toolu_p1")
        expect("toolu_p1", (decision, state, next_step(decision, state)), ("execute", "pending", "send"))
        expect("its key is fork_args:<sha256>", bool(re.fullmatch(r"fork_args:[0-9a-f]{64}", key)), True)

        # 2. Committed: send the charge under the key, then settle with the answer.
        ch1 = processor.charge(key, 500, "EUR")
        with owner_tx(db):
            db.execute("""SELECT convo.settle_effect(%s, %s, 'applied', p_external_ref => %s, p_http_status => 200,
                                                     p_evidence => %s)""", [conv, charge, ch1, Jsonb({"processor": "ok"})])
            append(conv, "tool", [{"type": "tool_result", "tool_use_id": "toolu_p1", "content": {"charge": ch1}}])

        # 3. The user fixes a typo; the model re-runs the purchase with the
        # same arguments: reuse, the same effect, already applied. Nothing is sent.
        with owner_tx(db):
            edit(conv, ask, "Buy me 500 credits, please")
            append(conv, "assistant", buy("toolu_p2", 500))
            effect, decision, state, _, ref = effect_for(conv, "toolu_p2")
        expect("toolu_p2", (decision, state, ref, next_step(decision, state)), ("reuse", "applied", ch1, "report outcome"))
        expect("toolu_p2 is the same effect", effect, charge)

        # 4. A second edit asks for another amount: a re-run held for a person.
        with owner_tx(db):
            edit(conv, ask, "Buy me 700 credits instead")
            append(conv, "assistant", buy("toolu_p3", 700))
            rerun, decision, state, _, _ = effect_for(conv, "toolu_p3")
        expect("toolu_p3", (decision, state, next_step(decision, state)), ("confirm", "awaiting_confirmation", "ask"))

        # 5. The person confirms: the decision stays confirm, the state says send.
        with owner_tx(db):
            db.execute("SELECT convo.confirm_effect(%s, %s, 'support:ana')", [conv, rerun])
            _, decision, state, rerun_key, _ = effect_for(conv, "toolu_p3")
        expect("toolu_p3 confirmed", (decision, state, next_step(decision, state)), ("confirm", "pending", "send"))
        expect("its key", rerun_key, f"rerun:{rerun}:of:{charge}")
        ch2 = processor.charge(rerun_key, 700, "EUR")
        with owner_tx(db):
            db.execute("SELECT convo.settle_effect(%s, %s, 'applied', p_external_ref => %s, p_http_status => 200)",
                       [conv, rerun, ch2])
        expect("charges sent", (processor.sent, len(processor.charges)), (2, 2))

        # 6. The first charge sits on no live branch: a reconciliation job
        # finds it, and the business refunds it.
        orphaned = """SELECT effect_id, external_ref, amount_minor, currency, tool_call_ids
                        FROM convo.orphaned_applied_effects WHERE conversation_id = %s"""
        with owner_tx(db):
            orphans = db.execute(orphaned, [conv]).fetchall()
        expect("orphaned", orphans, [(charge, ch1, 500, "EUR", ["toolu_p1", "toolu_p2"])])
        with owner_tx(db):
            db.execute("SELECT convo.compensate_effect(%s, %s, %s, %s)",
                       [conv, charge, processor.refund(ch1), Jsonb({"reason": "customer changed the amount"})])
            left = db.execute(orphaned, [conv]).fetchall()
        expect("orphaned after the refund", left, [])

        # 7. How a CV error arrives: e.sqlstate is the SQLSTATE,
        # e.diag.message_detail the DETAIL (ids only). A compare-and-set append
        # on a moved head is CV001.
        with owner_tx(db):
            (head,) = one("SELECT message_id FROM convo.path(%s) ORDER BY depth DESC LIMIT 1", [conv])
        try:
            with owner_tx(db):
                db.execute("SELECT convo.append_message(%s, 'user', %s, p_expected_head => %s)",
                           [conv, Jsonb([{"type": "text", "text": "thanks"}]), ask])
            raise Stop("check failed: a stale expected head was accepted")
        except psycopg.Error as e:
            expect("CV001", (e.sqlstate, f"current head {head}" in e.diag.message_detail), ("CV001", True))
            print(f"  {e.diag.message_primary}\n  DETAIL: {e.diag.message_detail}")
    print("ok: examples/python/purchase.py")


def what_to_do(e):
    """The one line for an error from psycopg: the server's message and
    SQLSTATE, and what to do about the usual causes."""
    if e.sqlstate is None and isinstance(e, psycopg.OperationalError):
        return (f"cannot connect ({e}): is the server of DATABASE_URL running? "
                "(`go run ./cmd/migrate up` starts the local one and prints its URL)")
    line = f"{e.diag.message_primary or e} (SQLSTATE {e.sqlstate})"
    if e.diag.message_detail:
        line += f", DETAIL: {e.diag.message_detail}"
    if e.sqlstate == "42501" and re.search(r"register_tool|tools", str(e)):
        line += "; register_tool is the DBA's: set ADMIN_DATABASE_URL to a login member of convo_admin"
    elif e.sqlstate == "3F000" or (e.sqlstate == "42P01" and "convo." in str(e)):
        line += "; pgconvo is not installed there: run `go run ./cmd/migrate up` on that database"
    return line


if __name__ == "__main__":
    try:
        main()
    except Stop as e:
        fail(e)
    except psycopg.Error as e:
        fail(what_to_do(e))
