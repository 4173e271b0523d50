// The discovery randomizers (PEM, TreeHist) against tests/vectors/discovery.json (Python side).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PEM, SFP, TreeHist, buildBody, encodeString, familySeeds, fromSpec, hashKey, prefixKey } from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const v = JSON.parse(readFileSync(dir + 'discovery.json', 'utf8'));

test('strings become the Python symbol grids and prefix keys', () => {
  assert.ok(v.grids.length >= 7);
  for (const c of v.grids) {
    const alphabet = c.alphabet === null ? null : Array.from(c.alphabet);
    c.strings.forEach((s, i) => {
      const row = encodeString(s, c.max_length, alphabet);
      assert.deepEqual(row, c.symbols[i], `${JSON.stringify(s)} at ${c.max_length}`);
      for (let l = 0; l < c.max_length; l++) {
        assert.equal(prefixKey(row, l + 1).toString(), c.keys[l][i], `${JSON.stringify(s)} prefix ${l + 1}`);
      }
    });
  }
});

test('public hash family seeds and hashes equal the Python ones', () => {
  for (const c of v.family_seeds) {
    assert.deepEqual(familySeeds(c.level, c.h).map(String), c.seeds, `level ${c.level}, H ${c.h}`);
  }
  const keys = v.hash_keys.keys.map(BigInt);
  const seeds = v.hash_keys.seeds.map(BigInt);
  for (const c of v.hash_keys.cases) {
    assert.deepEqual(keys.map((k) => seeds.map((s) => hashKey(k, s, c.g))), c.hashes, `g ${c.g}`);
  }
});

test('g, H, integer weights and the realized loss equal the Python ones', () => {
  for (const c of v.laws) {
    const spec = fromSpec(c.mechanism);
    assert.deepEqual([spec.g, spec.h], [c.g, c.h], JSON.stringify(c.mechanism));
    assert.deepEqual([spec.wKeep.toString(), spec.wOther.toString()], [c.w_keep, c.w_other]);
    assert.equal(spec.privacyLoss(), c.loss);
    assert.ok(spec.privacyLoss() <= c.mechanism.params.epsilon);
  }
});

test('SFP: budget split and realized loss equal the Python ones', () => {
  assert.ok(v.sfp_losses.length >= 3);
  for (const c of v.sfp_losses) {
    const spec = fromSpec(c.mechanism);
    assert.ok(spec instanceof SFP);
    assert.equal(spec.privacyLoss(), c.loss, JSON.stringify(c.mechanism));
    assert.ok(spec.privacyLoss() <= c.mechanism.params.epsilon * (1 + 1e-12));
  }
  assert.equal(v.bodies.filter((c) => c.body.mechanism.mechanism === 'SFP').length, 3);
});

function fixedCoins(c) {
  let iw = 0;
  return {
    uniform: () => {
      throw new Error('a discovery randomizer drew a float coin');
    },
    u64: () => BigInt(c.words[iw++]),
    u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
  };
}

test('JSON bodies from fixed coins equal the Python reports', () => {
  assert.ok(v.bodies.length >= 7);
  for (const c of v.bodies) {
    const info = {
      mechanism: c.body.mechanism,
      fingerprint: c.body.fingerprint,
      report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
    };
    assert.deepEqual(buildBody(info, c.values, fixedCoins(c)), c.body, JSON.stringify(c.body.mechanism));
  }
});

test('secure coins give well-formed reports', () => {
  const pem = new PEM({ epsilon: 2, max_length: 6 });
  const r = pem.randomize(['hello', 'zoë', '']);
  assert.deepEqual(Object.keys(r), ['groups', 'hashes', 'values']);
  assert.ok(r.groups.data.every((x) => x >= 0 && x < 6));
  assert.ok(r.hashes.data.every((x) => x >= 0 && x < pem.h));
  assert.ok(r.values.data.every((x) => x >= 0 && x < pem.g));
});

test('bad input is refused with a message naming it', () => {
  assert.throws(() => new PEM({ epsilon: 2, max_length: 0 }), /max_length must be an integer in \[1, 64\], got 0/);
  assert.throws(() => new PEM({ epsilon: 41 }), /epsilon must be a number/);
  assert.throws(() => new PEM({ epsilon: 2, hash_range: 1 }), /hash_range must be/);
  assert.throws(() => new PEM({ epsilon: 2, alphabet: 'aa' }), /alphabet must be None or a string of 1 to 4095 distinct/);
  assert.throws(() => new PEM({ epsilon: 2, control: 'both' }), /control must be None, 'fwer' or 'fdr'/);
  assert.throws(() => new TreeHist({ epsilon: 2, threshold: 0 }), /threshold must be/);
  assert.throws(() => new SFP({ epsilon: 2, sketch: 'olh' }), /sketch must be 'hcms' or 'cms'/);
  assert.throws(() => new SFP({ epsilon: 2, fragment_share: 1 }), /fragment_share must be in \[0.001, 0.999\]/);
  assert.throws(() => new SFP({ epsilon: 2, alphabet: null }), /positions \* 2\^hash_bits \* symbols\^fragment_length <= 4194304/);
  assert.throws(() => new SFP({ epsilon: 2 }).randomize(['Hello']), /alphabet characters, got \["H"\]/);
  const pem = new PEM({ epsilon: 2 });
  assert.throws(() => pem.randomize([1]), /values must be a sequence of strings/);
  assert.throws(() => pem.randomize([null]), /values must be a sequence of strings/);
  assert.throws(() => pem.randomize(['\ud800']), /encodable as UTF-8/);
  assert.throws(() => new PEM({ epsilon: 2, alphabet: 'ab' }).randomize(['abc']), /values must use only the spec's alphabet characters, got \["c"\]/);
});
