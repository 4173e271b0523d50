// Talking to an ldpkit collector (src/ldpkit/service/app.py): GET a collection's info,
// randomize locally, POST the JSON reports.

import { fromSpec } from './mechanisms.js';
import { prepare } from './question.js';
import { secureCoins } from './random.js';
import './sketch.js'; // registers CMS, HCMS, FLH with fromSpec
import './discovery.js'; // registers PEM, TreeHist with fromSpec
import './multidim.js'; // registers SPL, SMP, RSFD, CALM, FullDomain, the grids, GroupMean

/** The JSON body ldpkit.io.reports_from_dict accepts, for raw (integer) values. */
export function buildBody(info, values, coins = secureCoins) {
  const mech = fromSpec(info.mechanism);
  const arrays = mech.randomize(values, coins);
  if (info.report_fields) {
    for (const [k, f] of Object.entries(info.report_fields)) {
      if (arrays[k] && arrays[k].dtype !== f.dtype) {
        throw new Error(`field ${k}: collector expects dtype ${f.dtype}, client made ${arrays[k].dtype}`);
      }
    }
  }
  return {
    format: 'ldpkit.reports/1',
    mechanism: info.mechanism,
    fingerprint: info.fingerprint,
    arrays,
  };
}

/**
 * Raw answers -> the randomizer's input, as the Python side does it: category labels to
 * items with the collection's encoder (ldpkit.Encoder: unseen labels to "<other>" when its
 * unknown policy is "other", else an error; null/NaN to "<missing>" when its missing policy
 * is "item"), numbers clipped or checked when the info comes from a Question (clip policy).
 */
export function encodeValues(info, values) {
  return prepare(info, values);
}

function headers(token, extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

/** GET /v1/collections/{name}: spec, fingerprint, encoder and report fields. */
export async function fetchSpec(baseUrl, collection, { token, fetchFn = globalThis.fetch } = {}) {
  const url = `${baseUrl.replace(/\/$/, '')}/v1/collections/${encodeURIComponent(collection)}`;
  const res = await fetchFn(url, { headers: headers(token) });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * Randomize values (category labels, numbers, or items with `encoded: true`) and POST them
 * to /v1/reports/{name}.
 */
export async function send(baseUrl, info, values, { token, idempotencyKey, fetchFn = globalThis.fetch, coins, encoded = false } = {}) {
  const body = buildBody(info, encoded ? values : prepare(info, values), coins);
  const url = `${baseUrl.replace(/\/$/, '')}/v1/reports/${encodeURIComponent(info.name)}`;
  const extra = { 'Content-Type': 'application/json' };
  if (idempotencyKey) extra['Idempotency-Key'] = idempotencyKey;
  const res = await fetchFn(url, { method: 'POST', headers: headers(token, extra), body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}
