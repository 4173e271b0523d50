"""A memoizing clients/js Device in a real browser (Debian's chromium), across 20 reloads.

A static server on 127.0.0.1 serves ``tests/browser/device.html``; ``tests/browser/reload.mjs``
loads it and reloads it 20 times in one browser context, so its storage persists ("the
browser client holds the guarantee across reloads"). Each load opens the device from its
default store, IndexedDB, or (a second run, the page hiding ``window.indexedDB``) the
localStorage fallback, and reports a few values of an L-GRR, an L-OSUE, a LOLOHA (one hash
seed per device, memoized per hashed value), a dBitFlipPM (sampled buckets kept, one report
per bucket) and a 1BitMean question (alpha kept, one bit per rounded point) with secure
coins, and hands back its reports and the 64-bit words its coins gave. Checked:

- the secret and the stored memo are the same on every load, and no reload writes to the
  store (every answer after the first load is a memoized one);
- every report of every load is the instantaneous round, replayed here on those words, of the
  permanent answer that *Python's* :class:`ldpkit.Device` derives from that secret: the
  reports' permanent part is the memoized one, and Python and the browser derive it alike;
- the reports still differ between loads (fresh instantaneous coins: no stable identifier;
  dBitFlipPM's and 1BitMean's, which have no instantaneous round, repeat),
  and what the device says it spent stays ``longitudinal_privacy_loss(distinct values)``;
- the page loads nothing from another origin and logs no errors.

Needs node, ``/usr/bin/chromium`` (or ``$CHROMIUM``) and ``npm ci`` in tests/browser
(playwright-core); skips without them, except in CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import functools
import json
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from _chromium import BROWSER, CHROMIUM, NODE, needs_playwright
from ldpkit import Device
from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, DBitFlipPM, OneBitMean
from ldpkit.spec import Mechanism

ROOT = Path(__file__).resolve().parents[1]
RELOADS = 20
pytestmark = needs_playwright

PLAN: list[tuple[Mechanism, list[int]]] = [
    (LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16), [3, 7, 3]),
    (LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=10), [4]),
    (LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=50, hash_range=4), [10, 11]),
    # no instantaneous round: the memoized report itself, every load
    (DBitFlipPM(epsilon=1.0, domain_size=12, sampled_bits=3), [2, 9, 2]),
    (OneBitMean(epsilon=1.0, low=0.0, high=100.0, points=8), [37.5, 80.2]),
]
MEMOIZED_ONLY = (DBitFlipPM, OneBitMean)


class _Handler(SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
    }

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def static_server() -> Iterator[str]:
    """The repository over HTTP on 127.0.0.1 (the page imports clients/js from it)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(ROOT)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _replay(spec: Mechanism, permanent: list[Any], words: list[int]) -> Any:
    """The instantaneous round of the JS client on ``words`` (its draw order), in Python."""
    pending = list(words)
    if isinstance(spec, MEMOIZED_ONLY):
        assert not pending  # no coin drawn
        if isinstance(spec, DBitFlipPM):
            return [row[spec.sampled_bits :] for row in permanent]
        return spec._instantaneous_round(np.asarray(permanent), None).values.tolist()  # type: ignore[arg-type]
    if isinstance(spec, (LGRR, LOLOHA)):
        c, e = spec._rounds()[1]
        d = spec.range_size if isinstance(spec, LOLOHA) else spec.domain_size
        total = c + (d - 1) * e
        limit = ((1 << 64) // total) * total
        out = []
        for y in permanent:
            while (w := pending.pop(0)) >= limit:
                pass
            u = w % total
            other = (u - c) // e
            out.append(int(y) if u < c else other + (other >= int(y)))
        assert not pending
        return out
    assert isinstance(spec, LOSUE)
    tp2, tq2 = spec._rounds()[1]
    rows = []
    for row in permanent:
        bits = np.unpackbits(np.asarray(row, dtype=np.uint8))[: spec.domain_size]
        rows.append(np.packbits([pending.pop(0) < (tp2 if b else tq2) for b in bits]).tolist())
    assert not pending
    return rows


@pytest.mark.parametrize("store", ["indexedDB", "localStorage"])
def test_memoized_reports_across_reloads(static_server: str, tmp_path: Path, store: str) -> None:
    assert NODE is not None
    plan = [{"spec": spec.to_dict(), "values": values} for spec, values in PLAN]
    url = f"{static_server}/tests/browser/device.html#" + urllib.parse.urlencode(
        {"plan": json.dumps(plan), "store": store}
    )
    args = {"chromium": CHROMIUM, "url": url, "reloads": RELOADS}
    done = subprocess.run(
        [NODE, "reload.mjs", json.dumps(args)],
        cwd=BROWSER,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["consoleErrors"] == [] and out["foreignRequests"] == []
    loads = out["loads"]
    assert len(loads) == RELOADS + 1

    # the store asked for (IndexedDB leaves localStorage empty), one secret, one memo; the
    # first load creates them, no reload writes anything
    assert {load["store"] for load in loads} == {store}
    if store == "indexedDB":
        assert {load["localStorageItems"] for load in loads} == {0}
    first = loads[0]
    assert first["storeBefore"] is None
    assert {load["secret"] for load in loads} == {first["secret"]}
    assert all(load["storeBefore"] == first["storeAfter"] for load in loads[1:])
    assert all(load["storeAfter"] == first["storeAfter"] for load in loads)

    # Python's derivation from the browser's secret gives the permanent answers, and every
    # report of every load is their instantaneous round on the words the page drew
    device = Device(bytes.fromhex(first["secret"]), tmp_path / "device.json")
    stored = json.loads(first["storeAfter"])["memo"]
    distinct_reports: list[set[str]] = [set() for _ in PLAN]
    for load in loads:
        for k, ((spec, values), result) in enumerate(zip(PLAN, load["results"], strict=True)):
            permanent = [device.permanent(spec, v)["data"] for v in values]
            words = [int(w) for w in result["words"]]
            distinct = len(set(values))  # memo keys (LOLOHA: hashed values, which may collide)
            if isinstance(spec, LOLOHA):  # rows (seed, answer): one seed for the device
                seeds = {str(p[0]) for p in permanent}
                assert seeds == set(result["report"]["seeds"]["data"]) and len(seeds) == 1
                assert json.loads(first["storeAfter"])["states"][spec.fingerprint] == seeds.pop()
                keys = spec._memo_keys(np.asarray(values), np.uint64([permanent[0][0]]))
                distinct = len(set(keys.tolist()))
                memo = [stored[spec.fingerprint][f"i{k}"] for k in keys.tolist()]
                assert [[int(x) for x in m] for m in memo] == permanent
                permanent = [p[1] for p in permanent]
            elif isinstance(spec, MEMOIZED_ONLY):  # memoized per memo key, under the device's state
                state = json.loads(first["storeAfter"])["states"][spec.fingerprint]
                keys = spec._memo_keys(np.asarray(values), np.atleast_1d(state))
                distinct = len(set(keys.tolist()))
                assert [stored[spec.fingerprint][f"i{k}"] for k in keys.tolist()] == permanent
            else:
                permanent = [p[0] if isinstance(spec, LGRR) else p for p in permanent]
                assert [stored[spec.fingerprint][f"i{v}"] for v in values] == permanent
            field = "bits" if isinstance(spec, (LOSUE, DBitFlipPM)) else "values"
            got = result["report"][field]["data"]
            assert got == _replay(spec, permanent, words), (spec, load)
            assert result["spent"] == pytest.approx(
                spec.longitudinal_privacy_loss(distinct),  # type: ignore[attr-defined]
                rel=1e-12,
            )
            distinct_reports[k].add(json.dumps(got))
    # fresh instantaneous coins: the reports are not a stable identifier across loads
    # (the L-OSUE report of one value repeats by chance with probability < 0.03 per pair)
    # (dBitFlipPM and 1BitMean have no such round: the same report every load)
    for (spec, _), seen in zip(PLAN, distinct_reports, strict=True):
        assert len(seen) == 1 if isinstance(spec, MEMOIZED_ONLY) else len(seen) > 1
    assert len(distinct_reports[1]) >= RELOADS // 2
