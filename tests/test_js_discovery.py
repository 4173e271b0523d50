"""The JavaScript client's discovery randomizers (clients/js/src/discovery.js: PEM, TreeHist, SFP).

Bit-exactness (symbol grids, prefix keys, the public hash family, the integer GRR weights,
the report for the same 64-bit words) is checked by the shared vectors
(``tests/vectors/discovery.json``, run by ``node --test``; ``tests/test_js_client.py``
checks they are current and runs the node suite). Here: strings randomized by the client
under node (seeded words, and once crypto.getRandomValues), aggregated and searched by
ldpkit, give the frequent strings with unbiased frequencies (z-tests with the served
standard errors), and the same check fails when the server decodes with 1.5x epsilon (for
SFP: the whole-string sketch's unbiased frequencies, and its found strings); and the
client's reports sent to a live collector give its top-k.

Skipped without ``node`` except in CI (see tests/test_js_client.py).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _jshelpers import js_reports, needs_node, send
from ldpkit.discovery import PEM, SFP, TreeHist
from ldpkit.service import create_app
from ldpkit.spec import Mechanism, Reports

pytestmark = needs_node

WORDS = ["hello", "help", "zoë", "日本語", "🙂 ok"]
COUNTS = [7000, 5000, 3500, 2500, 2000]  # n = 20_000
TRUTH = dict(zip(WORDS, np.array(COUNTS) / sum(COUNTS)))
# g and H fixed: decoding at another epsilon then changes only the GRR probabilities
SPECS = [
    PEM(epsilon=4.0, max_length=10, top_k=5, hash_range=48, hash_functions=128),
    TreeHist(epsilon=4.0, max_length=10, top_k=5, hash_range=48, hash_functions=128),
]


def _values(counts: list[int]) -> list[str]:
    return [w for w, c in zip(WORDS, counts) for _ in range(c)]


def _max_z(spec: Mechanism, reports: Reports) -> tuple[tuple[str, ...], float]:
    decoded = Reports(spec, **reports.arrays)  # the same arrays, maybe under another spec
    found = spec.estimate(spec.aggregate(decoded))
    expected = np.array([TRUTH.get(s, 0.0) for s in found.items])
    return found.items, float(np.max(np.abs((found.frequencies - expected) / found.std_error)))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_strings_are_discovered_without_bias(spec: Any) -> None:
    """Find the client's strings with unbiased frequencies; a wrong epsilon is caught."""
    reports = js_reports(spec, values=_values(COUNTS), seed=20261207)
    assert len(reports) == sum(COUNTS)
    items, z = _max_z(spec, reports)
    assert sorted(items) == sorted(WORDS) and z <= 5.0
    # the check has power: decoding with epsilon x 1.5 is caught
    assert _max_z(spec.replace(epsilon=spec.epsilon * 1.5), reports)[1] > 6.0


@pytest.mark.slow
def test_js_secure_coins_are_discovered_without_bias() -> None:
    """Find the strings the client randomized with crypto.getRandomValues, unbiased."""
    # crypto.getRandomValues (not reproducible): |z| <= 5.5 over 5 found strings fails by
    # chance with probability < 2e-7
    spec = SPECS[0]
    reports = js_reports(spec, values=_values(COUNTS), seed=None)
    items, z = _max_z(spec, reports)
    assert sorted(items) == sorted(WORDS) and z <= 5.5


LETTER_WORDS = ["pear", "kiwi", "fig", "plum"]
LETTER_COUNTS = [10000, 6000, 3000, 1000]  # n = 20_000


@pytest.mark.slow
def test_js_sfp_reports_are_unbiased() -> None:
    """Estimate the client's SFP strings without bias from the whole-string sketch.

    z-tests of ``word_frequencies`` with the sketch's variance over the held strings and
    one nobody holds; the same check fails when the server decodes with 1.5x epsilon; at
    epsilon 8 the search finds the two most frequent strings.
    """
    spec = SFP(epsilon=2.0, max_length=4, top_k=2, depth=8)
    values = [w for w, c in zip(LETTER_WORDS, LETTER_COUNTS) for _ in range(c)]
    reports = js_reports(spec, values=values, seed=20261208)
    names = [*LETTER_WORDS, "zzz"]
    truth = np.append(np.array(LETTER_COUNTS) / sum(LETTER_COUNTS), 0.0)

    def max_z(served: Any) -> float:
        stats = served.aggregate(Reports(served, **reports.arrays))
        f = served.word_frequencies(stats, names)
        var = served._word_spec().variance(stats.n, np.clip(truth, 0.0, 1.0))
        return float(np.max(np.abs((f - truth) / np.sqrt(var))))

    assert max_z(spec) <= 5.0
    assert max_z(spec.replace(epsilon=spec.epsilon * 1.5)) > 6.0
    # at epsilon 8 the fragments assemble the two most frequent strings
    strong = spec.replace(epsilon=8.0)
    reports = js_reports(strong, values=values[::2], seed=20261209)
    assert strong.estimate(strong.aggregate(reports)).items == ("pear", "kiwi")


@pytest.mark.slow
def test_js_strings_to_a_live_collector_give_the_top_k(tmp_path: Path, serve_app: Any) -> None:
    """Find the top-k of strings the JS client sent to a live collector.

    clients/js fetches the PEM spec, randomizes strings and posts them in batches; the
    collector's estimate finds the frequent strings, most frequent first.
    """
    spec = PEM(epsilon=4.0, max_length=10, top_k=3)
    url = serve_app(create_app({"words": spec}, f"sqlite:///{tmp_path / 'c.db'}"))
    counts = [3000, 2000, 1200, 500, 300]  # n = 7000; the third 8 sd above the fourth
    arg = {"url": url, "collection": "words", "values": _values(counts), "batch": 2000}
    assert send(arg) == {"stored": sum(counts)}
    with urllib.request.urlopen(f"{url}/v1/collections/words/estimate", timeout=60) as response:
        est = json.loads(response.read())
    assert est["kind"] == "heavy_hitters" and est["n"] == sum(counts) and est["batches"] == 4
    assert [t["item"] for t in est["top"]] == WORDS[:3]
    truth = np.array(counts[:3]) / sum(counts)
    z = (np.array(est["frequencies"]) - truth) / np.array(est["std_errors"])
    assert float(np.max(np.abs(z))) <= 5.0
    assert all(t["ci_low"] <= t["frequency"] <= t["ci_high"] for t in est["top"])
