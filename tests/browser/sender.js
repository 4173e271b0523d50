// The test page of tests/test_dashboard_browser.py: what a web page does to send reports
// with clients/js (fetchSpec, then send), run by chromium. Parameters come in the query
// string: collector (base URL), token (ingest + read); the plan comes in the fragment
// (#plan=JSON, never sent to a server, so it may be long): a list of
// {collection, counts | values, labels, seed, batch}. Item v is sent counts[v] times, as its
// label when `labels` is true, as the string words[v] when `words` is given; `values` (numbers, for numerical collections) are sent as given. With a `seed` the coins are a seeded splitmix64 stream (a
// reproducible test); without one they come from crypto.getRandomValues, as in production.
// The outcome goes to document.body.dataset.done (JSON) or .error.
import { fetchSpec, mix64, secureCoins, send } from '../../clients/js/src/index.js';

const MASK64 = (1n << 64n) - 1n;

function seededCoins(seed) {
  let state = BigInt(seed) & MASK64;
  const next = () => {
    state = (state + 0x9e3779b97f4a7c15n) & MASK64;
    return mix64(state);
  };
  return {
    uniform: () => Number(next() >> 11n) / 2 ** 53,
    u64: next,
    u64Array: (n) => BigUint64Array.from({ length: n }, next),
  };
}

const params = new URLSearchParams(window.location.search);
const collector = params.get('collector');
const token = params.get('token') || undefined;
const plan = JSON.parse(new URLSearchParams(window.location.hash.slice(1)).get('plan'));
const log = (line) => {
  document.getElementById('log').textContent += `${line}\n`;
};

try {
  const results = {};
  for (const { collection, counts, values: given, labels = false, words = null, seed = null, batch = 500 } of plan) {
    const info = await fetchSpec(collector, collection, { token });
    const coins = seed === null ? secureCoins : seededCoins(seed);
    const values = given ?? [];
    if (!given) {
      counts.forEach((c, v) => {
        for (let i = 0; i < c; i++) values.push(words ? words[v] : labels ? info.encoder.categories[v] : v);
      });
    }
    const start = performance.now();
    let stored = 0;
    let batches = 0;
    for (let i = 0; i < values.length; i += batch) {
      const res = await send(collector, info, values.slice(i, i + batch), {
        token,
        coins,
        idempotencyKey: `${collection}-${i}`,
      });
      stored += res.n;
      batches += 1;
    }
    results[collection] = { stored, batches, seconds: (performance.now() - start) / 1000 };
    log(`${collection}: ${stored} reports in ${batches} batches`);
  }
  document.body.dataset.done = JSON.stringify(results);
} catch (err) {
  log(String(err.stack || err));
  document.body.dataset.error = String(err.message || err);
}
