// The longitudinal randomizers and the device against the Python vectors
// (tests/vectors/longitudinal.json, written by tests/vectors/make_vectors.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  BudgetExceededError,
  DBitFlipPM,
  Device,
  OneBitMean,
  longitudinalFromSpec,
  memoryStore,
  specFingerprint,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const v = JSON.parse(readFileSync(dir + 'longitudinal.json', 'utf8'));

function fromHex(text) {
  return Uint8Array.from(text.match(/../g), (h) => parseInt(h, 16));
}

function fixedWords(words, uniforms = []) {
  let iw = 0;
  let iu = 0;
  return {
    uniform: () => {
      assert.ok(iu < uniforms.length, 'ran out of uniforms');
      return uniforms[iu++];
    },
    usedUniforms: () => iu,
    u64: () => {
      assert.ok(iw < words.length, 'ran out of words');
      return BigInt(words[iw++]);
    },
    u64Array: (n) => BigUint64Array.from(words.slice(iw, (iw += n)).map(BigInt)),
    used: () => iw,
  };
}

test('integer laws, losses and fingerprints equal the Python ones', async () => {
  for (const c of v.laws) {
    const mech = longitudinalFromSpec(c.spec);
    const rounds =
      c.spec.mechanism === 'LGRR' || c.spec.mechanism === 'LOLOHA'
        ? [
            [mech.a, mech.b],
            [mech.c, mech.e],
          ]
        : [
            [mech.tp1, mech.tq1],
            [mech.tp2, mech.tq2],
          ];
    assert.deepEqual(rounds.map((r) => r.map(String)), c.rounds, JSON.stringify(c.spec));
    assert.equal(mech.privacyLoss(), c.privacy_loss);
    assert.deepEqual([1, 2].map((k) => mech.longitudinalPrivacyLoss(k)), c.longitudinal_privacy_loss);
    assert.equal(await specFingerprint(c.spec), c.fingerprint);
  }
});

test('reports of fixed words equal the Python ones', () => {
  for (const c of v.bodies) {
    const mech = longitudinalFromSpec(c.spec);
    const coins = fixedWords(c.words);
    assert.deepEqual(mech.randomize(c.values, coins), c.body.arrays, JSON.stringify(c.spec));
    assert.equal(coins.used(), c.words.length);
  }
});

test('the device derives the permanent answers Python derives', async () => {
  const secret = fromHex(v.device.secret);
  for (const store of [memoryStore(), memoryStore()]) {
    const device = new Device({ secret, store });
    for (const c of v.device.cases) {
      for (const [i, value] of c.values.entries()) {
        const got = await device.permanent(c.spec, value);
        const want = c.permanent[i];
        const flat = (x) => (Array.isArray(x) ? x : [x]).map(String);
        assert.deepEqual(flat(got), flat(want), JSON.stringify([c.spec, value]));
      }
    }
  }
});

test('a device reloaded from its store keeps its secret and memo; a lost store re-derives', async () => {
  const spec = v.device.cases[0].spec;
  const store = memoryStore();
  const first = new Device({ store });
  await first.report(spec, [1, 2]);
  const again = new Device({ store });
  assert.deepEqual(again.secret, first.secret);
  assert.deepEqual(again.memo, first.memo);
  assert.deepEqual(again.states, first.states);
  const lost = new Device({ secret: first.secret, store: memoryStore() });
  assert.deepEqual(await lost.permanent(spec, 1), await first.permanent(spec, 1));
  assert.throws(() => new Device({ secret: new Uint8Array(32).fill(1), store }), /secret must be the one stored/);
});

test('the device refuses a new value past its budget and answers memoized ones', async () => {
  const spec = { mechanism: 'LGRR', params: { epsilon: 0.5, domain_size: 16, epsilon_inf: 1.0 } };
  const device = new Device({ store: memoryStore(), budget: 2.0 });
  await device.report(spec, [3]);
  await device.report(spec, [5, 3]);
  await assert.rejects(device.report(spec, [7]), BudgetExceededError);
  await assert.rejects(device.report(spec, [7]), /budget must cover/);
  for (let day = 0; day < 20; day++) await device.report(spec, [3, 5]);
  assert.ok(Math.abs((await device.privacySpent(spec)) - 2.0) < 1e-12);
  assert.equal(device.distinctValues(await specFingerprint(spec)), 2);
});

test('memoized reports differ across days (fresh instantaneous coins)', async () => {
  const spec = { mechanism: 'LOSUE', params: { epsilon: 1.0, domain_size: 32, epsilon_inf: 2.0 } };
  const device = new Device({ store: memoryStore() });
  const reports = new Set();
  for (let day = 0; day < 10; day++) reports.add(JSON.stringify((await device.report(spec, [4])).bits.data));
  assert.ok(reports.size > 1);
});

test('a LOLOHA device keeps one hash seed and memoizes per hashed value', async () => {
  const spec = { mechanism: 'LOLOHA', params: { epsilon: 0.5, domain_size: 40, epsilon_inf: 1.0, hash_range: 2 } };
  const store = memoryStore();
  // A fixed secret: with a random one the device's hash seed may map all 40 values to one of
  // the 2 buckets now and then (its multiplier near 0 or 2^63), and nothing would be refused.
  const secret = new Uint8Array(32).fill(7);
  const device = new Device({ secret, store, budget: 1.0 + 1e-9 });
  const seeds = new Set();
  let refused = 0;
  for (let v = 0; v < 40; v++) {
    try {
      const r = await device.report(spec, [v]);
      seeds.add(r.seeds.data[0]);
    } catch (e) {
      assert.match(e.message, /budget must cover/);
      refused++;
    }
  }
  assert.equal(seeds.size, 1); // one seed, whatever the value
  assert.ok(refused > 0 && refused < 40); // values hashing like 0 are free, the others refused
  assert.equal(device.distinctValues(await specFingerprint(spec)), 1);
  assert.deepEqual(new Device({ store }).states, device.states);
});

test('dBitFlipPM and 1BitMean: thresholds, losses and fingerprints equal the Python ones', async () => {
  for (const c of v.memoized_laws) {
    const mech = longitudinalFromSpec(c.spec);
    const got = mech instanceof DBitFlipPM ? [mech.tp, mech.tq] : [mech.grid.wLow, mech.grid.wHigh];
    assert.deepEqual(got.map(String), c.thresholds, JSON.stringify(c.spec));
    assert.equal(mech.privacyLoss(), c.privacy_loss);
    assert.deepEqual([1, 2, 1e6].map((k) => mech.longitudinalPrivacyLoss(k)), c.longitudinal_privacy_loss);
    assert.equal(await specFingerprint(c.spec), c.fingerprint);
  }
});

test('dBitFlipPM and 1BitMean: fresh reports of fixed coins equal the Python ones', () => {
  assert.ok(v.memoized_bodies.length >= 7);
  for (const c of v.memoized_bodies) {
    const mech = longitudinalFromSpec(c.spec);
    const coins = fixedWords(c.words, c.uniforms);
    assert.deepEqual(mech.randomize(c.values, coins), c.body.arrays, JSON.stringify(c.spec));
    assert.equal(coins.used(), c.words.length);
    assert.equal(coins.usedUniforms(), c.uniforms.length);
  }
});

test('the device derives the per-device states Python derives (buckets, alpha)', async () => {
  const device = new Device({ secret: fromHex(v.device.secret), store: memoryStore() });
  for (const c of v.device.cases) for (const value of c.values) await device.permanent(c.spec, value);
  const flat = (x) => (Array.isArray(x) ? x : [x]).map(String);
  assert.ok(Object.keys(v.device.states).length >= 7);
  for (const [fp, want] of Object.entries(v.device.states)) assert.deepEqual(flat(device.states[fp]), want, fp);
});

test('a dBitFlipPM device memoizes one report per sampled bucket plus one for the rest', async () => {
  const spec = { mechanism: 'DBitFlipPM', params: { epsilon: 1.0, domain_size: 16, sampled_bits: 2 } };
  const device = new Device({ store: memoryStore() });
  const reports = [];
  for (let value = 0; value < 16; value++) reports.push(await device.report(spec, [value, value]));
  const fp = await specFingerprint(spec);
  const buckets = device.states[fp];
  assert.equal(device.distinctValues(fp), 3); // two sampled buckets, and "none of them"
  const unsampled = new Set();
  for (const [value, r] of reports.entries()) {
    assert.deepEqual(r.buckets.data, [buckets, buckets]);
    assert.deepEqual(r.bits.data[0], r.bits.data[1]); // memoized: no second round
    if (!buckets.includes(value)) unsampled.add(JSON.stringify(r.bits.data[0]));
  }
  assert.equal(unsampled.size, 1); // the 14 values outside the sampled buckets share one report
  assert.ok(Math.abs((await device.privacySpent(spec)) - 3 * new DBitFlipPM(spec.params).privacyLoss()) < 1e-12);
});

test('a 1BitMean device memoizes per alpha-rounded grid point', async () => {
  const spec = { mechanism: 'OneBitMean', params: { epsilon: 1.0, low: 0.0, high: 100.0, points: 4 } };
  const device = new Device({ store: memoryStore(), budget: 5.0 });
  const mech = new OneBitMean(spec.params);
  for (let x = 0; x <= 100; x += 0.5) await device.report(spec, [x]);
  const fp = await specFingerprint(spec);
  assert.equal(device.distinctValues(fp), 5); // the grid points 0, 25, 50, 75, 100
  const alpha = device.states[fp];
  assert.ok(Number.isInteger(alpha) && alpha >= 0 && alpha < 2 ** 32);
  // a value inside one rounding cell keeps its report, whatever the day
  const day = async (x) => (await device.report(spec, [x])).values.data[0];
  const first = await day(30.0);
  for (let i = 0; i < 5; i++) assert.equal(await day(30.0), first);
  assert.ok([mech.fromUnit(mech.grid.magnitude), mech.fromUnit(-mech.grid.magnitude)].includes(first));
  assert.ok(Math.abs((await device.privacySpent(spec)) - 5 * mech.privacyLoss()) < 1e-12);
  await assert.rejects(device.report(spec, [101]), /value must be a real number/);
});
