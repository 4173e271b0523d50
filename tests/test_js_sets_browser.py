"""The JS client's set and key-value randomizers (clients/js/src/sets.js) in a real browser.

Headless chromium (Debian's ``/usr/bin/chromium`` or ``$CHROMIUM``, no driver: ``--dump-dom``
after a virtual time budget) loads a page served from the repository on 127.0.0.1 that
imports ``clients/js`` and checks, against ``tests/vectors/sets.json`` (written by the Python
side): the bodies of PaddingSampling (GRR, OLH), PCKV (UE, GRR), PrivKV (round 0 and a later
PrivKVM round, fakes from the previous means) and PrivSet (Floyd's subsets and the shuffle,
sets sampled down) made from the vectors' fixed uniforms and 64-bit words, their privacy
losses, and well-formed bodies from ``crypto.getRandomValues``. The page writes its verdict
into the DOM.

End to end: a second page fetches a PrivSet collection's spec from a live collector on
127.0.0.1 (uvicorn, SQLite, CORS for the page's origin), randomizes users' sets with the
browser's secure coins and POSTs them with ``send``; the collector's estimate equals the
offline estimate of the very bodies the page sent.

A later PrivKVM round: a third page randomizes users' pairs for round 1 of a two-round
PrivKV (a fair key bit, non-holders' fake values drawn from the previous round's means) with
the browser's secure coins; the estimate's means pass their z-test against ``f m + (1 - f)
m'`` at the spec's epsilon and fail it when the same reports are read at 1.3 eps. Skips
without chromium except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _chromium import needs_chromium, page_verdict, serve_repository
from ldpkit.io import reports_from_dict
from ldpkit.sets import PrivKV, PrivSet

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs_chromium

PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { buildBody, fromSpec } from '/clients/js/src/index.js';
const out = document.getElementById('out');
// deep equality with any key order (the bodies are JSON: arrays, objects, scalars)
const same = (a, b) => {
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a !== null && typeof a === 'object') {
    if (b === null || typeof b !== 'object' || Array.isArray(b)) return false;
    const ka = Object.keys(a).sort();
    return same(ka, Object.keys(b).sort()) && ka.every((k) => same(a[k], b[k]));
  }
  return a === b;
};
try {
  const cases = await (await fetch('/tests/vectors/sets.json')).json();
  const bad = [];
  const seen = new Set();
  for (const c of cases) {
    let iu = 0;
    let iw = 0;
    const coins = {
      uniform: () => c.uniforms[iu++],
      u64: () => BigInt(c.words[iw++]),
      u64Array: (n) => BigUint64Array.from(c.words.slice(iw, (iw += n)).map(BigInt)),
    };
    const { mechanism, params } = c.body.mechanism;
    const m = fromSpec(c.body.mechanism);
    const tag = `${mechanism}-${params.method ?? m.oracleName ?? ''}${mechanism === 'PrivKV' ? 'round' + m.round : ''}`;
    seen.add(tag);
    const info = { mechanism: c.body.mechanism, fingerprint: c.body.fingerprint };
    if (!same(buildBody(info, c.values, coins), c.body)) bad.push(tag);
    if (c.privacy_loss !== null && m.privacyLoss() !== c.privacy_loss) bad.push('loss ' + tag);
    const secure = buildBody(info, c.values); // crypto.getRandomValues
    for (const [k, a] of Object.entries(c.body.arrays)) {
      if (!same(secure.arrays[k].shape, a.shape) || secure.arrays[k].dtype !== a.dtype) bad.push(k + ' ' + tag);
    }
  }
  out.textContent = bad.length ? 'FAIL ' + JSON.stringify(bad) : `PASS ${cases.length} ${[...seen].sort().join(',')}`;
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""

SEND_PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { fetchSpec, send } from '/clients/js/src/index.js';
const out = document.getElementById('out');
try {
  const q = new URLSearchParams(location.search);
  const collector = q.get('collector');
  const users = JSON.parse(new URLSearchParams(location.hash.slice(1)).get('users'));
  const info = await fetchSpec(collector, q.get('collection'));
  const bodies = [];
  // what the page POSTs, kept for the offline estimate
  const fetchFn = (url, opts) => {
    bodies.push(JSON.parse(opts.body));
    return fetch(url, opts);
  };
  let stored = 0;
  for (let i = 0; i < users.length; i += 1000) {
    const res = await send(collector, info, users.slice(i, i + 1000), {
      encoded: true, idempotencyKey: `privset-page-${i}`, fetchFn,
    });
    stored += res.n;
  }
  out.textContent = JSON.stringify({ stored, bodies });
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""
ROUND_PAGE = """<!doctype html><html><body><pre id="out">pending</pre>
<script type="module">
import { buildBody } from '/clients/js/src/index.js';
const out = document.getElementById('out');
try {
  const c = await (await fetch('/__privkvm_case.json')).json();
  out.textContent = JSON.stringify(buildBody(c.info, c.users)); // crypto.getRandomValues
} catch (e) {
  out.textContent = 'ERROR ' + e;
}
</script></body></html>
"""
PAGES = {"/__sets_page.html": PAGE, "/__sets_send_page.html": SEND_PAGE}


@pytest.fixture
def server() -> Iterator[str]:
    """Serve the repository over HTTP on 127.0.0.1, plus the test pages."""
    with serve_repository(PAGES) as url:
        yield url


def test_set_randomizers_reproduce_the_vectors_in_chromium(server: str, tmp_path: Path) -> None:
    """Every set and key-value body of sets.json, and every privacy loss, in chromium."""
    verdict = page_verdict(f"{server}/__sets_page.html", tmp_path, budget_ms=30000)
    cases = json.loads((ROOT / "tests" / "vectors" / "sets.json").read_text())
    tags = (
        "PCKV-grr,PCKV-ue,PaddingSampling-grr,PaddingSampling-olh,"
        "PrivKV-round0,PrivKV-round2,PrivSet-"
    )
    assert verdict == f"PASS {len(cases)} {tags}", verdict


def test_privset_from_chromium_to_a_live_collector(
    server: str, tmp_path: Path, serve_app: Callable[[Any], str]
) -> None:
    """PrivSet reports randomized in chromium and POSTed to 127.0.0.1: the offline estimate."""
    from ldpkit.service import create_app

    spec = PrivSet(epsilon=2.0, domain_size=6, padding=2)
    gen = np.random.default_rng(32)
    users = [gen.choice(6, size=int(k), replace=False).tolist() for k in gen.integers(0, 5, 3000)]
    app = create_app(
        {"privset": spec}, f"sqlite:///{tmp_path / 'collector.db'}", cors_origins=[server]
    )
    collector = serve_app(app)
    query = urllib.parse.urlencode({"collector": collector, "collection": "privset"})
    fragment = urllib.parse.urlencode({"users": json.dumps(users, separators=(",", ":"))})
    verdict = page_verdict(
        f"{server}/__sets_send_page.html?{query}#{fragment}", tmp_path, budget_ms=30000
    )
    assert not verdict.startswith(("ERROR", "pending")), verdict
    sent = json.loads(verdict)
    assert sent["stored"] == len(users) and len(sent["bodies"]) == 3
    batches = [reports_from_dict(b, expected=spec) for b in sent["bodies"]]
    stats = spec.aggregate(batches[0])
    for b in batches[1:]:
        stats = stats.merge(spec.aggregate(b))
    offline = spec.estimate(stats)
    with urllib.request.urlopen(f"{collector}/v1/collections/privset/estimate", timeout=30) as r:
        body = json.loads(r.read())
    assert body["n"] == len(users)
    np.testing.assert_allclose(body["frequencies"], offline.frequencies, rtol=1e-12, atol=1e-15)
    # the browser's reports are a PrivSet law's: k items each, over the d + ell items
    assert int(stats.counts.sum()) == spec.k * len(users)


#: Round 1 of two: key k held by a share ``SHARE[k]`` of the users with value ``VALUE[k]``;
#: the previous round's means ``FAKE`` (key 2, held by nobody, reports only fakes)
SHARE, VALUE, FAKE = np.array([0.6, 0.4, 0.0]), np.array([0.9, -0.9, 0.0]), (0.8, -0.7, 0.6)


def _round_z(spec: PrivKV, stats: Any, f: np.ndarray) -> np.ndarray:
    """Return the z of each key's estimated mean against ``f m + (1 - f) m'``.

    With a fair key bit (rounds t > 0) a report ``<1, +-1>`` of key k comes from a holder or
    a non-holder alike w.p. 1/2, so given their number ``c+ + c-`` the estimated mean is
    unbiased for ``f m + (1 - f) m'`` with variance ``(1 - ((2 p2 - 1) t)^2) / ((c+ + c-)
    (2 p2 - 1)^2)`` (PrivKV section IV; PrivKVM's fake values, section V).
    """
    est = spec.estimate(stats)
    target = f * VALUE + (1 - f) * np.array(FAKE)
    c = 2 * spec.p2 - 1
    ones = (stats.positive + stats.negative).astype(np.float64)
    return (est.means - target) / np.sqrt((1 - (c * target) ** 2) / (ones * c**2))


def test_privkvm_later_round_from_chromium_passes_its_z_test(tmp_path: Path) -> None:
    """A round-1 PrivKVM collection randomized in chromium: |z| <= 5, and > 5 at 1.3 eps."""
    spec = PrivKV(epsilon=6.0, domain_size=3, rounds=2, round=1, fake_means=FAKE)
    gen = np.random.default_rng(321)
    held = gen.random((60_000, 3)) < SHARE[None, :]
    users = [[[int(k), float(VALUE[k])] for k in np.flatnonzero(row)] for row in held]
    case = {"info": {"mechanism": spec.to_dict(), "fingerprint": spec.fingerprint}, "users": users}
    pages = {"/__round_page.html": ROUND_PAGE, "/__privkvm_case.json": json.dumps(case)}
    with serve_repository(pages) as url:
        verdict = page_verdict(f"{url}/__round_page.html", tmp_path, budget_ms=60000)
    assert not verdict.startswith(("ERROR", "pending")), verdict[:500]
    reports = reports_from_dict(json.loads(verdict), expected=spec)
    assert len(reports) == len(users)
    stats = spec.aggregate(reports)
    f = held.mean(axis=0)
    z = _round_z(spec, stats, f)
    assert np.max(np.abs(z)) <= 5, z
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    forged = type(stats)(wrong, stats.n, **{k: getattr(stats, k) for k in wrong.stats_schema()})
    assert np.max(np.abs(_round_z(wrong, forged, f))) > 5
