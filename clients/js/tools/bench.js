// Randomize speed (values/s, crypto.getRandomValues coins) and JSON sizes of the client.
// Usage: node tools/bench.js [n]   (prints one JSON line per mechanism)
import { buildBody } from '../src/index.js';

const n = Number(process.argv[2] ?? 20000);
const cases = [
  { mechanism: 'GRR', params: { epsilon: 1, domain_size: 16 } },
  { mechanism: 'OUE', params: { epsilon: 1, domain_size: 16 } },
  { mechanism: 'OUE', params: { epsilon: 1, domain_size: 1024 } },
  { mechanism: 'OLH', params: { epsilon: 1, domain_size: 1024, hash_range: null } },
  { mechanism: 'HadamardResponse', params: { epsilon: 1, domain_size: 1024 } },
];
for (const mechanism of cases) {
  const info = { mechanism, fingerprint: '0123456789abcdef' };
  const d = mechanism.params.domain_size;
  const values = Array.from({ length: n }, (_, i) => i % d);
  const count = mechanism.mechanism === 'OUE' && d > 100 ? Math.min(n, 2000) : n;
  const start = process.hrtime.bigint();
  const body = buildBody(info, values.slice(0, count));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const one = JSON.stringify(buildBody(info, [0])).length;
  const perReport = (JSON.stringify(body).length - one) / (count - 1);
  console.log(JSON.stringify({
    mechanism: mechanism.mechanism,
    d,
    values_per_s: Math.round(count / seconds),
    one_report_body_bytes: one,
    bytes_per_extra_report: Number(perReport.toFixed(1)),
  }));
}
