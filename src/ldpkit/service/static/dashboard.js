// The collector's dashboard (GET /): collections, their estimates with 95% intervals, and a
// time series over the roll-up buckets, polled every few seconds. Plain ES module; it
// reads only this collector's JSON API (docs/collector.md), so it works offline.
//
// URL options: ?refresh=SECONDS (default 5), ?top=K items shown per frequency collection
// (default 20; for a heavy-hitter collection, given: the search's top_k, else the spec's), ?buckets=B buckets in the time series (default 24), ?alpha=A intervals at
// confidence 1 - A (default 0.05: 95%; e.g. 0.05 / d for simultaneous intervals over d items),
// ?candidates.NAME=a,b,c the candidates estimated for the open-domain collection NAME (also
// typed into its card), ?lines=L items drawn per day in a longitudinal collection's
// per-window chart (default 5). Heavy-hitter and open-domain collections show their top
// items as horizontal bars with interval whiskers. A longitudinal collection (its info has
// `longitudinal`: devices report a memoized answer every day) also shows its per-day series
// from GET .../windows?width=day: a line per top item (its frequency per day with the
// interval as a band), or the mean per day. A multi-attribute collection (kind multidim)
// shows the 2-way marginal of attributes 0 and 1 as a heat map (CALM, FullDomain, Fourier;
// any pair with ?marginal.NAME=i,j), its per-attribute frequencies (SPL, SMP, RSFD) or its
// group means as bars with intervals; a range collection (HDG, TDG, UniformGrid) a form,
// one low/high pair per attribute (empty: unconstrained), whose answer is the fraction of
// users in the box with its interval (GET .../estimate?range=0:lo:hi,1:lo:hi; preset with
// ?range.NAME=0:lo:hi,...), asked again at every refresh.

import { barChart, densityChart, fmt, heatMap, intervalChart, seriesChart, topChart, windowSeries, windowsChart } from './charts.js';

const params = new URLSearchParams(window.location.search);
const REFRESH_MS = Math.max(1, Number(params.get('refresh')) || 5) * 1000;
const TOP = Math.max(1, Math.floor(Number(params.get('top')) || 20));
const SERIES = Math.max(1, Math.floor(Number(params.get('buckets')) || 24));
const LINES = Math.max(1, Math.floor(Number(params.get('lines')) || 5));
const ALPHA = (() => {
  const a = Number(params.get('alpha'));
  return a > 0 && a < 1 ? a : 0.05;
})();
const LEVEL = `${Number((100 * (1 - ALPHA)).toPrecision(4))}%`;
const TOKEN_KEY = 'ldpkit.collector.token';

const $ = (sel) => document.querySelector(sel);
const bucketCache = new Map(); // `${collection}|${start}` -> {n, estimate}: closed buckets are fetched once
const selected = new Map(); // collection -> item index followed by its time series
const windowCache = new Map(); // collection -> {n, list}: the per-day series, refetched when n changes
// open-domain collection -> the candidates the reader named (?candidates.NAME=a,b,c or its card)
const candidates = new Map();
for (const [k, v] of params) {
  if (k.startsWith('candidates.') && v) candidates.set(k.slice('candidates.'.length), v.split(','));
}
// multi-attribute collection -> the pair of attributes its heat map shows (?marginal.NAME=i,j)
const marginals = new Map();
for (const [k, v] of params) {
  if (k.startsWith('marginal.') && /^\d+,\d+$/.test(v)) marginals.set(k.slice('marginal.'.length), v);
}
const JOINT = new Set(['CALM', 'FullDomain', 'Fourier']);
const GRIDS = new Set(['HDG', 'TDG', 'UniformGrid']);
// range collection -> the box asked in its form, as the API's range text (?range.NAME=0:lo:hi)
const boxes = new Map();
for (const [k, v] of params) {
  if (k.startsWith('range.') && v) boxes.set(k.slice('range.'.length), v);
}

class AuthError extends Error {}

function token() {
  return window.sessionStorage.getItem(TOKEN_KEY) || '';
}

async function api(path, body = undefined) {
  const t = token();
  const headers = t ? { Authorization: `Bearer ${t}` } : {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  if (res.status === 401 || res.status === 403) {
    let detail = '';
    try {
      detail = (await res.json()).detail;
    } catch {
      detail = res.statusText;
    }
    throw new AuthError(`${res.status}: ${detail}`);
  }
  if (!res.ok) throw new Error(`${body === undefined ? 'GET' : 'POST'} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k.includes('-') || k === 'class' || k === 'id' || k === 'title' || k === 'colspan') {
      node.setAttribute(k, String(v));
    } else {
      node[k] = v;
    }
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function when(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return `${d.toISOString().replace('T', ' ').slice(0, 19)} UTC`;
}

function mechanismText(m) {
  const p = m.params || {};
  const parts = [];
  if (p.epsilon !== undefined) parts.push(`ε = ${p.epsilon}`);
  if (p.domain_size != null) parts.push(`d = ${p.domain_size}`);
  if (p.low !== undefined && p.high !== undefined) parts.push(`[${p.low}, ${p.high}]`);
  return `${m.mechanism} (${parts.join(', ')})`;
}

// -- token form ----------------------------------------------------------------------------
function showTokenForm(message) {
  const form = $('#auth');
  form.hidden = false;
  $('#auth-message').textContent = message;
}

function setupTokenForm() {
  $('#auth').addEventListener('submit', (event) => {
    event.preventDefault();
    const value = $('#token').value.trim();
    if (value) window.sessionStorage.setItem(TOKEN_KEY, value);
    $('#token').value = '';
    bucketCache.clear();
    refresh();
  });
  $('#forget').addEventListener('click', () => {
    window.sessionStorage.removeItem(TOKEN_KEY);
    bucketCache.clear();
    refresh();
  });
}

// -- collections table ---------------------------------------------------------------------
function renderTable(collections) {
  const body = $('#collections tbody');
  body.replaceChildren(
    ...collections.map((c) =>
      h(
        'tr',
        { 'data-collection': c.name, 'data-n': c.n, 'data-batches': c.batches },
        h('td', {}, h('a', { href: `#c-${c.name}` }, c.name)),
        h('td', {}, c.kind),
        h('td', {}, mechanismText(c.mechanism)),
        h('td', { class: 'num' }, c.n.toLocaleString('en-US')),
        h('td', { class: 'num' }, c.batches.toLocaleString('en-US')),
        h('td', {}, when(c.last_report)),
      ),
    ),
  );
}

// -- one collection ------------------------------------------------------------------------
function card(name) {
  let node = document.getElementById(`c-${name}`);
  if (!node) {
    node = h(
      'section',
      { class: 'card', id: `c-${name}`, 'data-collection': name },
      h('h2', {}, name),
      h('p', { class: 'summary' }),
      h('div', { class: 'estimate-chart' }),
      h('details', { class: 'numbers', open: true }, h('summary', {}, 'numbers'), h('div', { class: 'estimate-table' })),
      h('h3', {}, 'over time (roll-up buckets)'),
      h('div', { class: 'series-controls' }),
      h('div', { class: 'series-chart' }),
      h('h3', { class: 'windows-title', hidden: true }, 'per day (longitudinal: memoized daily reports)'),
      h('div', { class: 'windows-chart' }),
    );
    $('#cards').appendChild(node);
  }
  return node;
}

function frequencyRows(est) {
  const d = est.frequencies.length;
  const labels = est.labels || Array.from({ length: d }, (_, i) => String(i));
  const order = Array.from({ length: d }, (_, i) => i);
  if (d > TOP) order.sort((a, b) => est.frequencies[b] - est.frequencies[a]);
  return { labels, shown: d > TOP ? order.slice(0, TOP) : order };
}

function renderFrequency(node, info, est) {
  const { labels, shown } = frequencyRows(est);
  const note = shown.length < labels.length ? ` (top ${shown.length} of ${labels.length} by estimate)` : '';
  node.querySelector('.estimate-chart').replaceChildren(
    barChart({
      labels: shown.map((i) => labels[i]),
      values: shown.map((i) => est.frequencies[i]),
      low: shown.map((i) => est.ci_low[i]),
      high: shown.map((i) => est.ci_high[i]),
      title: `${info.name}: estimated frequencies with ${LEVEL} intervals${note}`,
    }),
  );
  const table = h(
    'table',
    { class: 'estimate', 'data-collection': info.name, 'data-kind': 'frequency', 'data-n': est.n, 'data-alpha': est.alpha },
    h('thead', {}, h('tr', {}, ...['item', 'estimate', 'std error', `${LEVEL} low`, `${LEVEL} high`].map((t) => h('th', {}, t)))),
    h(
      'tbody',
      {},
      ...shown.map((i) =>
        h(
          'tr',
          {
            'data-index': i,
            'data-label': labels[i],
            'data-estimate': est.frequencies[i],
            'data-std-error': est.std_errors[i],
            'data-ci-low': est.ci_low[i],
            'data-ci-high': est.ci_high[i],
          },
          h('td', {}, String(labels[i])),
          h('td', { class: 'num' }, fmt(est.frequencies[i], 4)),
          h('td', { class: 'num' }, fmt(est.std_errors[i], 3)),
          h('td', { class: 'num' }, fmt(est.ci_low[i], 4)),
          h('td', { class: 'num' }, fmt(est.ci_high[i], 4)),
        ),
      ),
    ),
  );
  node.querySelector('.estimate-table').replaceChildren(table);
  // the time series follows one item: the user's pick, else the largest estimate
  const controls = node.querySelector('.series-controls');
  let select = controls.querySelector('select');
  if (!select || select.options.length !== labels.length) {
    select = h('select', { 'aria-label': 'item followed over time' });
    labels.forEach((l, i) => select.append(h('option', { value: String(i) }, String(l))));
    select.addEventListener('change', () => {
      selected.set(info.name, Number(select.value));
      refresh();
    });
    controls.replaceChildren(h('label', {}, 'item: ', select));
  }
  if (!selected.has(info.name)) {
    let best = 0;
    est.frequencies.forEach((v, i) => {
      if (v > est.frequencies[best]) best = i;
    });
    selected.set(info.name, best);
  }
  select.value = String(selected.get(info.name));
}

/** Heavy hitters (discovered strings) or an open domain's top candidates: est.top. */
function renderTop(node, info, est) {
  const top = est.top || [];
  const what = est.kind === 'heavy_hitters'
    ? `top ${top.length} discovered${est.control ? ` (${est.control} control over ${est.tested} tested)` : ''}`
    : `top ${top.length} of ${est.labels.length} candidates`;
  node.querySelector('.estimate-chart').replaceChildren(
    topChart({
      items: top.map((t) => t.item),
      values: top.map((t) => t.frequency),
      low: top.map((t) => t.ci_low),
      high: top.map((t) => t.ci_high),
      title: `${info.name}: ${what}, estimated frequencies with ${LEVEL} intervals`,
    }),
  );
  const table = h(
    'table',
    { class: 'estimate', 'data-collection': info.name, 'data-kind': est.kind, 'data-n': est.n, 'data-alpha': est.alpha },
    h('thead', {}, h('tr', {}, ...['rank', 'item', 'estimate', 'std error', `${LEVEL} low`, `${LEVEL} high`].map((t) => h('th', {}, t)))),
    h(
      'tbody',
      {},
      ...top.map((t, i) =>
        h(
          'tr',
          {
            'data-index': i,
            'data-label': String(t.item),
            'data-estimate': t.frequency,
            'data-std-error': t.std_error,
            'data-ci-low': t.ci_low,
            'data-ci-high': t.ci_high,
          },
          h('td', { class: 'num' }, String(i + 1)),
          h('td', {}, String(t.item)),
          h('td', { class: 'num' }, fmt(t.frequency, 4)),
          h('td', { class: 'num' }, fmt(t.std_error, 3)),
          h('td', { class: 'num' }, fmt(t.ci_low, 4)),
          h('td', { class: 'num' }, fmt(t.ci_high, 4)),
        ),
      ),
    ),
  );
  node.querySelector('.estimate-table').replaceChildren(table);
  if (est.kind === 'heavy_hitters') {
    node.querySelector('.series-controls').replaceChildren(
      h('span', { class: 'hint' }, 'the search runs over the whole window: reports per bucket below'),
    );
  }
}

/** The candidates field of an open-domain card (comma-separated; kept for this page). */
function candidatesField(node, info) {
  const controls = node.querySelector('.series-controls');
  if (controls.querySelector('input.candidates')) return;
  const input = h('input', {
    class: 'candidates',
    type: 'text',
    size: 48,
    placeholder: 'candidates, comma-separated',
    'aria-label': 'candidates estimated',
    value: (candidates.get(info.name) || []).join(','),
  });
  input.addEventListener('change', () => {
    const items = input.value.split(',').map((x) => x.trim()).filter(Boolean);
    if (items.length) candidates.set(info.name, items);
    else candidates.delete(info.name);
    refresh();
  });
  controls.replaceChildren(h('label', {}, 'candidates: ', input));
}

function renderDistribution(node, info, est) {
  const dist = est.distribution;
  const q = dist.quantiles;
  node.querySelector('.estimate-chart').replaceChildren(
    densityChart({
      low: dist.low,
      high: dist.high,
      probabilities: dist.probabilities,
      quantiles: q,
      title: `${info.name}: estimated density${dist.signed ? ' (unbiased, signed masses)' : ''} and quantiles`,
    }),
  );
  const rows = [['mean', dist.mean], ...Object.entries(q || {}).map(([k, v]) => [`q${k}`, v])];
  node.querySelector('.estimate-table').replaceChildren(
    h(
      'table',
      { class: 'estimate', 'data-collection': info.name, 'data-kind': 'distribution', 'data-n': est.n },
      h('tbody', {}, ...rows.map(([k, v]) => h('tr', { 'data-stat': k, 'data-value': v }, h('td', {}, k), h('td', { class: 'num' }, fmt(v, 4))))),
    ),
  );
  node.querySelector('.series-controls').replaceChildren(h('span', { class: 'hint' }, 'mean per bucket'));
}

function renderMean(node, info, est) {
  node.querySelector('.estimate-chart').replaceChildren(
    intervalChart({ value: est.mean, low: est.ci_low[0], high: est.ci_high[0], title: `${info.name}: mean with ${LEVEL} interval` }),
  );
  node.querySelector('.estimate-table').replaceChildren(
    h(
      'table',
      { class: 'estimate', 'data-collection': info.name, 'data-kind': 'mean', 'data-n': est.n },
      h(
        'tbody',
        {},
        h('tr', { 'data-estimate': est.mean, 'data-std-error': est.std_error, 'data-ci-low': est.ci_low[0], 'data-ci-high': est.ci_high[0] },
          h('td', {}, 'mean'),
          h('td', { class: 'num' }, `${fmt(est.mean, 4)} ± ${fmt(est.std_error, 3)}`),
          h('td', { class: 'num' }, `[${fmt(est.ci_low[0], 4)}, ${fmt(est.ci_high[0], 4)}]`),
        ),
      ),
    ),
  );
  node.querySelector('.series-controls').replaceChildren(h('span', { class: 'hint' }, 'mean per bucket, 95% intervals'));
}

/** A table of cells: one row per cell with its estimate, standard error and interval. */
// Bars with interval whiskers for rows of {cell, value, low, high}.
function rowsChart(rows, title) {
  return barChart({
    labels: rows.map((r) => r.cell),
    values: rows.map((r) => r.value),
    low: rows.map((r) => r.low),
    high: rows.map((r) => r.high),
    title,
  });
}

function cellTable(info, rows) {
  return h(
    'table',
    { class: 'estimate', 'data-collection': info.name, 'data-kind': 'multidim' },
    h('thead', {}, h('tr', {}, ...['cell', 'estimate', 'std error', `${LEVEL} low`, `${LEVEL} high`].map((t) => h('th', {}, t)))),
    h(
      'tbody',
      {},
      ...rows.map((r) =>
        h(
          'tr',
          { 'data-cell': r.cell, 'data-estimate': r.value, 'data-std-error': r.se, 'data-ci-low': r.low, 'data-ci-high': r.high },
          h('td', {}, r.cell),
          h('td', { class: 'num' }, fmt(r.value, 4)),
          h('td', { class: 'num' }, fmt(r.se, 3)),
          h('td', { class: 'num' }, fmt(r.low, 4)),
          h('td', { class: 'num' }, fmt(r.high, 4)),
        ),
      ),
    ),
  );
}

/** Several attributes: a 2-way marginal's heat map, per-attribute bars, or group means. */
function renderMultidim(node, info, est) {
  const md = est.multidim;
  const chart = node.querySelector('.estimate-chart');
  let rows = [];
  if (md.note) {
    chart.replaceChildren(h('p', { class: 'hint' }, md.note));
  } else if (md.marginal && md.marginal.shape.length === 2) {
    const t = md.marginal;
    const [a, b] = t.attributes;
    const [ka, kb] = t.shape;
    const names = (k, attr) => (t.labels ? t.labels[attr] : Array.from({ length: k }, (_, i) => String(i)));
    const rowLabels = names(ka, 0);
    const colLabels = names(kb, 1);
    chart.replaceChildren(
      heatMap({
        rowLabels,
        colLabels,
        values: t.estimates,
        low: t.ci_low,
        high: t.ci_high,
        title: `${info.name}: marginal of attributes ${a} (rows) x ${b} (columns), ${LEVEL} intervals per cell`,
      }),
    );
    chart.firstChild.dataset.marginal = `${a},${b}`;
    rows = t.estimates.map((v, k) => ({
      cell: `${a}=${rowLabels[Math.floor(k / kb)]}, ${b}=${colLabels[k % kb]}`,
      value: v,
      se: t.std_errors[k],
      low: t.ci_low[k],
      high: t.ci_high[k],
    }));
  } else if (md.attributes) {
    for (const t of md.attributes) {
      t.estimates.forEach((v, i) =>
        rows.push({ cell: `${t.attributes[0]}=${t.labels ? t.labels[0][i] : i}`, value: v, se: t.std_errors[i], low: t.ci_low[i], high: t.ci_high[i] }),
      );
    }
    const shown = rows.slice(0, Math.max(TOP, 1));
    chart.replaceChildren(
      rowsChart(shown, `${info.name}: per-attribute frequencies (attribute=item) with ${LEVEL} intervals`),
    );
  } else if (md.group_means) {
    const g = md.group_means;
    rows = g.means.map((v, i) => ({ cell: `group ${i}`, value: v, se: g.std_errors[i], low: g.ci_low[i], high: g.ci_high[i] }));
    chart.replaceChildren(
      rowsChart(rows, `${info.name}: mean per group with ${LEVEL} intervals`),
    );
  } else {
    chart.replaceChildren(
      h('p', { class: 'hint' }, 'range queries: fill a low and a high per attribute (empty: any value), or GET /v1/collections/NAME/estimate?range=0:lo:hi,1:lo:hi (docs/collector.md)'),
    );
  }
  if (md.range) rows = [rangeRow(md.range)];
  node.querySelector('.estimate-table').replaceChildren(cellTable(info, rows));
  node.querySelector('.series-controls').replaceChildren(h('span', { class: 'hint' }, 'reports per bucket'));
}

/** A range answer as a row of the cell table. */
function rangeRow(r) {
  const box = Object.entries(r.ranges).map(([a, [lo, hi]]) => `${a} in [${lo}, ${hi}]`).join(', ');
  return { cell: box, value: r.estimate, se: r.std_error, low: r.ci_low, high: r.ci_high };
}

/** The box of a range form as the API's range text ('' when no attribute is constrained). */
function formBox(form, d) {
  const parts = [];
  for (let a = 0; a < d; a += 1) {
    const lo = form.querySelector(`input[name="low-${a}"]`).value.trim();
    const hi = form.querySelector(`input[name="high-${a}"]`).value.trim();
    if (lo === '' && hi === '') continue;
    parts.push(`${a}:${lo === '' ? form.querySelector(`input[name="low-${a}"]`).min : lo}:${hi === '' ? form.querySelector(`input[name="high-${a}"]`).max : hi}`);
  }
  return parts.join(',');
}

/** A range collection's form (built once per card): attribute, low, high per dimension. */
function rangeForm(node, info) {
  let form = node.querySelector('form.range-form');
  if (form) return form;
  const p = info.mechanism.params || {};
  const low = [].concat(p.low);
  const high = [].concat(p.high);
  const preset = new Map(
    (boxes.get(info.name) || '').split(',').filter(Boolean).map((part) => {
      const [a, lo, hi] = part.split(':');
      return [Number(a), [lo, hi]];
    }),
  );
  const field = (a, side, bound) =>
    h('input', {
      type: 'number',
      step: 'any',
      name: `${side}-${a}`,
      min: String(low[a]),
      max: String(high[a]),
      placeholder: String(bound),
      'aria-label': `attribute ${a} ${side}`,
      value: preset.has(a) ? preset.get(a)[side === 'low' ? 0 : 1] : '',
    });
  form = h(
    'form',
    { class: 'range-form', 'data-collection': info.name, 'data-attributes': low.length },
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, ...['attribute', 'domain', 'low', 'high'].map((t) => h('th', {}, t)))),
      h(
        'tbody',
        {},
        ...low.map((lo, a) =>
          h('tr', { 'data-attribute': a }, h('td', {}, String(a)), h('td', {}, `[${lo}, ${high[a]}]`), h('td', {}, field(a, 'low', lo)), h('td', {}, field(a, 'high', high[a]))),
        ),
      ),
    ),
    h('button', { type: 'submit' }, 'share of users in the box'),
    h('output', { class: 'range-answer', 'aria-live': 'polite' }),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const box = formBox(form, low.length);
    if (box) boxes.set(info.name, box);
    else boxes.delete(info.name);
    answerRange(form, info).catch((err) => {
      form.querySelector('.range-answer').textContent = `error: ${err.message}`;
    });
  });
  node.querySelector('.estimate-chart').after(form);
  return form;
}

/** Ask the collector for the form's box; show the answer with its interval. */
async function answerRange(form, info) {
  const out = form.querySelector('.range-answer');
  const box = boxes.get(info.name);
  if (!box) {
    out.textContent = 'fill a low or a high for at least one attribute';
    delete out.dataset.estimate;
    return;
  }
  const q = encodeURIComponent(info.name);
  const est = await api(`v1/collections/${q}/estimate?alpha=${ALPHA}&range=${encodeURIComponent(box)}`);
  const r = est.multidim && est.multidim.range;
  if (!r) {
    out.textContent = (est.multidim && est.multidim.note) || 'no answer yet';
    delete out.dataset.estimate;
    return;
  }
  out.dataset.range = box;
  out.dataset.estimate = String(r.estimate);
  out.dataset.stdError = String(r.std_error);
  out.dataset.ciLow = String(r.ci_low);
  out.dataset.ciHigh = String(r.ci_high);
  out.dataset.n = String(est.n);
  const interval = r.ci_low === null ? 'no interval' : `${LEVEL} interval [${fmt(r.ci_low, 4)}, ${fmt(r.ci_high, 4)}]`;
  out.textContent = `${fmt(r.estimate, 4)} of ${est.n.toLocaleString('en-US')} users (${interval})`;
}

/** The value plotted for one bucket's estimate: the followed item, or the mean. */
function pointOf(info, est) {
  if (!est || est.n === 0) return { value: null, low: null, high: null };
  if (est.kind === 'frequency' || est.kind === 'key_value') {
    // key-value collections: the followed key's frequency (its mean is in the JSON)
    const i = selected.get(info.name) ?? 0;
    return { value: est.frequencies[i], low: est.ci_low[i], high: est.ci_high[i] };
  }
  if (est.kind === 'mean') return { value: est.mean, low: est.ci_low[0], high: est.ci_high[0] };
  return { value: est.distribution ? est.distribution.mean : est.mean, low: null, high: null };
}

async function renderSeries(node, info) {
  const q = encodeURIComponent(info.name);
  // a discovery (or an open domain's candidates) is answered over the whole window: the
  // series shows the reports per bucket only
  const perBucket = !['heavy_hitters', 'open_frequency', 'multidim'].includes(info.kind);
  const { buckets } = await api(`v1/collections/${q}/buckets`);
  const recent = buckets.slice(-SERIES);
  // forget buckets that scrolled out of the series (a long-open tab stays small)
  const keep = new Set(recent.map((b) => `${info.name}|${b.start}`));
  for (const key of bucketCache.keys()) {
    if (key.startsWith(`${info.name}|`) && !keep.has(key)) bucketCache.delete(key);
  }
  const points = await Promise.all(
    recent.map(async (b) => {
      const key = `${info.name}|${b.start}`;
      let hit = bucketCache.get(key);
      if (!perBucket) return { t: new Date(b.start), n: b.n, value: null, low: null, high: null };
      if (!hit || hit.n !== b.n) {
        const since = encodeURIComponent(b.start);
        const until = encodeURIComponent(b.end);
        const estimate = await api(`v1/collections/${q}/estimate?alpha=${ALPHA}&since=${since}&until=${until}`);
        hit = { n: b.n, estimate };
        bucketCache.set(key, hit);
      }
      return { t: new Date(b.start), n: b.n, ...pointOf(info, hit.estimate) };
    }),
  );
  const label = info.kind === 'frequency' || info.kind === 'key_value' ? 'frequency' : 'mean';
  const chart = perBucket
    ? seriesChart({ points, valueLabel: `${label} per bucket`, title: `${info.name}: per-bucket ${label} (${info.bucket_seconds} s buckets) and reports per bucket` })
    : seriesChart({ points, countsOnly: true, title: `${info.name}: reports per bucket (${info.bucket_seconds} s buckets)` });
  node.querySelector('.series-chart').replaceChildren(chart);
}

/** A longitudinal collection's per-day series: lines of the top items (or the mean) with bands. */
async function renderWindows(node, info, est) {
  const q = encodeURIComponent(info.name);
  let hit = windowCache.get(info.name);
  if (!hit || hit.n !== est.n) {
    hit = { n: est.n, list: await api(`v1/collections/${q}/windows?width=day&alpha=${ALPHA}`) };
    windowCache.set(info.name, hit);
  }
  const { starts, series } = windowSeries(hit.list, { top: LINES, order: est.frequencies });
  const what = hit.list.kind === 'mean' ? 'mean' : `frequency of the top ${series.length} items`;
  const budget = hit.list.longitudinal;
  const chart = node.querySelector('.windows-chart');
  chart.replaceChildren(
    windowsChart({
      starts,
      series,
      valueLabel: hit.list.kind === 'mean' ? 'mean per day' : 'frequency per day',
      title: `${info.name}: ${what} per day with ${LEVEL} intervals`,
    }),
    h(
      'p',
      { class: 'hint' },
      budget
        ? `per device: ε₁ = ${fmt(budget.epsilon_1, 3)} a report, ε∞ = ${fmt(budget.epsilon_inf, 3)} for any number of reports of one value, at most ${fmt(budget.epsilon_max, 3)}`
        : '',
    ),
  );
  chart.dataset.windows = String(starts.length);
  chart.dataset.lines = String(series.length);
  node.querySelector('.windows-title').hidden = false;
}

async function renderCollection(info) {
  const node = card(info.name);
  node.dataset.n = info.n;
  const q = encodeURIComponent(info.name);
  if (info.kind === 'open_frequency') candidatesField(node, info);
  if (info.kind === 'open_frequency' && !candidates.has(info.name)) {
    // open domain (CMS, HCMS, FLH): an estimate needs candidates, which the reader names
    node.querySelector('.summary').textContent =
      `${info.kind} · ${mechanismText(info.mechanism)} · n = ${info.n.toLocaleString('en-US')} in ` +
      `${info.batches.toLocaleString('en-US')} batch${info.batches === 1 ? '' : 'es'} · last report ${when(info.last_report)}`;
    node.querySelector('.estimate-chart').replaceChildren(
      h('p', { class: 'hint' }, 'open domain: type candidates below, or open this page with ?candidates.NAME=a,b,c (docs/collector.md)'),
    );
    node.querySelector('.estimate-table').replaceChildren();
    node.dataset.rendered = String(info.n);
    return;
  }
  const pair = info.kind === 'multidim' && JOINT.has(info.mechanism.mechanism) ? marginals.get(info.name) ?? '0,1' : null;
  const est = info.kind === 'open_frequency'
    ? await api(`v1/collections/${q}/estimate?alpha=${ALPHA}&top_k=${TOP}`, { candidates: candidates.get(info.name) })
    : pair
    ? await api(`v1/collections/${q}/estimate?alpha=${ALPHA}&marginal=${pair}`)
    : await api(`v1/collections/${q}/estimate?alpha=${ALPHA}${info.kind === 'heavy_hitters' && params.has('top') ? `&top_k=${TOP}` : ''}`);
  node.querySelector('.summary').textContent =
    `${info.kind} · ${mechanismText(info.mechanism)} · n = ${est.n.toLocaleString('en-US')} in ` +
    `${est.batches.toLocaleString('en-US')} batch${est.batches === 1 ? '' : 'es'} · last report ${when(info.last_report)}` +
    (info.description ? ` · ${info.description}` : '');
  if (est.n === 0) {
    node.querySelector('.estimate-chart').replaceChildren(h('p', { class: 'hint' }, 'no reports yet'));
    node.querySelector('.estimate-table').replaceChildren();
  } else if (est.kind === 'frequency' || est.kind === 'key_value') {
    renderFrequency(node, info, est);
  } else if (est.kind === 'heavy_hitters' || est.kind === 'open_frequency') {
    renderTop(node, info, est);
  } else if (est.kind === 'distribution') {
    renderDistribution(node, info, est);
  } else if (est.kind === 'multidim') {
    renderMultidim(node, info, est);
    if (GRIDS.has(info.mechanism.mechanism)) await answerRange(rangeForm(node, info), info);
  } else {
    renderMean(node, info, est);
  }
  await renderSeries(node, info);
  if (info.longitudinal && est.n > 0) await renderWindows(node, info, est);
  node.dataset.rendered = String(est.n);
}

// -- polling -------------------------------------------------------------------------------
let timer = null;
let running = false;

async function refresh() {
  if (running) return;
  if (document.hidden) {
    // a background tab does not poll; visibilitychange refreshes on return
    clearTimeout(timer);
    timer = setTimeout(refresh, REFRESH_MS);
    return;
  }
  running = true;
  clearTimeout(timer);
  const status = $('#status');
  try {
    const { collections } = await api('v1/collections');
    $('#auth').hidden = !token();
    $('#auth-message').textContent = token() ? 'token set for this tab' : '';
    renderTable(collections);
    for (const c of collections) await renderCollection(c);
    $('#level').textContent = LEVEL;
    status.textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC · every ${REFRESH_MS / 1000} s`;
    status.className = 'ok';
    document.body.dataset.updated = String(Date.now());
  } catch (err) {
    if (err instanceof AuthError) {
      showTokenForm(`This collector needs a bearer token with the "read" scope (${err.message}).`);
    }
    status.textContent = `error: ${err.message}`;
    status.className = 'error';
  } finally {
    running = false;
    timer = setTimeout(refresh, REFRESH_MS);
  }
}

setupTokenForm();
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) refresh();
});
refresh();
