// Randomize speed (values per CPU second, crypto.getRandomValues coins; CPU time so that a
// busy machine does not deflate it) and JSON sizes of the client.
// Usage: node tools/bench.js [n]   (prints one JSON line per mechanism)
import { buildBody } from '../src/index.js';

const n = Number(process.argv[2] ?? 20000);
const cases = [
  { mechanism: 'GRR', params: { epsilon: 1, domain_size: 16 } },
  { mechanism: 'OUE', params: { epsilon: 1, domain_size: 16 } },
  { mechanism: 'OUE', params: { epsilon: 1, domain_size: 1024 } },
  { mechanism: 'OLH', params: { epsilon: 1, domain_size: 1024, hash_range: null } },
  { mechanism: 'HadamardResponse', params: { epsilon: 1, domain_size: 1024 } },
  { mechanism: 'SquareWave', params: { epsilon: 1, low: 0, high: 3600, buckets: 1024 } },
  { mechanism: 'DiscreteSquareWave', params: { epsilon: 1, buckets: 64 } },
  { mechanism: 'StochasticRounding', params: { epsilon: 1, low: 0, high: 120 } },
  { mechanism: 'PiecewiseMechanism', params: { epsilon: 1, low: 0, high: 120 } },
  { mechanism: 'HybridMechanism', params: { epsilon: 2, low: 0, high: 120 } },
  // ldpkit.sets: users hold 0-8 items (or key-value pairs) of d = 1024, padding 4
  { mechanism: 'PaddingSampling', params: { epsilon: 1, domain_size: 1024, padding: 4, oracle: null } },
  { mechanism: 'PaddingSampling', params: { epsilon: 4, domain_size: 16, padding: 4, oracle: null } },
  { mechanism: 'PCKV', params: { epsilon: 1, domain_size: 1024, padding: 4, method: 'grr' } },
  { mechanism: 'PCKV', params: { epsilon: 1, domain_size: 1024, padding: 4, method: 'ue' } },
  { mechanism: 'PrivKV', params: { epsilon: 1, domain_size: 1024 } },
  // open-domain oracles: strings, 1000 distinct ones (each hashed once per call)
  { mechanism: 'CMS', params: { epsilon: 4, width: 1024, depth: 256, domain_size: null } },
  { mechanism: 'HCMS', params: { epsilon: 4, width: 1024, depth: 256, domain_size: null } },
  { mechanism: 'FLH', params: { epsilon: 4, num_hashes: 1024, hash_range: null, domain_size: null } },
];
const SETS = ['PaddingSampling', 'PCKV', 'PrivKV'];
const OPEN = new Set(['CMS', 'HCMS', 'FLH']);
/** User i's set: (i mod 9) distinct items of [0, d) (pairs with values in [-1, 1] for key-value). */
function userSet(i, d, pairs) {
  const items = Array.from({ length: i % 9 }, (_, j) => (i * 7 + j * 131) % d);
  return pairs ? items.map((k, j) => [k, ((i + j) % 17) / 8 - 1]) : items;
}
for (const mechanism of cases) {
  const info = { mechanism, fingerprint: '0123456789abcdef' };
  const p = mechanism.params;
  const open = OPEN.has(mechanism.mechanism);
  const d = open ? 1000 : p.domain_size ?? p.buckets;
  // items for the oracles and DSW, spread values in [low, high] for the numerical ones
  const numerical = p.high !== undefined && mechanism.mechanism !== 'DiscreteSquareWave';
  const sets = SETS.includes(mechanism.mechanism);
  const values = Array.from({ length: n }, (_, i) => {
    if (sets) return userSet(i, d, mechanism.mechanism !== 'PaddingSampling');
    if (open) return `word${i % d}`;
    return numerical ? p.low + ((p.high - p.low) * ((i * 0.6180339887) % 1)) : i % d;
  });
  const unary = mechanism.mechanism === 'OUE' || p.method === 'ue';
  const wide = (unary && d > 100) || mechanism.mechanism === 'CMS';
  const count = wide ? Math.min(n, 2000) : n;
  buildBody(info, values.slice(0, 100)); // builds the grid (once per spec) outside the timing
  const start = process.cpuUsage();
  const body = buildBody(info, values.slice(0, count));
  const used = process.cpuUsage(start);
  const seconds = (used.user + used.system) / 1e6;
  const one = JSON.stringify(buildBody(info, [values[0]])).length;
  const perReport = (JSON.stringify(body).length - one) / (count - 1);
  console.log(JSON.stringify({
    mechanism: mechanism.mechanism,
    d: numerical || open ? null : d,
    values_per_s: Math.round(count / seconds),
    one_report_body_bytes: one,
    bytes_per_extra_report: Number(perReport.toFixed(1)),
  }));
}
