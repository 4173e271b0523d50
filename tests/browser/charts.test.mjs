// Pure helpers of the dashboard's charts (src/ldpkit/service/static/charts.js), under node:
// `node --test tests/browser/` (run by tests/service/test_dashboard.py).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

// charts.js sits in the Python package with no package.json saying "module"; a data: URL
// is always an ES module, whatever node's version (18 has no module-syntax detection).
const source = readFileSync(new URL('../../src/ldpkit/service/static/charts.js', import.meta.url));
const charts = await import(`data:text/javascript;base64,${source.toString('base64')}`);
const { countTicks, fmt, ticks } = charts;

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

const { windowSeries } = charts;

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

// A minimal SVG DOM for topChart under node: elements with attributes, children and text.
function fakeDocument() {
  const make = (name) => ({
    name,
    attrs: {},
    children: [],
    textContent: '',
    setAttribute(k, v) {
      this.attrs[k] = v;
    },
    appendChild(c) {
      this.children.push(c);
      return c;
    },
  });
  return { createElementNS: (_ns, name) => make(name) };
}

const all = (node, pred) => [node, ...node.children.flatMap((c) => all(c, () => true))].filter(pred);

test('topChart draws one horizontal bar per item, most frequent on top, with whiskers', () => {
  globalThis.document = fakeDocument();
  try {
    const { topChart } = charts;
    const items = ['hello', 'help', 'a very long string of words that goes on'];
    const values = [0.3, 0.2, 0.05];
    const low = [0.25, 0.16, -0.01];
    const high = [0.35, 0.24, 0.11];
    const svg = topChart({ items, values, low, high, title: 'words' });
    const bars = all(svg, (n) => n.name === 'rect' && n.attrs.class === 'bar');
    assert.equal(bars.length, 3);
    const ys = bars.map((b) => Number(b.attrs.y));
    assert.ok(ys[0] < ys[1] && ys[1] < ys[2], 'ranked top to bottom');
    const widths = bars.map((b) => Number(b.attrs.width));
    assert.ok(Math.abs(widths[0] / widths[1] - 1.5) < 1e-9, 'lengths proportional to the estimates');
    const x0 = Number(bars[0].attrs.x);
    const scale = widths[0] / 0.3;
    // whiskers: a horizontal line from low to high and two caps, per item
    const err = all(svg, (n) => n.name === 'line' && n.attrs.class === 'err');
    assert.equal(err.length, 9);
    const spans = err.filter((l) => l.attrs.y1 === l.attrs.y2);
    spans.forEach((l, i) => {
      assert.ok(Math.abs(Number(l.attrs.x1) - (x0 + low[i] * scale)) < 1e-6, `low ${i}`);
      assert.ok(Math.abs(Number(l.attrs.x2) - (x0 + high[i] * scale)) < 1e-6, `high ${i}`);
    });
    const labels = all(svg, (n) => n.name === 'text' && n.attrs.class === 'tick ylabel').map((t) => t.textContent);
    assert.deepEqual(labels.slice(0, 2), ['hello', 'help']);
    assert.ok(labels[2].endsWith('…') && labels[2].length === 24, 'long items are cut');
    assert.equal(all(svg, (n) => n.name === 'title')[0].textContent, 'words');
    const empty = topChart({ items: [], values: [], low: [], high: [] });
    assert.deepEqual(all(empty, (n) => n.name === 'text').map((t) => t.textContent), ['nothing found']);
  } finally {
    delete globalThis.document;
  }
});

test('windowsChart draws a band and a line per run of days, a point per window, a legend', () => {
  globalThis.document = fakeDocument();
  try {
    const { windowsChart } = charts;
    const starts = [0, 1, 2, 3].map((k) => new Date(Date.UTC(2026, 2, 2 + k)));
    const p = (value) => ({ value, low: value - 0.1, high: value + 0.1 });
    const series = [
      { label: 'linux', points: [p(0.5), p(0.4), null, p(0.45)] },
      { label: 'mac', points: [p(0.2), p(0.3), null, null] },
    ];
    const svg = windowsChart({ starts, series, title: 'per day' });
    const groups = all(svg, (n) => n.name === 'g');
    assert.deepEqual(groups.map((g) => g.attrs['data-label']), ['linux', 'mac']);
    const count = (g, name, cls) => all(g, (n) => n.name === name && n.attrs.class === cls).length;
    assert.deepEqual(groups.map((g) => count(g, 'path', 'band')), [2, 1]); // broken at the empty day
    assert.deepEqual(groups.map((g) => count(g, 'circle', 'wpt')), [3, 2]);
    const days = all(groups[0], (n) => n.name === 'circle').map((c) => c.attrs['data-day']);
    assert.deepEqual(days, ['2026-03-02', '2026-03-03', '2026-03-05']);
    // a higher value is drawn higher (smaller y)
    const ys = all(groups[0], (n) => n.name === 'circle').map((c) => Number(c.attrs.cy));
    assert.ok(ys[0] < ys[2] && ys[2] < ys[1]);
    const legend = all(svg, (n) => n.name === 'text' && n.attrs.class === 'tick legend').map((t) => t.textContent);
    assert.deepEqual(legend, ['linux', 'mac']);
    const empty = windowsChart({ starts: [], series: [] });
    assert.deepEqual(all(empty, (n) => n.name === 'text').map((t) => t.textContent), ['no windows yet']);
  } finally {
    delete globalThis.document;
  }
});
