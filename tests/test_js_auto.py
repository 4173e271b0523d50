"""The JavaScript client's AutoDistribution and HierarchicalHistogram (clients/js/src/mechanisms.js)
against Python.

Bit-exactness given the coins is checked by the shared vectors (``tests/vectors/numeric.json``,
``tree_bodies``, run by ``node --test``). Here the *law* of the hybrid reports: reports made
by the client under node with seeded coins, per input value, are sorted into the joint
outcomes (Square Wave branch: the report value binned; HH level k with GRR: the item; with
OLH: whether the hash of the user's node under her seed equals her report) and compared
(chi-square, alpha = 1e-6) with the exact law the Python spec gives: ``(1 - r)`` times the
Square Wave law, ``r`` times the level's share (``hh_level_shares``) times the level oracle's (p at the node, q elsewhere; OLH supports
the node with probability p). The same test rejects the law at epsilon x 1.3 and at
hh_share x 1.3 and / 1.3. The client's bodies decode and aggregate in ldpkit.

Skipped without ``node`` except in CI (see tests/test_js_client.py).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from _jshelpers import (
    CLIENT,
    chi_square_p,
    flat_bump_law,
    js_reports,
    needs_node,
    rounding_weights,
    send,
)
from ldpkit.frequency import GRR, OLH
from ldpkit.frequency.hashing import local_hash
from ldpkit.io import reports_from_dict
from ldpkit.numeric import AutoDistribution
from ldpkit.spec import Reports

pytestmark = needs_node

ALPHA = 1e-6
BINS = 40


def _outcomes(spec: AutoDistribution, reports: Reports, v: float) -> tuple[np.ndarray, np.ndarray]:
    """(observed, expected) counts of the joint outcomes of reports of inputs all equal to v,
    the outcomes and their law both as ``spec`` defines them."""
    n = len(reports)
    r = float(spec.hh_share or 0.0)
    wave, tree = spec.wave, spec.tree
    levels = np.asarray(reports.levels, dtype=np.int64)
    # Square Wave branch: report values binned on the report grid's range
    g = wave._grid
    cells = wave.report_values()
    kw = rounding_weights(np.array([(v - wave.low) / wave.span]), g.steps)
    law = flat_bump_law(kw, g.cells, g.w_low, int(g.bump[0]), g.bump.size, g.total)
    edges = np.linspace(float(cells.min()), float(cells.max()), BINS + 1)[1:-1]
    sw = levels == 0
    observed = [np.bincount(np.digitize(reports.values[sw], edges), minlength=BINS)]
    expected = [n * (1.0 - r) * np.bincount(np.digitize(cells, edges), weights=law, minlength=BINS)]
    # HH branch: per level, the oracle's law of the user's node
    leaf = int(tree.leaf_index(np.array([v]))[0])
    h = tree.height
    shares = spec.hh_level_shares()  # level h's share moved to h - 1
    for k in range(1, h + 1):
        oracle = tree.level_oracle(k)
        node = leaf // tree.branching ** (h - k)
        at = levels == k
        items = np.asarray(reports.items[at], dtype=np.int64)
        if isinstance(oracle, GRR):
            probs = np.full(oracle.domain_size, oracle.q)
            probs[node] = oracle.p
            counts = np.bincount(items, minlength=oracle.domain_size)
        else:
            assert isinstance(oracle, OLH)
            seeds = np.asarray(reports.seeds[at], dtype=np.uint64)
            hashed = local_hash(seeds, np.full(seeds.size, node), oracle.range_size)
            hits = int(np.count_nonzero(hashed == items))
            probs = np.array([oracle.p, 1.0 - oracle.p])
            counts = np.array([hits, items.size - hits])
        if counts.size > probs.size:  # an item outside this spec's domain: impossible here
            return np.array([1.0]), np.array([0.0])
        observed.append(counts)
        expected.append(n * r * shares[k - 1] * probs)
    return np.concatenate(observed), np.concatenate(expected)


def _p_value(spec: AutoDistribution, reports: Reports, v: float) -> float:
    observed, expected = _outcomes(spec, reports, v)
    if expected.sum() == 0:
        return 0.0
    assert np.isclose(expected.sum(), observed.sum(), rtol=1e-9)
    return chi_square_p(observed, expected)


@pytest.mark.parametrize(
    "spec",
    [
        AutoDistribution(epsilon=2.0, buckets=64),  # the default r = 0.25: GRR, GRR, OLH levels
        pytest.param(
            AutoDistribution(epsilon=0.7, low=-3.0, high=5.0, buckets=256, hh_share=0.4),
            marks=pytest.mark.slow,
        ),
    ],
    ids=lambda s: f"eps{s.epsilon:g}-r{s.hh_share:g}",
)
def test_js_auto_hybrid_law_matches_python(spec: AutoDistribution) -> None:
    assert spec.hybrid
    low, high = spec.low, spec.high
    points = [low, high, low + (high - low) * 0.3141592653589793]
    per_input = 20_000
    inputs = np.repeat(points, per_input)
    reports = js_reports(spec, values=inputs.tolist(), seed=20261124)
    parts = [reports[i * per_input : (i + 1) * per_input] for i in range(len(points))]
    p_values = [_p_value(spec, part, v) for part, v in zip(parts, points, strict=True)]
    assert min(p_values) > ALPHA / len(points), p_values
    # power: the law at epsilon x 1.3, and at hh_share x 1.3 or / 1.3, is rejected
    r = float(spec.hh_share or 0.0)
    for wrong in (
        spec.replace(epsilon=spec.epsilon * 1.3),
        spec.replace(hh_share=r * 1.3),
        spec.replace(hh_share=r / 1.3),
    ):
        p_wrong = [_p_value(wrong, part, v) for part, v in zip(parts, points, strict=True)]
        assert min(p_wrong) < ALPHA, (wrong, p_wrong)


def test_js_auto_reports_aggregate_in_python() -> None:
    # secure coins (as in production): the body decodes as the spec's reports and aggregates
    spec = AutoDistribution(epsilon=3.0, low=0.0, high=52.0, expected_n=100_000)
    values = 52.0 * np.random.default_rng(3).beta(5.0, 2.0, 4_000)
    reports = js_reports(spec, values=values.tolist(), seed=None)
    assert set(reports.fields) == {"levels", "values", "items", "seeds"}
    stats = spec.aggregate(reports)
    level_n = np.asarray(stats.level_n)
    assert stats.n == values.size and int(level_n.sum()) == values.size
    # the HH share is r = 0.25 for every value (|z| <= 5 under Binomial(n, r))
    z = (level_n[1:].sum() - 0.25 * values.size) / np.sqrt(values.size * 0.25 * 0.75)
    assert abs(z) <= 5.0, z
    # r = 0: exactly Square Wave's single field
    plain = AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.0)
    assert js_reports(plain, values=[0.0, 0.5, 1.0], seed=1).fields == ("values",)


def test_tree_vector_bodies_aggregate_in_python() -> None:
    cases = json.loads((CLIENT.parents[1] / "tests" / "vectors" / "numeric.json").read_text())
    assert len(cases["tree_bodies"]) >= 9
    for case in cases["tree_bodies"]:
        reports = reports_from_dict(case["body"])
        assert reports.spec.aggregate(reports).n == len(case["values"])


def test_auto_spec_from_json_integers_keeps_its_fingerprint() -> None:
    # JSON.stringify writes 0.0 as 0: the rebuilt spec must be the same (as SquareWave's)
    spec = AutoDistribution(epsilon=2.0, low=0, high=52, expected_n=1000)
    assert spec.fingerprint == AutoDistribution(epsilon=2.0, high=52.0, expected_n=1000).fingerprint
    assert isinstance(spec.low, float) and isinstance(spec.high, float)


@pytest.mark.slow
def test_js_auto_reports_to_a_live_collector(tmp_path: Any, serve_app: Any) -> None:
    # the browser's path (fetchSpec, randomize, POST) into a collector on 127.0.0.1: the
    # hybrid spec (default r = 0.25 at eps 2, integral bounds as JSON writes them), r = 0,
    # and a HierarchicalHistogram collection are stored and aggregated
    pytest.importorskip("uvicorn")
    import urllib.request

    from ldpkit.numeric import HierarchicalHistogram
    from ldpkit.service.app import create_app

    collections = {
        "auto": AutoDistribution(epsilon=2.0, low=0, high=60, expected_n=1000),
        "auto-sw": AutoDistribution(epsilon=1.0, high=60.0, buckets=64),
        "hh": HierarchicalHistogram(epsilon=1.0, high=60.0, buckets=64),
    }
    url = serve_app(create_app(collections, f"sqlite:///{tmp_path / 'collector.db'}"))
    values = (60.0 * np.random.default_rng(9).beta(5.0, 2.0, 600)).tolist()
    for name in collections:
        arg = {"url": url, "collection": name, "values": values, "batch": 200}
        assert send(arg) == {"stored": len(values)}
        with urllib.request.urlopen(f"{url}/v1/collections/{name}", timeout=30) as r:
            info = json.loads(r.read())
        assert (info["n"], info["batches"]) == (len(values), 3), name
