// The multi-attribute randomizers (src/multidim.js) against tests/vectors/multidim.json: the
// Python samplers of ldpkit.multidim replayed on fixed uniforms and 64-bit words give the
// same bodies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  AttributeSampling,
  buildBody,
  DuchiMean,
  Fourier,
  fromSpec,
  LaplaceMean,
  MULTIDIM,
  RSFD,
  SPL,
  TDG,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const cases = JSON.parse(readFileSync(dir + 'multidim.json', 'utf8'));

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
    u64Array: (n) => {
      assert.ok(iw + n <= c.words.length, 'ran out of words');
      return BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt));
    },
  };
}

const infoOf = (c) => ({
  mechanism: c.body.mechanism,
  fingerprint: c.body.fingerprint,
  report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
});

test('multi-attribute bodies from fixed coins equal the Python reports', () => {
  const seen = new Set();
  for (const c of cases) {
    seen.add(c.body.mechanism.mechanism);
    assert.deepEqual(buildBody(infoOf(c), c.values, fixedCoins(c)), c.body, JSON.stringify(c.body.mechanism));
  }
  assert.deepEqual([...seen].sort(), Object.keys(MULTIDIM).sort());
});

test('RSFD OUE-z thresholds equal the Python ones', () => {
  const withThresholds = cases.filter((c) => c.thresholds);
  assert.ok(withThresholds.length >= 2);
  for (const c of withThresholds) {
    const spec = fromSpec(c.body.mechanism);
    assert.deepEqual([spec.big.toString(), spec.small.toString()], c.thresholds);
  }
});

test('the exact losses equal the Python ones', () => {
  for (const c of cases.filter((x) => x.loss !== undefined)) {
    assert.equal(fromSpec(c.body.mechanism).privacyLoss(), c.loss, JSON.stringify(c.body.mechanism));
  }
  assert.ok(cases.filter((x) => x.loss !== undefined).length >= 17);
});

test('bad values and parameters are refused naming them', () => {
  const spl = new SPL({ epsilon: 1, domain_sizes: [3, 4] });
  assert.throws(() => spl.randomize([[0, 4]]), /value\[1\] must be an integer in \[0, 4\)/);
  assert.throws(() => spl.randomize([[0]]), /value must be a tuple of 2 items/);
  assert.throws(() => new SPL({ epsilon: 1, domain_sizes: [3] }), /domain_sizes must hold 2 to 64/);
  assert.throws(() => new RSFD({ epsilon: 1, domain_sizes: [3, 4], protocol: 'oue' }), /protocol must be/);
  const tdg = new TDG({ epsilon: 1, low: [0, 0], high: [1, 2], g2: 4 });
  assert.throws(() => tdg.randomize([[0.5, 2.5]]), /value\[1\] must be a real number in \[0, 2\]/);
  assert.throws(() => new TDG({ epsilon: 1, low: [0, 0], high: [1, 2] }), /g2 must be given/);
  const as = new AttributeSampling({ epsilon: 1, low: [0], high: [2], domain_sizes: [3] });
  assert.throws(() => as.randomize([[2.5, 0]]), /value\[0\] must be a real number in \[0, 2\]/);
  assert.throws(() => as.randomize([[1, 3]]), /value\[1\] must be an integer in \[0, 3\)/);
  assert.throws(() => new AttributeSampling({ epsilon: 1, low: [0], high: [1] }), /2 to 64 attributes/);
  assert.throws(() => new AttributeSampling({ epsilon: 1, domain_sizes: [3], mechanism: 'sr' }), /mechanism must be/);
  assert.throws(() => new AttributeSampling({ epsilon: 1, domain_sizes: [3], sampled: 3 }), /sampled must be an integer in \[1, 2\]/);
  const duchi = new DuchiMean({ epsilon: 1, low: [0, 0], high: [1, 2] });
  assert.throws(() => duchi.randomize([[0.5, NaN]]), /value\[1\] must be a real number in \[0, 2\]/);
  assert.throws(() => new DuchiMean({ epsilon: 1, low: [0], high: [1] }), /2 to 32 bounds/);
  assert.throws(() => new Fourier({ epsilon: 1, domain_sizes: [3, 4], way: 1 }), /way must be an integer in \[2, 2\]/);
  assert.throws(() => new Fourier({ epsilon: 1, domain_sizes: [2 ** 31, 2 ** 31, 2 ** 31] }), /fit in 62 bits/);
  const laplace = new LaplaceMean({ epsilon: 1, low: [0, 0], high: [1, 2] });
  assert.throws(() => laplace.randomize([[0.5]]), /value must be a tuple of 2 reals/);
  assert.throws(() => new LaplaceMean({ epsilon: 1e-3, low: [0, 0], high: [1, 1] }), /epsilon must be >= 0.001 d/);
});
