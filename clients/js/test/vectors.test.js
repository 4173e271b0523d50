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

test('OUE thresholds and bit packing equal the Python ones', () => {
  const v = load('unary.json');
  for (const c of v.thresholds) {
    const oue = new OUE({ epsilon: c.epsilon, domain_size: 4 });
    assert.deepEqual([oue.truePerm.toString(), oue.otherPerm.toString()], [c.true, c.other], `eps ${c.epsilon}`);
  }
  v.rows.forEach((r, i) => assert.deepEqual(packBits(r), v.packed[i]));
});

/** Coins replayed from a vector: uniforms and 64-bit words in order. */
function fixedCoins(c) {
  let iu = 0;
  let iw = 0;
  return {
    uniform: () => c.uniforms[iu++],
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
