// The open-domain oracles (CMS, HCMS, FLH) against tests/vectors/sketch.json (Python side).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CMS, FLH, HCMS, ITEM_KEY_FORMAT, blake2b, buildBody, itemBytes, itemKey, rowHash } from '../src/index.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const v = JSON.parse(readFileSync(dir + 'sketch.json', 'utf8'));
const hex = (u) => Buffer.from(u).toString('hex');
const item = (c) => (c.kind === 'str' ? c.item : BigInt(c.item));

test('BLAKE2b equals hashlib.blake2b', () => {
  for (const c of v.blake2b) {
    const got = blake2b(Buffer.from(c.data, 'hex'), c.digest_size, Buffer.from(c.person, 'hex'));
    assert.equal(hex(got), c.digest, `${c.data.length / 2} bytes`);
  }
});

test('item keys (ldpkit.item/1) equal the Python ones', () => {
  assert.equal(ITEM_KEY_FORMAT, v.item_key_format);
  for (const c of v.items) {
    assert.equal(hex(itemBytes(item(c))), c.bytes, `${c.kind} ${c.item}`);
    assert.equal(itemKey(item(c)).toString(), c.key, `${c.kind} ${c.item}`);
  }
  // safe integers as Numbers and as BigInts are the same item; "1" and 1 are not
  assert.equal(itemKey(255), itemKey(255n));
  assert.notEqual(itemKey('1'), itemKey(1));
});

test('row hashes equal the Python ones', () => {
  const keys = v.items.map((c) => BigInt(c.key));
  for (const c of v.row_hashes) {
    const got = v.rows.map((r) => keys.map((k) => rowHash(r, k, c.width)));
    assert.deepEqual(got, c.hashes, `width ${c.width}`);
  }
});

test('CMS thresholds and losses, FLH default range equal the Python ones', () => {
  for (const c of v.cms_thresholds) {
    const cms = new CMS({ epsilon: c.epsilon, width: 4, depth: 1 });
    assert.deepEqual([cms.truePerm.toString(), cms.otherPerm.toString()], [c.true, c.other], `eps ${c.epsilon}`);
    assert.equal(cms.privacyLoss(), c.loss, `eps ${c.epsilon}`);
    assert.ok(cms.privacyLoss() <= c.epsilon);
  }
  for (const c of v.flh_range) assert.equal(new FLH({ epsilon: c.epsilon }).g, c.g, `eps ${c.epsilon}`);
});

function fixedCoins(c) {
  let iw = 0;
  return {
    uniform: () => {
      throw new Error('a sketch randomizer drew a float coin');
    },
    u64: () => BigInt(c.words[iw++]),
    u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
  };
}

test('JSON bodies from fixed coins equal the Python reports', () => {
  assert.ok(v.bodies.length >= 6);
  for (const c of v.bodies) {
    const info = {
      mechanism: c.body.mechanism,
      fingerprint: c.body.fingerprint,
      report_fields: Object.fromEntries(Object.entries(c.body.arrays).map(([k, a]) => [k, { dtype: a.dtype }])),
    };
    assert.deepEqual(buildBody(info, c.values, fixedCoins(c)), c.body, JSON.stringify(c.body.mechanism));
  }
});

test('bad input is refused with a message naming it', () => {
  assert.throws(() => new CMS({ epsilon: 2, width: 1 }), /width must be an integer in \[2, 1048576\], got 1/);
  assert.throws(() => new CMS({ epsilon: 2, depth: 0 }), /depth must be/);
  assert.throws(() => new CMS({ epsilon: 51 }), /epsilon must be a number/);
  assert.throws(() => new HCMS({ epsilon: 2, width: 100 }), /width must be a power of two/);
  assert.throws(() => new FLH({ epsilon: 2, hash_range: 1 }), /hash_range must be/);
  assert.throws(() => new FLH({ epsilon: 2, num_hashes: 2 ** 21 }), /num_hashes must be/);
  const flh = new FLH({ epsilon: 2 });
  assert.throws(() => flh.randomize([0.5]), /values must be strings or integers/);
  assert.throws(() => flh.randomize([true]), /values must be strings or integers/);
  assert.throws(() => flh.randomize([null]), /values must be strings or integers/);
  assert.throws(() => flh.randomize(['\ud800']), /encodable as UTF-8/);
  assert.throws(() => new FLH({ epsilon: 2, domain_size: 5 }).randomize([5]), /values must be integers in \[0, 5\)/);
  assert.throws(() => new FLH({ epsilon: 2, domain_size: 5 }).randomize(['a']), /values must be integers/);
});
