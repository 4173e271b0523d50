// The longitudinal randomizers and the device against the Python vectors
// (tests/vectors/longitudinal.json, written by tests/vectors/make_vectors.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BudgetExceededError, Device, longitudinalFromSpec, memoryStore, specFingerprint } from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const v = JSON.parse(readFileSync(dir + 'longitudinal.json', 'utf8'));

function fromHex(text) {
  return Uint8Array.from(text.match(/../g), (h) => parseInt(h, 16));
}

function fixedWords(words) {
  let iw = 0;
  return {
    u64: () => BigInt(words[iw++]),
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
