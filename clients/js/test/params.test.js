// Each JS mechanism declares the Python spec's parameter names (tests/vectors/params.json),
// and fromSpec refuses a spec dict with a name its class does not know.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MECHANISMS, fromSpec } from '../src/index.js';
import '../src/client.js';

const dir = fileURLToPath(new URL('../../../tests/vectors/', import.meta.url));
const python = JSON.parse(readFileSync(dir + 'params.json', 'utf8'));

test('every JS mechanism declares exactly the Python spec parameters', () => {
  assert.ok(Object.keys(MECHANISMS).length >= 40);
  for (const [name, cls] of Object.entries(MECHANISMS)) {
    assert.ok(name in python, `${name} is not a Python mechanism`);
    assert.deepEqual(cls.PARAMS, python[name], `${name}.PARAMS`);
  }
});

test('every declared parameter is read by the class (or documented as not needed)', () => {
  for (const [name, cls] of Object.entries(MECHANISMS)) {
    let src = '';
    for (let c = cls; c && c !== Function.prototype; c = Object.getPrototypeOf(c)) src += c.toString();
    src = src.replace(/static PARAMS = \[[^\]]*\]/g, '');
    for (const p of cls.PARAMS) {
      if (p === 'population') continue; // sizes the grids in Python; the dict carries them
      assert.match(src, new RegExp(`\\b${p}\\b`), `${name} never reads ${p}`);
    }
  }
});

test('fromSpec refuses a parameter the client does not know', () => {
  const ok = fromSpec({ mechanism: 'OLH', params: { epsilon: 1, domain_size: 8, mix_items: true } });
  assert.equal(ok.mixItems, true);
  assert.throws(
    () => fromSpec({ mechanism: 'OLH', params: { epsilon: 1, domain_size: 8, mix_keys: true } }),
    /params of OLH must be among epsilon, domain_size, hash_range, mix_items, got mix_keys/,
  );
  assert.throws(
    () => fromSpec({ mechanism: 'HDG', params: { epsilon: 1, low: [0, 0], high: [1, 1], g1: 4, g2: 2, shape: 3 } }),
    /got shape/,
  );
});
