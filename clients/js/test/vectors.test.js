// Checks the client against the vectors the Python side writes (tests/vectors/*.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  hashParameters,
  localHash,
  optimalHashRange,
  unaryThresholds,
  packBits,
  buildBody,
  OUE,
  rrWeights,
  ratioLoss,
  uniformBelow,
  RR_MAX_EPSILON,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const load = (name) => JSON.parse(readFileSync(dir + name, 'utf8'));

test('OLH hash parameters and hashes equal the Python ones', () => {
  const v = load('hashing.json');
  v.seeds.forEach((s, i) => {
    const [a, b] = hashParameters(BigInt(s));
    assert.equal(a.toString(), v.a[i]);
    assert.equal(b.toString(), v.b[i]);
  });
  for (const c of v.cases) {
    const got = v.seeds.map((s) => v.items.map((x) => localHash(BigInt(s), x, c.range)));
    assert.deepEqual(got, c.hashes, `hash range ${c.range}`);
  }
  for (const c of v.optimal_hash_range) assert.equal(optimalHashRange(c.epsilon), c.g, `eps ${c.epsilon}`);
});

test('OUE thresholds, losses and bit packing equal the Python ones', () => {
  const v = load('unary.json');
  // a unary bit is a 64-bit word against T: the same resolution as Python's samplers
  assert.equal(v.probability_scale, (1n << 64n).toString());
  for (const c of v.thresholds) {
    const oue = new OUE({ epsilon: c.epsilon, domain_size: 4 });
    assert.deepEqual([oue.truePerm.toString(), oue.otherPerm.toString()], [c.true, c.other], `eps ${c.epsilon}`);
    assert.equal(oue.privacyLoss(), c.loss, `eps ${c.epsilon}`);
    assert.ok(oue.privacyLoss() <= c.epsilon);
  }
  v.rows.forEach((r, i) => assert.deepEqual(packBits(r), v.packed[i]));
});

test('randomized-response weights equal Python rr_weights, bit for bit', () => {
  const v = load('coins.json');
  assert.ok(v.rr_weights.length > 500);
  for (const c of v.rr_weights) {
    const what = `eps ${c.epsilon}, ${c.n_others} others`;
    if (c.error) {
      assert.throws(() => rrWeights(c.epsilon, c.n_others), /epsilon must be/, what);
      continue;
    }
    const [wKeep, wOther] = rrWeights(c.epsilon, c.n_others);
    assert.deepEqual([wKeep.toString(), wOther.toString()], [c.w_keep, c.w_other], what);
    assert.equal(ratioLoss(wOther, wKeep), c.loss, what);
    assert.ok(c.loss <= c.epsilon, what);
    assert.ok(wKeep + BigInt(c.n_others) * wOther <= 1n << 62n, what);
  }
});

test('uniform integers below T from 64-bit words equal the Python rule', () => {
  for (const c of load('coins.json').uniform_below) {
    const total = BigInt(c.total);
    // each expected U consumes the words up to and including its accepted one
    const coins = fixedCoins(c);
    const got = c.u.filter((u) => u !== null).map(() => uniformBelow(total, coins).toString());
    assert.deepEqual(got, c.u.filter((u) => u !== null), `T = ${c.total}`);
  }
});

test('epsilon above the max_epsilon of the mechanism is refused', () => {
  const spec = (mechanism, epsilon) => ({
    mechanism: { mechanism, params: { epsilon, domain_size: 8 } },
    fingerprint: 'x',
  });
  for (const [name, top] of [['GRR', RR_MAX_EPSILON], ['OLH', RR_MAX_EPSILON], ['HadamardResponse', RR_MAX_EPSILON], ['OUE', 30]]) {
    assert.equal(buildBody(spec(name, top), [1]).arrays !== undefined, true);
    assert.throws(() => buildBody(spec(name, top * 1.0001), [1]), new RegExp(`epsilon must be a number in \\[0\\.000001, ${top}\\]`), name);
    assert.throws(() => buildBody(spec(name, 5e-7), [1]), /epsilon must be a number in/, name);
    assert.throws(() => buildBody(spec(name, NaN), [1]), /epsilon must be a number in/, name);
  }
});

/** Coins replayed from a vector: 64-bit words in order (no float coin is ever drawn). */
function fixedCoins(c) {
  let iw = 0;
  return {
    uniform: () => {
      throw new Error('a categorical randomizer drew a float coin');
    },
    u64: () => BigInt(c.words[iw++]),
    u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
  };
}

test('JSON bodies from fixed coins equal the Python reports', () => {
  for (const c of load('bodies.json')) {
    const info = {
      mechanism: c.body.mechanism,
      fingerprint: c.body.fingerprint,
      report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
    };
    const body = buildBody(info, c.values, fixedCoins(c));
    assert.deepEqual(body, c.body, c.body.mechanism.mechanism);
  }
});

test('secure randomization gives well-formed reports', () => {
  for (const c of load('bodies.json')) {
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    const body = buildBody(info, c.values);
    for (const [k, a] of Object.entries(c.body.arrays)) {
      assert.equal(body.arrays[k].dtype, a.dtype);
      assert.deepEqual(body.arrays[k].shape, a.shape);
    }
  }
});

test('bad input is refused with a message naming it', () => {
  const info = { mechanism: { mechanism: 'GRR', params: { epsilon: 1, domain_size: 4 } }, fingerprint: 'x' };
  assert.throws(() => buildBody(info, [4]), /value must be an integer in \[0, 4\)/);
  assert.throws(() => buildBody({ ...info, mechanism: { mechanism: 'Nope', params: {} } }, [0]), /mechanism must be one of/);
  assert.throws(() => unaryThresholds(0.5, 0.5 - 1e-30, 1e-30), /too small/);
});
