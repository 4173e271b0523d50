// Pure helpers of the dashboard's charts (src/ldpkit/service/static/charts.js), under node:
// `node --test tests/browser/` (run by tests/service/test_dashboard.py).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

// charts.js sits in the Python package with no package.json saying "module"; a data: URL
// is always an ES module, whatever node's version (18 has no module-syntax detection).
const source = readFileSync(new URL('../../src/ldpkit/service/static/charts.js', import.meta.url));
const { countTicks, fmt, ticks } = await import(`data:text/javascript;base64,${source.toString('base64')}`);

test('ticks are round, cover the range and include zero when it is inside', () => {
  assert.deepEqual(ticks(0, 1).map((v) => +v.toFixed(12)), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  const t = ticks(-0.037, 0.71);
  assert.ok(t.includes(0));
  assert.ok(t[0] >= -0.037 && t.at(-1) <= 0.71 + 1e-12);
  const steps = t.slice(1).map((v, i) => v - t[i]);
  assert.ok(steps.every((s) => Math.abs(s - steps[0]) < 1e-12), 'evenly spaced');
  assert.ok(t.length >= 3 && t.length <= 11);
  assert.deepEqual(ticks(5, 5), [5]); // an empty range does not loop
  assert.deepEqual(ticks(0, 1440, 6), [0, 250, 500, 750, 1000, 1250]);
});

test('fmt shortens large numbers and keeps small ones readable', () => {
  assert.equal(fmt(12345), '12.3k');
  assert.equal(fmt(2_500_000), '2.50M');
  assert.equal(fmt(0.123456), '0.123');
  assert.equal(fmt(0.123456, 4), '0.1235');
  assert.equal(fmt(7), '7');
  assert.equal(fmt(null), '–');
  assert.equal(fmt(Number.NaN), '–');
});

test('count ticks are whole numbers from 0 to the first tick at or above the largest count', () => {
  assert.deepEqual(countTicks(1), [0, 1]);
  assert.deepEqual(countTicks(3), [0, 1, 2, 3]);
  assert.deepEqual(countTicks(7), [0, 2, 4, 6, 8]);
  assert.deepEqual(countTicks(1000), [0, 250, 500, 750, 1000]);
  for (const nmax of [1, 2, 7, 13, 99, 1001, 123456]) {
    const t = countTicks(nmax);
    assert.ok(t.length >= 2 && t[0] === 0 && t.every(Number.isInteger), `${nmax}: ${t}`);
    const step = t[1] - t[0];
    assert.ok(t.at(-1) >= nmax && t.at(-1) < nmax + step, `${nmax}: ${t}`);
  }
});

const { windowSeries } = await import(`data:text/javascript;base64,${source.toString('base64')}`);

function win(day, n, body) {
  const since = new Date(Date.UTC(2026, 2, 2 + day)).toISOString();
  return { since, n, ...body };
}

test('a frequency series: the top items by the given order, one point per window, gaps kept', () => {
  const list = {
    kind: 'frequency',
    windows: [
      win(0, 100, { labels: ['a', 'b', 'c'], frequencies: [0.5, 0.3, 0.2], ci_low: [0.4, 0.2, 0.1], ci_high: [0.6, 0.4, 0.3] }),
      win(1, 0, { labels: ['a', 'b', 'c'], frequencies: null, ci_low: null, ci_high: null }),
      win(2, 50, { labels: ['a', 'b', 'c'], frequencies: [0.1, 0.2, 0.7], ci_low: [0, 0.1, 0.6], ci_high: [0.2, 0.3, 0.8] }),
    ],
  };
  const { starts, series } = windowSeries(list, { top: 2 });
  assert.deepEqual(starts.map((d) => d.toISOString().slice(0, 10)), ['2026-03-02', '2026-03-03', '2026-03-04']);
  // by report-weighted mean: a 55, c 55 (tie: index order), b 40
  assert.deepEqual(series.map((s) => s.label), ['a', 'c']);
  assert.deepEqual(series[1].points, [{ value: 0.2, low: 0.1, high: 0.3 }, null, { value: 0.7, low: 0.6, high: 0.8 }]);
  // the whole collection's estimate decides when given
  assert.deepEqual(windowSeries(list, { top: 1, order: [0.1, 0.6, 0.3] }).series.map((s) => s.label), ['b']);
  assert.equal(windowSeries(list, { top: 10 }).series.length, 3);
  assert.deepEqual(windowSeries({ kind: 'frequency', windows: [] }), { starts: [], series: [] });
});

test('a mean series: one line, null where a window has no reports', () => {
  const list = {
    kind: 'mean',
    windows: [win(0, 10, { mean: 3.5, ci_low: [3], ci_high: [4] }), win(1, 0, { mean: null, ci_low: null, ci_high: null })],
  };
  const { series } = windowSeries(list);
  assert.equal(series.length, 1);
  assert.deepEqual(series[0].points, [{ value: 3.5, low: 3, high: 4 }, null]);
});
