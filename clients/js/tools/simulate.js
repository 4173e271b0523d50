// Randomize many values and print the JSON body (for the Python-side statistical tests).
// Usage: node tools/simulate.js '{"info": {mechanism, fingerprint}, "counts": [c0, ...], "seed": s}'
// Item v appears counts[v] times; or "values": [v0, v1, ...] (numbers, labels) are randomized
// as given. Without an argument the JSON comes from stdin (long value lists). With "seed" the coins come from a seeded splitmix64
// stream (reproducible tests); without it from crypto.getRandomValues, as in production.
import { buildBody, mix64, secureCoins } from '../src/index.js';

const MASK64 = (1n << 64n) - 1n;

/** Reproducible coins: splitmix64 outputs (test use only, never for real reports). */
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

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const { info, counts, values: given, seed } = JSON.parse(process.argv[2] ?? (await readStdin()));
const values = given ?? [];
if (!given) {
  counts.forEach((c, v) => {
    for (let i = 0; i < c; i++) values.push(v);
  });
}
const coins = seed == null ? secureCoins : seededCoins(seed);
const start = process.hrtime.bigint();
const body = buildBody(info, values, coins);
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
process.stdout.write(JSON.stringify(body));
process.stderr.write(JSON.stringify({ n: values.length, seconds }) + '\n');
