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

test('mix_items: hand-built specs mix as Python, spec dicts without it do not', () => {
  // Python's OLH() and CALM(oracle='olh') mix item keys; a dict without mix_items is the
  // earlier wire format (Python leaves the key out when false), so it loads as false.
  assert.equal(new MECHANISMS.OLH({ epsilon: 1, domain_size: 8 }).mixItems, true);
  assert.equal(fromSpec({ mechanism: 'OLH', params: { epsilon: 1, domain_size: 8 } }).mixItems, false);
  const calm = new MECHANISMS.CALM({ epsilon: 1, domain_sizes: [3, 4] });
  assert.equal(calm.oracles[0].mixItems, true);
  const calmDict = fromSpec({ mechanism: 'CALM', params: { epsilon: 1, domain_sizes: [3, 4] } });
  assert.equal(calmDict.oracles[0].mixItems, false);
  assert.equal(new MECHANISMS.FullDomain({ epsilon: 1, domain_sizes: [3, 4], oracle: 'olh' }).inner.mixItems, true);
  assert.equal('mixItems' in new MECHANISMS.FullDomain({ epsilon: 1, domain_sizes: [3, 4] }).inner, false);
  const grid = new MECHANISMS.UniformGrid({ epsilon: 1, low: [0, 0], high: [1, 1], g: 4 });
  assert.equal(grid.oracles[0].mixItems, true);
  const gridDict = fromSpec({ mechanism: 'UniformGrid', params: { epsilon: 1, low: [0, 0], high: [1, 1], g: 4 } });
  assert.equal(gridDict.oracles[0].mixItems, false);
  // the oracles Python pins to plain keys stay plain
  assert.equal(new MECHANISMS.GroupMean({ epsilon: 1, domain_size: 3 }).inner.mixItems, false);
  assert.equal(new MECHANISMS.PaddingSampling({ epsilon: 1, domain_size: 64, padding: 2, oracle: 'olh' }).inner.mixItems, false);
});
