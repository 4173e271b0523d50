// The numerical randomizers against the Python side's grids and reports (tests/vectors/numeric.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  buildBody,
  fromSpec,
  DiscreteSquareWave,
  HybridMechanism,
  PiecewiseMechanism,
  SquareWave,
  uniformBelow,
  roundHalfEven,
  defaultBuckets,
  defaultHhShare,
  specFingerprint,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const vectors = JSON.parse(readFileSync(dir + 'numeric.json', 'utf8'));

test('SquareWave grids equal the Python ones over the epsilon sweep', () => {
  for (const c of vectors.grids.square_wave) {
    const where = JSON.stringify(c.params);
    if (c.error) {
      assert.throws(() => new SquareWave(c.params), /epsilon must be small enough/, where);
      continue;
    }
    const s = new SquareWave(c.params);
    assert.deepEqual(
      [s.steps, s.half, s.wLow.toString(), s.extra.toString(), s.total.toString()],
      [c.steps, c.half, c.w_low, c.extra, c.total],
      where,
    );
    assert.equal(s.privacyLoss(), c.privacy_loss, where);
    assert.ok(s.privacyLoss() <= c.params.epsilon, where);
  }
});

test('PiecewiseMechanism grids equal the Python ones', () => {
  for (const c of vectors.grids.piecewise) {
    const where = JSON.stringify(c.params);
    const g = new PiecewiseMechanism(c.params).grid;
    assert.deepEqual(
      [g.plateau, g.wLow.toString(), g.wHigh.toString(), g.slope, g.intercept],
      [c.plateau, c.w_low, c.w_high, c.slope, c.intercept],
      where,
    );
    assert.equal(new PiecewiseMechanism(c.params).privacyLoss(), c.privacy_loss, where);
  }
});

test('HybridMechanism and DiscreteSquareWave constants equal the Python ones', () => {
  for (const c of vectors.grids.hybrid) {
    const h = new HybridMechanism(c.params);
    const where = JSON.stringify(c.params);
    assert.equal(h.pmProbability, c.pm_probability, where);
    assert.deepEqual([h.sr.wLow.toString(), h.sr.wHigh.toString(), h.sr.magnitude], [c.sr_w_low, c.sr_w_high, c.sr_magnitude], where);
    assert.equal(h.privacyLoss(), c.privacy_loss, where);
  }
  for (const c of vectors.grids.discrete_square_wave) {
    const d = new DiscreteSquareWave(c.params);
    assert.deepEqual([d.halfWidth, d.wLow.toString(), d.wHigh.toString()], [c.half_width, c.w_low, c.w_high], JSON.stringify(c.params));
  }
});

/** Coins replayed from a vector: uniforms and 64-bit words in order. */
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
  };
}

test('numerical reports from fixed coins equal the Python reports, value for value', () => {
  for (const c of vectors.bodies) {
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    const body = buildBody(info, c.values, fixedCoins(c));
    assert.deepEqual(body, c.body, JSON.stringify(c.body.mechanism));
  }
});

test('secure numerical reports are on the Python grid shape', () => {
  for (const c of vectors.bodies) {
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    const body = buildBody(info, c.values);
    assert.equal(body.arrays.values.dtype, c.body.arrays.values.dtype);
    assert.equal(body.arrays.values.data.length, c.values.length);
  }
});

test('uniformBelow rejects the words past the last whole multiple of T', () => {
  const total = 3n << 61n; // 2^64 / T = 2.67: limit = 2T, so words >= 2T are rejected
  const words = [(2n * total) + 5n, total + 7n];
  let i = 0;
  assert.equal(uniformBelow(total, { u64: () => words[i++] }), 7n);
  assert.equal(i, 2);
});

test('Python round() semantics and bad numerical input', () => {
  assert.deepEqual([0.5, 1.5, 2.5, 2.4, 2.6].map(roundHalfEven), [0, 2, 2, 2, 3]);
  const pm = { mechanism: 'PiecewiseMechanism', params: { epsilon: 1, low: 0, high: 10, report_cells: 64 } };
  assert.throws(() => buildBody({ mechanism: pm, fingerprint: 'x' }, [11]), /value must be a real number in \[0, 10\]/);
  assert.throws(() => buildBody({ mechanism: pm, fingerprint: 'x' }, [NaN]), /value must be a real number/);
  const big = { mechanism: 'SquareWave', params: { epsilon: 41 } };
  assert.throws(() => buildBody({ mechanism: big, fingerprint: 'x' }, [0.5]), /epsilon must be a number in \[0.000001, 40\]/);
  const tiny = { mechanism: 'HybridMechanism', params: { epsilon: 1e-7 } };
  assert.throws(() => buildBody({ mechanism: tiny, fingerprint: 'x' }, [0.5]), /epsilon must be/);
});

test('log-scale SquareWave: Lambda equals the Python one, bad scales are refused', () => {
  for (const c of vectors.grids.square_wave_log) {
    const s = new SquareWave(c.params);
    assert.equal(s.logSpan, c.log_span, JSON.stringify(c.params));
    // the log scale changes the rounding only: the grid law and report grid are the linear ones
    const linear = new SquareWave({ ...c.params, log_scale: null });
    assert.deepEqual([s.steps, s.half, s.total], [linear.steps, linear.half, linear.total]);
  }
  const spec = (log_scale, high = 100) => ({ mechanism: 'SquareWave', params: { epsilon: 1, high, buckets: 96, log_scale } });
  for (const bad of [0, -1, NaN, Infinity, '1']) {
    assert.throws(() => fromSpec(spec(bad)), /log_scale must be a positive number/, String(bad));
  }
  assert.throws(() => fromSpec(spec(1e-310, 1e300)), /log_scale must be a positive number/);
  // the ends of [low, high] are the ends of the geometric grid, for any uniform
  const s = fromSpec(spec(0.1));
  for (const u of [0, 0.5, 1 - 2 ** -53]) {
    assert.deepEqual([s.gridInput(0, u), s.gridInput(100, u)], [0, s.steps]);
  }
});

test('AutoDistribution and HierarchicalHistogram reports from fixed coins equal the Python reports', () => {
  assert.ok(vectors.tree_bodies.length >= 9);
  for (const c of vectors.tree_bodies) {
    const info = {
      mechanism: c.body.mechanism,
      fingerprint: c.body.fingerprint,
      report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
    };
    const body = buildBody(info, c.values, fixedCoins(c));
    assert.deepEqual(body, c.body, JSON.stringify(c.body.mechanism));
    // the spec dict as the collector sends it gives the same fingerprint here
    const secure = buildBody(info, c.values);
    assert.deepEqual(Object.keys(secure.arrays).sort(), Object.keys(c.body.arrays).sort());
  }
});

test('AutoDistribution: defaults, fingerprints and bad input as on the Python side', async () => {
  for (const c of vectors.tree_bodies) {
    // buckets and hh_share left out resolve to Python's defaults (same fingerprint)
    const p = { ...c.body.mechanism.params };
    if (c.body.mechanism.mechanism === 'AutoDistribution' && p.expected_n !== null && p.buckets === defaultBuckets(p.expected_n)) {
      delete p.buckets;
    }
    if (c.body.mechanism.mechanism === 'AutoDistribution' && p.hh_share === defaultHhShare(p.epsilon)) delete p.hh_share;
    assert.equal(await specFingerprint({ mechanism: c.body.mechanism.mechanism, params: p }), c.body.fingerprint, JSON.stringify(p));
  }
  assert.deepEqual([null, 1, 1000, 4096, 4097, 10000, 1e6].map(defaultBuckets), [1024, 64, 128, 256, 512, 512, 1024]);
  assert.deepEqual([0.5, 1.0, 1.4999999, 1.5, 4].map(defaultHhShare), [0.25, 0.25, 0.25, 0.25, 0.25]);
  const auto = (params) => fromSpec({ mechanism: 'AutoDistribution', params: { epsilon: 2, ...params } });
  assert.equal(auto({}).hhShare, 0.25);
  assert.equal(auto({ epsilon: 1, hh_share: 0 }).tree, null);
  assert.equal(auto({ epsilon: 1 }).hhShare, 0.25);
  assert.throws(() => auto({ hh_share: 1.5 }), /hh_share must be a number in \[0, 1\]/);
  assert.throws(() => auto({ hh_share: NaN }), /hh_share must be a number in \[0, 1\]/);
  assert.throws(() => auto({ buckets: 1 }), /buckets must be an integer in \[2, /);
  assert.throws(() => auto({ expected_n: 0 }), /expected_n must be an integer in \[1, /);
  assert.throws(() => auto({ epsilon: 41 }), /epsilon must be a number in \[0.000001, 40\]/);
  assert.throws(() => auto({ low: 1, high: 0 }), /low and high must be finite numbers/);
  for (const bad of [1.5, -0.1, NaN, '0.5']) {
    assert.throws(() => auto({}).randomize([0.5, bad]), /value must be a real number in \[0, 1\]/, String(bad));
  }
  const hh = (params) => fromSpec({ mechanism: 'HierarchicalHistogram', params: { epsilon: 1, ...params } });
  assert.throws(() => hh({ oracle: 'HRR' }), /oracle must be null or one of GRR, OLH/);
  assert.throws(() => hh({ branching: 1 }), /branching must be an integer in \[2, /);
  assert.throws(() => hh({ buckets: 1 }), /buckets must be an integer in \[2, /);
  assert.deepEqual(hh({ buckets: 64 }).levels.map((o) => o.name), ['GRR', 'OLH', 'OLH']);
  // the privacy loss is the larger of the branches' realized losses, never above epsilon
  for (const e of [0.5, 1.5, 2, 4, 10]) {
    const a = auto({ epsilon: e, hh_share: 0.25, buckets: 256 });
    assert.ok(a.privacyLoss() <= e && a.privacyLoss() >= a.wave.privacyLoss(), String(e));
  }
});

test('AutoDistribution: the branch coin is drawn before and apart from the value', () => {
  // the same coins for two different values: the same branch, user by user
  const a = fromSpec({ mechanism: 'AutoDistribution', params: { epsilon: 2, buckets: 64 } });
  const coinsFor = () => {
    let s = 0n;
    return {
      uniform: () => Number((s = (s * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n)) >> 11n) / 2 ** 53,
      u64: () => (s = (s * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n)),
    };
  };
  const branch = (v) => a.randomize(Array(400).fill(v), coinsFor()).levels.data.map((k) => k > 0);
  const hh = branch(0).filter(Boolean).length;
  assert.ok(hh > 50 && hh < 150, `${hh} of 400 HH users at r = 0.25`);
  assert.deepEqual(branch(0), branch(1));
  assert.deepEqual(branch(0), branch(0.37));
});
