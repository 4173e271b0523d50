// Hand-drawn SVG charts for the collector dashboard: no library, no network.
// Every text node goes through textContent (labels come from the collection's config).

const SVG = 'http://www.w3.org/2000/svg';

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function text(parent, x, y, content, attrs = {}) {
  const node = el('text', { x, y, ...attrs }, parent);
  node.textContent = content;
  return node;
}

/** Short number for axes: 0.125 -> "0.125", 12345 -> "12.3k". */
export function fmt(v, digits = 3) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${(v / 1e3).toPrecision(3)}k`;
  if (a >= 100 || Number.isInteger(v)) return String(Math.round(v * 100) / 100);
  return v.toPrecision(digits);
}

/** About `count` round tick values covering [lo, hi]. */
export function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  }
  return out;
}

function frame(width, height, title) {
  const svg = el('svg', {
    viewBox: `0 0 ${width} ${height}`,
    width: '100%',
    role: 'img',
    class: 'chart',
  });
  if (title) el('title', {}, svg).textContent = title;
  return svg;
}

function yAxis(svg, scale, lo, hi, left, right, fmtTick = fmt) {
  for (const t of ticks(lo, hi)) {
    const y = scale(t);
    el('line', { x1: left, x2: right, y1: y, y2: y, class: t === 0 ? 'zero' : 'grid' }, svg);
    text(svg, left - 4, y + 3, fmtTick(t), { 'text-anchor': 'end', class: 'tick' });
  }
}

/**
 * Bars with error bars: values[i] +- [low[i], high[i]], labelled labels[i].
 */
export function barChart({ labels, values, low, high, title = '', width = 640, height = 260 }) {
  const svg = frame(width, height, title);
  const m = { left: 52, right: 8, top: 10, bottom: 64 };
  const lo = Math.min(0, ...low.filter(Number.isFinite), ...values);
  const hi = Math.max(...high.filter(Number.isFinite), ...values, 1e-9);
  const y = (v) => m.top + ((hi - v) / (hi - lo)) * (height - m.top - m.bottom);
  yAxis(svg, y, lo, hi, m.left, width - m.right);
  const slot = (width - m.left - m.right) / Math.max(values.length, 1);
  values.forEach((v, i) => {
    const cx = m.left + slot * (i + 0.5);
    const bw = Math.max(slot * 0.6, 1);
    const top = y(Math.max(v, 0));
    const bar = el('rect', {
      x: cx - bw / 2,
      y: top,
      width: bw,
      height: Math.max(Math.abs(y(v) - y(0)), 0.5),
      class: 'bar',
    }, svg);
    el('title', {}, bar).textContent = `${labels[i]}: ${fmt(v)} [${fmt(low[i])}, ${fmt(high[i])}]`;
    if (Number.isFinite(low[i]) && Number.isFinite(high[i])) {
      const cap = Math.min(bw / 2, 6);
      el('line', { x1: cx, x2: cx, y1: y(low[i]), y2: y(high[i]), class: 'err' }, svg);
      el('line', { x1: cx - cap, x2: cx + cap, y1: y(low[i]), y2: y(low[i]), class: 'err' }, svg);
      el('line', { x1: cx - cap, x2: cx + cap, y1: y(high[i]), y2: y(high[i]), class: 'err' }, svg);
    }
    const lx = cx;
    const ly = height - m.bottom + 10;
    text(svg, lx, ly, String(labels[i]).slice(0, 14), {
      transform: `rotate(-45 ${lx} ${ly})`,
      'text-anchor': 'end',
      class: 'tick',
    });
  });
  return svg;
}

/**
 * Density of a histogram estimate on [low, high] (masses per equal-width bucket), as a
 * step line, with quantiles {q: value} as dashed vertical lines.
 */
export function densityChart({ low, high, probabilities, quantiles, title = '', width = 640, height = 240 }) {
  const svg = frame(width, height, title);
  const m = { left: 52, right: 8, top: 16, bottom: 28 };
  const k = probabilities.length;
  const w = (high - low) / k;
  const dens = probabilities.map((p) => p / w);
  const dlo = Math.min(0, ...dens);
  const dhi = Math.max(...dens, 1e-12);
  const x = (v) => m.left + ((v - low) / (high - low)) * (width - m.left - m.right);
  const y = (v) => m.top + ((dhi - v) / (dhi - dlo)) * (height - m.top - m.bottom);
  yAxis(svg, y, dlo, dhi, m.left, width - m.right, (t) => t.toPrecision(2));
  for (const t of ticks(low, high, 6)) {
    text(svg, x(t), height - m.bottom + 14, fmt(t), { 'text-anchor': 'middle', class: 'tick' });
  }
  let d = `M ${x(low)} ${y(0)}`;
  dens.forEach((v, i) => {
    d += ` L ${x(low + i * w)} ${y(v)} L ${x(low + (i + 1) * w)} ${y(v)}`;
  });
  d += ` L ${x(high)} ${y(0)} Z`;
  el('path', { d, class: 'area' }, svg);
  for (const [q, v] of Object.entries(quantiles || {})) {
    if (!['0.05', '0.25', '0.5', '0.75', '0.95'].includes(q)) continue;
    el('line', { x1: x(v), x2: x(v), y1: m.top, y2: height - m.bottom, class: 'quantile' }, svg);
    text(svg, x(v), m.top - 4, `q${Math.round(Number(q) * 100)}`, { 'text-anchor': 'middle', class: 'qlabel' });
  }
  return svg;
}

/** Whole-number ticks for a count axis, from 0 to the first tick at or above nmax. */
export function countTicks(nmax, count = 4) {
  const out = ticks(0, nmax, count).filter(Number.isInteger);
  if (out.length < 2) return [0, Math.max(1, Math.ceil(nmax))];
  if (out.at(-1) < nmax) out.push(out.at(-1) + (out[1] - out[0])); // the tallest bar fits
  return out;
}

/** An axis title, rotated for the vertical axes. */
function axisTitle(svg, x, y, content, rotate = 0) {
  const attrs = { 'text-anchor': 'middle', class: 'axis-title' };
  if (rotate) attrs.transform = `rotate(${rotate} ${x} ${y})`;
  return text(svg, x, y, content, attrs);
}

/**
 * A time series over roll-up buckets: bars of n per bucket (right axis, light) and the
 * per-bucket estimate with its interval (points with error bars, left axis). Both vertical
 * axes have ticks and a title; the time axis shows bucket starts (UTC).
 */
export function seriesChart({ points, title = '', valueLabel = 'estimate', width = 640, height = 200, countsOnly = false }) {
  // points: [{t: Date, n, value, low, high}] (value may be null: no reports or no estimate);
  // countsOnly: the reports per bucket alone (no estimate axis)
  const svg = frame(width, height, title);
  const m = { left: 64, right: 64, top: 18, bottom: 44 };
  if (!points.length) {
    text(svg, width / 2, height / 2, 'no buckets yet', { 'text-anchor': 'middle', class: 'tick' });
    return svg;
  }
  const slot = (width - m.left - m.right) / points.length;
  const nTicks = countTicks(Math.max(...points.map((p) => p.n), 1));
  const nmax = nTicks.at(-1); // the bars' scale ends on a labelled tick above every bar
  const ny = (v) => height - m.bottom - (v / nmax) * (height - m.top - m.bottom);
  const vals = points.flatMap((p) => [p.value, p.low, p.high]).filter(Number.isFinite);
  const vlo = Math.min(...vals, 0);
  const vhi = Math.max(...vals, 1e-12);
  const vy = (v) => m.top + ((vhi - v) / (vhi - vlo)) * (height - m.top - m.bottom);
  if (!countsOnly) yAxis(svg, vy, vlo, vhi, m.left, width - m.right);
  // right axis: reports per bucket (the light bars)
  const right = width - m.right;
  el('line', { x1: right, x2: right, y1: m.top, y2: height - m.bottom, class: 'axis' }, svg);
  for (const t of nTicks) {
    el('line', { x1: right, x2: right + 3, y1: ny(t), y2: ny(t), class: 'axis' }, svg);
    text(svg, right + 5, ny(t) + 3, fmt(t), { class: 'tick ntick' });
  }
  const mid = (m.top + height - m.bottom) / 2;
  if (!countsOnly) axisTitle(svg, 12, mid, valueLabel, -90);
  axisTitle(svg, width - 10, mid, 'reports per bucket', 90);
  el('line', { x1: m.left, x2: right, y1: height - m.bottom, y2: height - m.bottom, class: 'axis' }, svg);
  let line = '';
  points.forEach((p, i) => {
    const cx = m.left + slot * (i + 0.5);
    const nb = el('rect', {
      x: cx - slot * 0.4,
      y: ny(p.n),
      width: slot * 0.8,
      height: Math.max(height - m.bottom - ny(p.n), 0),
      class: 'nbar',
    }, svg);
    el('title', {}, nb).textContent = `${p.t.toISOString()}: n = ${p.n}`;
    if (Number.isFinite(p.value)) {
      if (Number.isFinite(p.low) && Number.isFinite(p.high)) {
        el('line', { x1: cx, x2: cx, y1: vy(p.low), y2: vy(p.high), class: 'err' }, svg);
      }
      el('circle', { cx, cy: vy(p.value), r: 2.5, class: 'pt' }, svg);
      line += `${line ? 'L' : 'M'} ${cx} ${vy(p.value)} `;
    }
  });
  if (line) el('path', { d: line, class: 'line' }, svg);
  const every = Math.max(1, Math.ceil(points.length / 6));
  points.forEach((p, i) => {
    if (i % every) return;
    const cx = m.left + slot * (i + 0.5);
    const hh = p.t.toISOString().slice(11, 19);
    el('line', { x1: cx, x2: cx, y1: height - m.bottom, y2: height - m.bottom + 3, class: 'axis' }, svg);
    text(svg, cx, height - m.bottom + 14, hh, { 'text-anchor': 'middle', class: 'tick xtick' });
  });
  const days = [...new Set([points[0], points.at(-1)].map((p) => p.t.toISOString().slice(0, 10)))];
  axisTitle(svg, (m.left + right) / 2, height - 6, `bucket start (UTC, ${days.join(' to ')})`);
  return svg;
}

/** One interval on a number line (mean collections). */
export function intervalChart({ value, low, high, title = '', width = 640, height = 60 }) {
  const svg = frame(width, height, title);
  const pad = (high - low) * 0.5 || Math.abs(value) * 0.1 || 1;
  const lo = low - pad;
  const hi = high + pad;
  const x = (v) => 20 + ((v - lo) / (hi - lo)) * (width - 40);
  el('line', { x1: 20, x2: width - 20, y1: 30, y2: 30, class: 'grid' }, svg);
  for (const t of ticks(lo, hi, 6)) {
    text(svg, x(t), 52, fmt(t), { 'text-anchor': 'middle', class: 'tick' });
  }
  el('line', { x1: x(low), x2: x(high), y1: 30, y2: 30, class: 'err wide' }, svg);
  el('circle', { cx: x(value), cy: 30, r: 5, class: 'pt' }, svg);
  return svg;
}

/**
 * The lines of a per-window series (GET /v1/collections/{c}/windows): for a frequency
 * collection the `top` items with the largest estimate (by `order`, e.g. the whole
 * collection's frequencies, else by their report-weighted mean over the windows), for a
 * mean collection the mean. Each line has one point {value, low, high} per window, null
 * for a window without an estimate (no reports), so the x axis stays regular.
 */
export function windowSeries(list, { top = 5, order = null } = {}) {
  const windows = list.windows || [];
  const starts = windows.map((w) => new Date(w.since));
  if (list.kind === 'mean') {
    const points = windows.map((w) =>
      w.n && Number.isFinite(w.mean) ? { value: w.mean, low: w.ci_low?.[0] ?? null, high: w.ci_high?.[0] ?? null } : null,
    );
    return { starts, series: [{ label: 'mean', index: 0, points }] };
  }
  const first = windows.find((w) => Array.isArray(w.frequencies));
  if (!first) return { starts, series: [] };
  const d = first.frequencies.length;
  const labels = first.labels || Array.from({ length: d }, (_, i) => String(i));
  let score = order;
  if (!score || score.length !== d) {
    score = new Array(d).fill(0);
    for (const w of windows) if (w.frequencies) w.frequencies.forEach((f, i) => (score[i] += f * w.n));
  }
  const items = Array.from({ length: d }, (_, i) => i)
    .sort((a, b) => score[b] - score[a] || a - b)
    .slice(0, Math.max(1, Math.min(top, d)));
  return {
    starts,
    series: items.map((i) => ({
      label: String(labels[i]),
      index: i,
      points: windows.map((w) =>
        w.frequencies ? { value: w.frequencies[i], low: w.ci_low?.[i] ?? null, high: w.ci_high?.[i] ?? null } : null,
      ),
    })),
  };
}

/** Runs of consecutive indices whose point is present (a line breaks at empty windows). */
function runs(points) {
  const out = [];
  let run = [];
  points.forEach((p, i) => {
    if (p && Number.isFinite(p.value)) run.push(i);
    else if (run.length) {
      out.push(run);
      run = [];
    }
  });
  if (run.length) out.push(run);
  return out;
}

/**
 * A per-window series: one line per series (an item's frequency per day, or the mean per
 * day) with its interval as a band, a point per window (its title: window, value and
 * interval), a legend, the estimate's axis on the left and the window starts (UTC dates)
 * below. `starts`: the windows' start Dates; `series`: windowSeries()'s.
 */
export function windowsChart({ starts, series, title = '', valueLabel = 'estimate per day', width = 640, height = 240 }) {
  const svg = frame(width, height, title);
  const m = { left: 64, right: 120, top: 14, bottom: 44 };
  if (!starts.length || !series.length) {
    text(svg, width / 2, height / 2, 'no windows yet', { 'text-anchor': 'middle', class: 'tick' });
    return svg;
  }
  const vals = series.flatMap((s) => s.points.flatMap((p) => (p ? [p.value, p.low, p.high] : []))).filter(Number.isFinite);
  let lo = Math.min(...vals, 0);
  let hi = Math.max(...vals, 1e-12);
  if (!(hi > lo)) hi = lo + 1;
  const right = width - m.right;
  const slot = (right - m.left) / starts.length;
  const x = (i) => m.left + slot * (i + 0.5);
  const y = (v) => m.top + ((hi - v) / (hi - lo)) * (height - m.top - m.bottom);
  yAxis(svg, y, lo, hi, m.left, right);
  el('line', { x1: m.left, x2: right, y1: height - m.bottom, y2: height - m.bottom, class: 'axis' }, svg);
  axisTitle(svg, 12, (m.top + height - m.bottom) / 2, valueLabel, -90);
  series.forEach((s, k) => {
    const g = el('g', { class: `wseries s${k % 6}`, 'data-label': s.label }, svg);
    for (const run of runs(s.points)) {
      const banded = run.filter((i) => Number.isFinite(s.points[i].low) && Number.isFinite(s.points[i].high));
      if (banded.length === run.length) {
        const upper = run.map((i, j) => `${j ? 'L' : 'M'} ${x(i)} ${y(Math.min(s.points[i].high, hi))}`);
        const lower = [...run].reverse().map((i) => `L ${x(i)} ${y(Math.max(s.points[i].low, lo))}`);
        // a lone window's band is a short bar, so that it shows
        const pad = run.length === 1 ? Math.min(slot * 0.3, 6) : 0;
        const d = pad
          ? `M ${x(run[0]) - pad} ${y(s.points[run[0]].high)} L ${x(run[0]) + pad} ${y(s.points[run[0]].high)} ` +
            `L ${x(run[0]) + pad} ${y(s.points[run[0]].low)} L ${x(run[0]) - pad} ${y(s.points[run[0]].low)} Z`
          : `${upper.join(' ')} ${lower.join(' ')} Z`;
        el('path', { d, class: 'band' }, g);
      }
      const d = run.map((i, j) => `${j ? 'L' : 'M'} ${x(i)} ${y(s.points[i].value)}`).join(' ');
      el('path', { d, class: 'wline' }, g);
    }
    s.points.forEach((p, i) => {
      if (!p || !Number.isFinite(p.value)) return;
      const day = starts[i].toISOString().slice(0, 10);
      const dot = el('circle', { cx: x(i), cy: y(p.value), r: 2.2, class: 'wpt', 'data-day': day, 'data-value': p.value, 'data-low': p.low, 'data-high': p.high }, g);
      el('title', {}, dot).textContent = `${s.label}, ${day}: ${fmt(p.value, 4)} [${fmt(p.low, 4)}, ${fmt(p.high, 4)}]`;
    });
    const ly = m.top + 6 + 14 * k;
    el('line', { x1: right + 8, x2: right + 22, y1: ly, y2: ly, class: 'wline' }, g);
    text(g, right + 26, ly + 3, s.label.slice(0, 14), { class: 'tick legend' });
  });
  const every = Math.max(1, Math.ceil(starts.length / 6));
  starts.forEach((t, i) => {
    if (i % every) return;
    el('line', { x1: x(i), x2: x(i), y1: height - m.bottom, y2: height - m.bottom + 3, class: 'axis' }, svg);
    text(svg, x(i), height - m.bottom + 14, t.toISOString().slice(0, 10), { 'text-anchor': 'middle', class: 'tick xtick' });
  });
  axisTitle(svg, (m.left + right) / 2, height - 6, 'window start (UTC)');
  return svg;
}

/**
 * The top items of a discovery or of named candidates as horizontal bars, most frequent on
 * top, each with its interval as a whisker: items[i] at values[i] in [low[i], high[i]].
 */
export function topChart({ items, values, low, high, title = '', width = 640 }) {
  const row = 22;
  const m = { left: 150, right: 16, top: 10, bottom: 30 };
  const height = m.top + m.bottom + row * Math.max(items.length, 1);
  const svg = frame(width, height, title);
  if (!items.length) {
    text(svg, width / 2, m.top + row / 2 + 4, 'nothing found', { 'text-anchor': 'middle', class: 'tick' });
    return svg;
  }
  const lo = Math.min(0, ...low.filter(Number.isFinite), ...values);
  const hi = Math.max(...high.filter(Number.isFinite), ...values, 1e-9);
  const x = (v) => m.left + ((v - lo) / (hi - lo)) * (width - m.left - m.right);
  const bottom = height - m.bottom;
  for (const t of ticks(lo, hi, 5)) {
    el('line', { x1: x(t), x2: x(t), y1: m.top, y2: bottom, class: t === 0 ? 'zero' : 'grid' }, svg);
    text(svg, x(t), bottom + 14, fmt(t), { 'text-anchor': 'middle', class: 'tick xtick' });
  }
  axisTitle(svg, (m.left + width - m.right) / 2, height - 2, 'estimated frequency');
  items.forEach((item, i) => {
    const cy = m.top + row * (i + 0.5);
    const v = values[i];
    const bar = el('rect', {
      x: Math.min(x(0), x(v)),
      y: cy - row * 0.35,
      width: Math.max(Math.abs(x(v) - x(0)), 0.5),
      height: row * 0.7,
      class: 'bar',
    }, svg);
    el('title', {}, bar).textContent = `${item}: ${fmt(v)} [${fmt(low[i])}, ${fmt(high[i])}]`;
    if (Number.isFinite(low[i]) && Number.isFinite(high[i])) {
      const cap = row * 0.25;
      el('line', { x1: x(low[i]), x2: x(high[i]), y1: cy, y2: cy, class: 'err' }, svg);
      el('line', { x1: x(low[i]), x2: x(low[i]), y1: cy - cap, y2: cy + cap, class: 'err' }, svg);
      el('line', { x1: x(high[i]), x2: x(high[i]), y1: cy - cap, y2: cy + cap, class: 'err' }, svg);
    }
    const label = String(item);
    text(svg, m.left - 6, cy + 4, label.length > 24 ? `${label.slice(0, 23)}…` : label, {
      'text-anchor': 'end',
      class: 'tick ylabel',
    });
  });
  return svg;
}

/**
 * Heat map of a 2-way marginal: rows x cols cells (row-major `values`), each shaded by its
 * estimate and titled `row, col: estimate [low, high]` (its interval), with the estimate
 * written in the cell when there is room.
 */
export function heatMap({ rowLabels, colLabels, values, low, high, title = '', width = 640 }) {
  const rows = rowLabels.length;
  const cols = colLabels.length;
  const m = { left: 80, right: 8, top: 10, bottom: 48 };
  const cell = Math.max(Math.min((width - m.left - m.right) / cols, 48), 4);
  const height = m.top + m.bottom + cell * rows;
  const svg = frame(width, height, title);
  const finite = values.filter(Number.isFinite);
  const lo = Math.min(0, ...finite);
  const hi = Math.max(...finite, 1e-9);
  values.forEach((v, k) => {
    const i = Math.floor(k / cols);
    const j = k % cols;
    const x = m.left + j * cell;
    const yy = m.top + i * cell;
    const share = Math.min(Math.max((v - lo) / (hi - lo), 0), 1);
    const rect = el('rect', {
      x,
      y: yy,
      width: Math.max(cell - 1, 1),
      height: Math.max(cell - 1, 1),
      class: 'heat',
      'fill-opacity': (0.08 + 0.92 * share).toFixed(3),
      'data-row': i,
      'data-col': j,
      'data-estimate': v,
    }, svg);
    el('title', {}, rect).textContent =
      `${rowLabels[i]}, ${colLabels[j]}: ${fmt(v)} [${fmt(low[k])}, ${fmt(high[k])}]`;
    if (cell >= 36) text(svg, x + cell / 2, yy + cell / 2 + 3, fmt(v, 2), { 'text-anchor': 'middle', class: 'tick' });
  });
  rowLabels.forEach((l, i) => {
    text(svg, m.left - 4, m.top + (i + 0.5) * cell + 3, String(l).slice(0, 12), { 'text-anchor': 'end', class: 'tick' });
  });
  colLabels.forEach((l, j) => {
    const lx = m.left + (j + 0.5) * cell;
    const ly = m.top + rows * cell + 10;
    text(svg, lx, ly, String(l).slice(0, 12), { transform: `rotate(-45 ${lx} ${ly})`, 'text-anchor': 'end', class: 'tick' });
  });
  return svg;
}
