// The set-valued randomizers (src/sets.js) against tests/vectors/sets.json: the Python
// samplers of ldpkit.sets replayed on fixed uniforms and 64-bit words give the same bodies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildBody, fromSpec, normalizeSpec, PCKV, PaddingSampling, PrivKV, PrivSet, specFingerprint } from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const cases = JSON.parse(readFileSync(dir + 'sets.json', 'utf8'));

/** Coins replayed from a vector: uniforms and 64-bit words, each in order. */
function fixedCoins(c) {
  let iu = 0;
  let iw = 0;
  return {
    uniform: () => {
      assert.ok(iu < c.uniforms.length, 'ran out of uniforms');
      return c.uniforms[iu++];
    },
    u64: () => {
      assert.ok(iw < c.words.length, 'ran out of words');
      return BigInt(c.words[iw++]);
    },
    u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
  };
}

const infoOf = (c) => ({
  mechanism: c.body.mechanism,
  fingerprint: c.body.fingerprint,
  report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
});

test('set and key-value bodies from fixed coins equal the Python reports', () => {
  const seen = new Set();
  for (const c of cases) {
    const { mechanism, params } = c.body.mechanism;
    seen.add(`${mechanism}-${params.method ?? fromSpec(c.body.mechanism).oracleName ?? ''}`);
    assert.deepEqual(buildBody(infoOf(c), c.values, fixedCoins(c)), c.body, JSON.stringify(c.body.mechanism));
  }
  // every branch is covered: both oracles of PaddingSampling, both PCKV methods, PrivKV,
  // PrivSet (Floyd's subsets and the shuffle, sets sampled down)
  assert.deepEqual([...seen].sort(), [
    'PCKV-grr', 'PCKV-ue', 'PaddingSampling-grr', 'PaddingSampling-olh', 'PrivKV-', 'PrivSet-',
  ]);
  const privset = cases.filter((c) => c.body.mechanism.mechanism === 'PrivSet').map((c) => fromSpec(c.body.mechanism));
  assert.ok(privset.some((m) => m.k * m.k <= 8 * m.items) && privset.some((m) => m.k * m.k > 8 * m.items));
});

test('secure randomization gives well-formed set and key-value reports', () => {
  for (const c of cases) {
    const body = buildBody({ mechanism: c.body.mechanism, fingerprint: c.body.fingerprint }, c.values);
    for (const [k, a] of Object.entries(c.body.arrays)) {
      assert.equal(body.arrays[k].dtype, a.dtype);
      assert.deepEqual(body.arrays[k].shape, a.shape);
    }
  }
});

test('privacy losses equal the Python ones and stay within the budget', () => {
  for (const c of cases) {
    const m = fromSpec(c.body.mechanism);
    const loss = m.privacyLoss();
    const what = JSON.stringify(c.body.mechanism);
    // PrivKV: the 3 x 3 law's loss takes a libm log on both sides (no vector)
    if (c.privacy_loss !== null) assert.equal(loss, c.privacy_loss, what); // correctly rounded
    assert.ok(loss > 0 && loss <= m.epsilon, `${what}: ${loss}`);
  }
  // padding-and-sampling with GRR: log(1 + (e^eps - 1) / ell) < eps for ell > 1
  const ps = new PaddingSampling({ epsilon: 2, domain_size: 6, padding: 4, oracle: 'grr' });
  assert.ok(Math.abs(ps.privacyLoss() - Math.log1p(Math.expm1(2) / 4)) < 1e-9);
});

test('bad sets, pairs and parameters are refused with a message naming them', () => {
  const ps = new PaddingSampling({ epsilon: 1, domain_size: 4, padding: 2 });
  assert.throws(() => ps.randomize([[0, 4]]), /values must be items in \[0, 4\), got 4/);
  assert.throws(() => ps.randomize([[1, 1]]), /distinct/);
  assert.throws(() => ps.randomize([3]), /values must be arrays of item ids/);
  assert.throws(() => ps.randomize([[0.5]]), /values must be items/);
  const kv = new PCKV({ epsilon: 1, domain_size: 4, padding: 2 });
  assert.throws(() => kv.randomize([[[0, 1.5]]]), /values in \[-1, 1\], got 1.5/);
  assert.throws(() => kv.randomize([[[0, NaN]]]), /values in \[-1, 1\]/);
  assert.throws(() => kv.randomize([[[4, 0.1]]]), /keys in \[0, 4\)/);
  assert.throws(() => kv.randomize([[[1, 0.1], [1, 0.2]]]), /distinct keys/);
  assert.throws(() => kv.randomize([[0.5]]), /\[key, value\] pairs/);
  assert.throws(() => new PrivKV({ epsilon: 1, domain_size: 4 }).randomize([[['a', 0.1]]]), /keys in/);
  assert.throws(() => new PCKV({ epsilon: 1, domain_size: 4, padding: 2, method: 'oue' }), /method must be one of/);
  assert.throws(() => new PaddingSampling({ epsilon: 1, domain_size: 4, padding: 0 }), /padding must be an integer/);
  assert.throws(() => new PaddingSampling({ epsilon: 1, domain_size: 4, padding: 2, oracle: 'oue' }), /oracle must be one of/);
  assert.throws(() => new PrivKV({ epsilon: 41, domain_size: 4 }), /epsilon must be a number in/);
  assert.throws(() => new PrivKV({ epsilon: 1, domain_size: 1 }), /domain_size must be an integer/);
  const ps2 = new PrivSet({ epsilon: 1, domain_size: 4, padding: 2 });
  assert.throws(() => ps2.randomize([[0, 4]]), /values must be items in \[0, 4\), got 4/);
  assert.throws(() => ps2.randomize([[2, 2]]), /distinct/);
  assert.throws(() => new PrivSet({ epsilon: 1, domain_size: 4, padding: 0 }), /padding must be an integer in \[1, 1024\]/);
  assert.throws(() => new PrivSet({ epsilon: 1, domain_size: 4, padding: 2, subset_size: 5 }), /subset_size must be an integer in \[1, 4\]/);
  assert.throws(() => new PrivSet({ epsilon: 1, domain_size: 65000, padding: 600 }), /domain_size \+ padding must be <= 65536/);
  assert.throws(() => new PrivSet({ epsilon: 41, domain_size: 4, padding: 1 }), /epsilon must be a number in/);
});

test('PrivSet: k subsets of the padded domain, the Python k and branch coin', () => {
  // the variance-optimal k and the integer a / 2^62 (privset._law), as the Python specs have them
  const cases = [
    [{ epsilon: 1, domain_size: 6, padding: 2 }, 1],
    [{ epsilon: 3, domain_size: 1000, padding: 8 }, 5],
  ];
  for (const [params, k] of cases) assert.equal(new PrivSet(params).k, k);
  const m = new PrivSet({ epsilon: 3, domain_size: 1000, padding: 8 });
  assert.equal(m.a, 2075065584790237440n);
  assert.equal(m.privacyLoss(), 3);
  // every report has exactly k of the D bits set, none past D (D = 1008, then 9 and 11)
  const specs = [m, new PrivSet({ epsilon: 1, domain_size: 6, padding: 3 }), new PrivSet({ epsilon: 1, domain_size: 10, padding: 1, subset_size: 10 })];
  for (const spec of specs) {
    const body = spec.randomize([[], [1, 2], [0, 1, 2, 3, 4, 5]]);
    assert.deepEqual(body.bits.shape, [3, Math.ceil(spec.items / 8)]);
    for (const row of body.bits.data) {
      const ones = row.reduce((s, b) => s + b.toString(2).split('1').length - 1, 0);
      assert.equal(ones, spec.k);
      const tail = spec.items % 8 === 0 ? 0 : 0xff >> (spec.items % 8);
      assert.equal(row[row.length - 1] & tail, 0);
    }
  }
});

test('the set specs fingerprint as Python has them (question.js PARAMS)', async () => {
  for (const c of cases) {
    assert.equal(await specFingerprint(c.body.mechanism), c.body.fingerprint, JSON.stringify(c.body.mechanism));
  }
  // Python's defaults filled in
  assert.deepEqual(normalizeSpec({ mechanism: 'PrivSet', params: { epsilon: 2.0, domain_size: 6, padding: 2 } }).params, {
    epsilon: 2.0, domain_size: 6, padding: 2, subset_size: null,
  });
  assert.equal(await specFingerprint({ mechanism: 'PrivSet', params: { epsilon: 2.0, domain_size: 6, padding: 2 } }), '8c3587a5f06737cf');
  assert.throws(() => normalizeSpec({ mechanism: 'PrivKV', params: { epsilon: 1, domain_size: 2, fake_means: [0, 'a'] } }), /fake_means must be null or a list of finite numbers/);
});
