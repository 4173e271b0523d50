// Send reports to a running collector with fetchSpec/send (the path a web page takes).
// Usage: node tools/send.js '{"url": ..., "collection": ..., "counts": [c0, ...], "batch": 500, "token": null}'
// "counts": item v sent counts[v] times (as items, past the encoder); or "values": raw
// answers (labels, numbers, null) that go through the collection's encoder.
import { fetchSpec, send } from '../src/index.js';

const { url, collection, counts, values: given, batch = 500, token = null } = JSON.parse(process.argv[2]);
const values = given ?? [];
if (!given) {
  counts.forEach((c, v) => {
    for (let i = 0; i < c; i++) values.push(v);
  });
}
const info = await fetchSpec(url, collection, { token });
let stored = 0;
for (let i = 0; i < values.length; i += batch) {
  const result = await send(url, info, values.slice(i, i + batch), {
    token,
    idempotencyKey: `tools-send-${i}`,
    encoded: !given,
  });
  stored += result.n;
}
process.stdout.write(JSON.stringify({ stored }) + '\n');
