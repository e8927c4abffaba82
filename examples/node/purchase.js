// The seed's purchase story from Node.js, with the pg package: a charge is
// applied; an edit re-runs the same purchase (reused, not charged twice); a
// second edit asks for another amount (held for confirmation, then confirmed
// and charged); the first charge, now on no live branch, is listed as
// orphaned until a refund compensates it. examples/purchase.sql,
// examples/python and examples/go tell the same story.
//
// Run it with: cd examples/node && npm ci && DATABASE_URL=... node purchase.js
// DATABASE_URL connects as the application (a login member of convo_app);
// ADMIN_DATABASE_URL, if set, as the DBA (a member of convo_admin) for
// register_tool. Unset, DATABASE_URL does both (the superuser URL that
// `migrate up` prints may). Every run makes a conversation of its own, so it
// can run again on the same database. It prints each step and exits 1 on
// any mismatch; tests/examples_test.go runs it twice. Whatever stops it
// (no pg package, no DATABASE_URL, a failed check, a database error) is
// said in one line on stderr, with what to do.
'use strict';

const crypto = require('node:crypto');
const { isDeepStrictEqual } = require('node:util');

const NAME = 'examples/node/purchase.js';

// fail says why the story stops, in one line, and exits 1.
function fail(message) {
  console.error(`${NAME}: ${message}`);
  process.exit(1);
}

let Client;
try {
  ({ Client } = require('pg'));
} catch (err) {
  if (err.code !== 'MODULE_NOT_FOUND') throw err;
  fail('the pg package is missing: run `npm ci` in examples/node');
}

const OWNER = 'customer-7';

// Stop is an expected way for the story to stop: its message is the line
// to print.
class Stop extends Error {}

// expect prints what a step got and stops the story unless it is want.
function expect(what, got, want) {
  console.log(`${what}: ${JSON.stringify(got)}`);
  if (!isDeepStrictEqual(got, want)) {
    throw new Stop(`check failed: ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}; ` +
      'the database does not behave as this checkout\'s pgconvo does: migrate it with this checkout ' +
      '(`go run ./cmd/migrate up`) and run the example again');
  }
}

// inOwnerTx runs fn in a transaction that names its owner first, with SET
// LOCAL (set_config(..., true) is SET LOCAL that takes a parameter), and
// commits only if fn succeeds.
async function inOwnerTx(db, fn) {
  await db.query('BEGIN');
  try {
    await db.query("SELECT set_config('convo.owner_id', $1, true)", [OWNER]);
    const result = await fn();
    await db.query('COMMIT');
    return result;
  } catch (err) {
    await db.query('ROLLBACK');
    throw err;
  }
}

// nextStep is what the loop does for a (decision, state) pair it reads,
// also after a crash: the state first, the decision only says why. After
// confirm_effect the decision stays 'confirm' while the state says
// 'pending': a loop that switched on the decision would ask again.
function nextStep({ decision, state }) {
  if (decision === 'replay') return 'run';   // no effects: run the tool freely
  switch (state) {
    case 'pending': return 'send';           // (again) under idempotency_key, then settle
    case 'awaiting_confirmation': return 'ask';
    case 'failed': return decision === 'rejected' ? 'answer 422' : 'report failure';
    default: return 'report outcome';        // applied, compensated: never send again
  }
}

// processor is a fake payment processor: a repeated idempotency key gets the
// first charge back, which is what makes re-sending after a crash safe.
const processor = {
  charges: new Map(),
  sent: 0,
  charge(key, amountMinor, currency) {
    this.sent++;
    if (!this.charges.has(key)) this.charges.set(key, { id: `ch_${crypto.randomUUID().slice(0, 8)}`, amountMinor, currency });
    return this.charges.get(key).id;
  },
  refund(chargeID) { return `re_${chargeID.slice(3)}`; },
};

// The settings README.md's first block registers, exactly.
const schema = {
  type: 'object', required: ['amount_minor', 'currency'], additionalProperties: false,
  properties: { amount_minor: { type: 'integer', minimum: 1 }, currency: { type: 'string', pattern: '^[A-Z]{3}$' } },
};

// register allowlists purchase_credits as README.md does, as the DBA
// (register_tool is convo_admin's), and returns its version. The same
// settings return the version registered; if the latest version has other
// settings, register_tool would make a new one: that is rolled back, and
// the story stops. jsonb goes in as JSON text: JSON.stringify, always. (pg
// would send a JS array as a PostgreSQL array, not as JSON.)
async function register(admin) {
  await admin.query('BEGIN');
  try {
    const { rows: [{ registered }] } = await admin.query(
      "SELECT coalesce(max(version), 0) AS registered FROM convo.tools WHERE name = 'purchase_credits'");
    const { rows: [{ version }] } = await admin.query(
      `SELECT convo.register_tool('purchase_credits', true, $1, p_idempotency_scope => 'fork_args',
              p_amount_arg => 'amount_minor', p_currency_arg => 'currency') AS version`, [JSON.stringify(schema)]);
    if (registered !== 0 && version !== registered) {
      throw new Stop(`purchase_credits is registered with other settings (version ${registered}); the example expects ` +
        'the settings README.md registers (its first sql block): run it on a database where purchase_credits is ' +
        'registered so, or not at all');
    }
    await admin.query('COMMIT');
    return version;
  } catch (err) {
    await admin.query('ROLLBACK');
    throw err;
  }
}

function buy(id, amountMinor) {
  return [{ type: 'tool_use', id, name: 'purchase_credits', input: { amount_minor: amountMinor, currency: 'EUR' } }];
}

async function main() {
  const appURL = process.env.DATABASE_URL;
  if (!appURL) throw new Stop('DATABASE_URL is not set: export the URL `go run ./cmd/migrate up` printed');

  // No query here has a `name`: pg then parses each into the unnamed
  // statement, which ends with its query, so the example runs behind a pooler
  // in transaction mode too. A named query is prepared on the server
  // connection, which such a pooler shares with other clients
  // (docs/deployment.md).
  const admin = new Client({ connectionString: process.env.ADMIN_DATABASE_URL || appURL });
  await admin.connect();
  try {
    console.log(`purchase_credits: version ${await register(admin)}`);
  } finally {
    await admin.end();
  }

  const db = new Client({ connectionString: appURL });
  await db.connect();
  try {
    const one = async (sql, params) => (await db.query(sql, params)).rows[0];
    const effectFor = (conv, call) => one(
      'SELECT effect_id, decision, state, idempotency_key, external_ref FROM convo.effect_for_call($1, $2)', [conv, call]);
    const append = async (conv, role, parts) =>
      (await one('SELECT convo.append_message($1, $2, $3) AS id', [conv, role, JSON.stringify(parts)])).id;
    const edit = async (conv, message, text) => (await one('SELECT convo.edit_and_resend($1, $2, $3) AS id',
      [conv, message, JSON.stringify([{ type: 'text', text }])])).id;

    // 1. The model calls the tool: appending the call writes its ledger row
    // in the same transaction. Read what to do, and commit before sending.
    const { conv, ask, p1 } = await inOwnerTx(db, async () => {
      const conv = (await one('SELECT convo.create_conversation($1, $2) AS id', [OWNER, 'You sell credits.'])).id;
      const ask = await append(conv, 'user', [{ type: 'text', text: 'Buy me 500 credits, pleas' }]);
      await append(conv, 'assistant', buy('toolu_p1', 500));
      return { conv, ask, p1: await effectFor(conv, 'toolu_p1') };
    });
    expect('toolu_p1', [p1.decision, p1.state, nextStep(p1)], ['execute', 'pending', 'send']);
    expect('its key is fork_args:<sha256>', /^fork_args:[0-9a-f]{64}$/.test(p1.idempotency_key), true);

    // 2. Committed: send the charge under the key, then settle with the answer.
    const ch1 = processor.charge(p1.idempotency_key, 500, 'EUR');
    await inOwnerTx(db, async () => {
      await db.query(`SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => 200,
                             p_evidence => $4)`, [conv, p1.effect_id, ch1, JSON.stringify({ processor: 'ok' })]);
      await append(conv, 'tool', [{ type: 'tool_result', tool_use_id: 'toolu_p1', content: { charge: ch1 } }]);
    });

    // 3. The user fixes a typo; the model re-runs the purchase with the same
    // arguments: reuse, the same effect, already applied. Nothing is sent.
    const p2 = await inOwnerTx(db, async () => {
      await edit(conv, ask, 'Buy me 500 credits, please');
      await append(conv, 'assistant', buy('toolu_p2', 500));
      return effectFor(conv, 'toolu_p2');
    });
    expect('toolu_p2', [p2.decision, p2.state, p2.external_ref, nextStep(p2)], ['reuse', 'applied', ch1, 'report outcome']);
    expect('toolu_p2 is the same effect', p2.effect_id, p1.effect_id);

    // 4. A second edit asks for another amount: a re-run held for a person.
    const p3 = await inOwnerTx(db, async () => {
      await edit(conv, ask, 'Buy me 700 credits instead');
      await append(conv, 'assistant', buy('toolu_p3', 700));
      return effectFor(conv, 'toolu_p3');
    });
    expect('toolu_p3', [p3.decision, p3.state, nextStep(p3)], ['confirm', 'awaiting_confirmation', 'ask']);

    // 5. The person confirms: the decision stays confirm, the state says send.
    const confirmed = await inOwnerTx(db, async () => {
      await db.query("SELECT convo.confirm_effect($1, $2, 'support:ana')", [conv, p3.effect_id]);
      return effectFor(conv, 'toolu_p3');
    });
    expect('toolu_p3 confirmed', [confirmed.decision, confirmed.state, nextStep(confirmed)], ['confirm', 'pending', 'send']);
    expect('its key', confirmed.idempotency_key, `rerun:${p3.effect_id}:of:${p1.effect_id}`);
    const ch2 = processor.charge(confirmed.idempotency_key, 700, 'EUR');
    await inOwnerTx(db, () => db.query(`SELECT convo.settle_effect($1, $2, 'applied', p_external_ref => $3, p_http_status => 200)`,
      [conv, p3.effect_id, ch2]));
    expect('charges sent', [processor.sent, processor.charges.size], [2, 2]);

    // 6. The first charge sits on no live branch: a reconciliation job finds
    // it, and the business refunds it.
    const orphaned = () => db.query(`SELECT effect_id, external_ref, amount_minor, currency, tool_call_ids
                                       FROM convo.orphaned_applied_effects WHERE conversation_id = $1`, [conv]);
    const orphans = await inOwnerTx(db, orphaned);
    expect('orphaned', orphans.rows.map(o => [o.effect_id, o.external_ref, String(o.amount_minor), o.currency, o.tool_call_ids]),
      [[p1.effect_id, ch1, '500', 'EUR', ['toolu_p1', 'toolu_p2']]]);
    const left = await inOwnerTx(db, async () => {
      await db.query('SELECT convo.compensate_effect($1, $2, $3, $4)',
        [conv, p1.effect_id, processor.refund(ch1), JSON.stringify({ reason: 'customer changed the amount' })]);
      return (await orphaned()).rowCount;
    });
    expect('orphaned after the refund', left, 0);

    // 7. How a CV error arrives: err.code is the SQLSTATE, err.detail the
    // DETAIL (ids only). A compare-and-set append on a moved head is CV001.
    const head = (await inOwnerTx(db, () => one('SELECT message_id FROM convo.path($1) ORDER BY depth DESC LIMIT 1', [conv]))).message_id;
    let caught;
    try {
      await inOwnerTx(db, () => db.query('SELECT convo.append_message($1, $2, $3, p_expected_head => $4)',
        [conv, 'user', JSON.stringify([{ type: 'text', text: 'thanks' }]), ask]));
    } catch (err) {
      caught = err;
    }
    expect('CV001', caught && [caught.code, caught.detail.includes(`current head ${head}`)], ['CV001', true]);
    console.log(`  ${caught.message}\n  DETAIL: ${caught.detail}`);
  } finally {
    await db.end();
  }
  console.log('ok: examples/node/purchase.js');
}

// whatToDo is the one line for an error from pg: the server's message and
// SQLSTATE, and what to do about the usual causes.
function whatToDo(err) {
  if (['ECONNREFUSED', 'ENOTFOUND', 'ECONNRESET', 'ETIMEDOUT'].includes(err.code)) {
    return `cannot connect (${err.message || err.code}): is the server of DATABASE_URL running? ` +
      '(`go run ./cmd/migrate up` starts the local one and prints its URL)';
  }
  let line = `${err.message} (SQLSTATE ${err.code})`;
  if (err.detail) line += `, DETAIL: ${err.detail}`;
  if (err.code === '42501' && /register_tool|tools/.test(err.message)) {
    line += '; register_tool is the DBA\'s: set ADMIN_DATABASE_URL to a login member of convo_admin';
  } else if (err.code === '3F000' || (err.code === '42P01' && /convo\./.test(err.message))) {
    line += '; pgconvo is not installed there: run `go run ./cmd/migrate up` on that database';
  }
  return line;
}

main().catch((err) => {
  if (err instanceof Stop) fail(err.message);
  if (typeof err.code === 'string') fail(whatToDo(err).replace(/\s+/g, ' '));
  console.error(`${NAME}:`, err); // a bug in the example: the stack helps
  process.exit(1);
});
