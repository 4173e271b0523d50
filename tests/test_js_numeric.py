"""The JavaScript client's numerical randomizers (clients/js/src/numeric.js) against Python.

Bit-exactness (same grid, same report for the same coins) is checked by the shared vectors
(``tests/vectors/numeric.json``, run by ``node --test``). Here the *laws*: reports made by
the client under node with seeded coins are

- binned by value and compared (chi-square, alpha = 1e-6) with the exact law the Python
  spec gives those inputs (the unbiased rounding to the input grid included); the same
  test rejects the law of the spec at epsilon x 1.3 (and, for the log-scale Square Wave of
  ToPL's threshold phase, at log_scale x 1.3 and on the linear scale);
- decoded by ldpkit: PM/HM/SR means are unbiased (|z| <= 5 with the exact variance at the
  true values), and a mirrored truth is rejected; SW's reports, aggregated by the Python
  server code, are consistent with the truth's predicted output histogram.

Skipped without ``node`` except in CI (see tests/test_js_client.py).
"""

from __future__ import annotations

import json
from pathlib import Path
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
from ldpkit.io import reports_from_dict
from ldpkit.numeric import (
    DiscreteSquareWave,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)
from ldpkit.numeric.mean import _report_tables
from ldpkit.spec import Mechanism

pytestmark = needs_node

ALPHA = 1e-6


# --- the exact law of a spec's reports for given inputs (Python side) --------------------------
def _log_rounding_weights(spec: SquareWave, v: np.ndarray) -> np.ndarray:
    """Sum over users of P[grid input k] under the log-scale rounding (unbiased in the
    value's units between ``s (e^(Lambda k / L) - 1)`` and the next grid value)."""
    steps, lam, s = spec.input_steps, float(spec.log_span or 0.0), float(spec.log_scale or 0.0)
    x = (v - spec.low) / s
    k = np.clip(np.floor(np.log1p(x) / lam * steps), 0, steps - 1).astype(np.int64)
    below, above = np.expm1(lam * k / steps), np.expm1(lam * (k + 1) / steps)
    frac = np.clip((x - below) / (above - below), 0.0, 1.0)
    out = np.bincount(k, weights=1.0 - frac, minlength=steps + 1)
    out += np.bincount(k + 1, weights=frac, minlength=steps + 1)
    return out


def _sr_law(spec: StochasticRounding, t: np.ndarray) -> np.ndarray:
    g = spec._grid
    kw = rounding_weights((t + 1.0) / 2.0, g.steps)
    k = np.arange(g.steps + 1, dtype=np.float64)
    plus = float(np.sum(kw * (g.w_low * (g.steps - k) + g.w_high * k) / g.total))
    return np.array([kw.sum() - plus, plus])


def _pm_law(spec: PiecewiseMechanism, t: np.ndarray) -> np.ndarray:
    g = spec._grid
    kw = rounding_weights((t + 1.0) / 2.0, g.steps)
    return flat_bump_law(kw, g.cells, g.w_low, g.w_high - g.w_low, g.plateau, g.total)


def expected_law(spec: Mechanism, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(report value of each cell, expected number of reports in it) for these inputs."""
    v = np.asarray(values, dtype=np.float64)
    if isinstance(spec, SquareWave):
        g = spec._grid
        if spec.log_scale is None:
            kw = rounding_weights((v - spec.low) / spec.span, g.steps)
        else:
            kw = _log_rounding_weights(spec, v)
        law = flat_bump_law(kw, g.cells, g.w_low, int(g.bump[0]), g.bump.size, g.total)
        return spec.report_values(), law
    if isinstance(spec, DiscreteSquareWave):
        w_low, w_high = spec._weights
        kw = np.bincount(v.astype(np.int64), minlength=spec.n_outputs).astype(np.float64)
        law = flat_bump_law(
            kw, spec.n_outputs, w_low, w_high - w_low, 2 * spec.half_width + 1, spec._total
        )
        return np.arange(spec.n_outputs, dtype=np.float64), law
    assert isinstance(spec, (StochasticRounding, PiecewiseMechanism, HybridMechanism))
    t = spec._to_unit(v)
    values_of_cells = _report_tables(spec)[0]
    if isinstance(spec, StochasticRounding):
        return values_of_cells, _sr_law(spec, t)
    if isinstance(spec, PiecewiseMechanism):
        return values_of_cells, _pm_law(spec, t)
    a = spec.pm_probability
    sr = _sr_law(spec._sr, t)
    if a == 0.0:
        return values_of_cells, sr
    return values_of_cells, np.concatenate([a * _pm_law(spec._pm, t), (1.0 - a) * sr])


def binned_p_value(spec: Mechanism, reports: np.ndarray, inputs: np.ndarray, edges: Any) -> float:
    """p-value of the reports' value histogram (bins ``edges``) under spec's exact law."""
    cell_values, law = expected_law(spec, inputs)
    expected = np.bincount(np.digitize(cell_values, edges), weights=law, minlength=len(edges) + 1)
    observed = np.bincount(np.digitize(reports, edges), minlength=len(edges) + 1)
    assert np.isclose(expected.sum(), observed.sum(), rtol=1e-9)
    return chi_square_p(observed, expected)


def _edges(spec: Mechanism, bins: int) -> np.ndarray:
    cell_values, _ = expected_law(spec, np.array([_domain(spec)[0]]))
    lo, hi = float(cell_values.min()), float(cell_values.max())
    return np.linspace(lo, hi, bins + 1)[1:-1]


def _domain(spec: Mechanism) -> tuple[float, float]:
    if isinstance(spec, DiscreteSquareWave):
        return 0.0, float(spec.buckets - 1)
    return float(spec.low), float(spec.high)  # type: ignore[attr-defined]


_slow = pytest.mark.slow
LAW_SPECS = [
    pytest.param(SquareWave(epsilon=1.0, buckets=16), marks=_slow),
    pytest.param(SquareWave(epsilon=3.0, low=-5.0, high=20.0, buckets=100), marks=_slow),
    # ToPL's threshold phase: the log scale (its inputs include one near s, where a wrong
    # scale moves the wave most)
    SquareWave(epsilon=1.0, low=-2.0, high=998.0, buckets=64, log_scale=1.0),
    DiscreteSquareWave(
        epsilon=1.0, buckets=16
    ),  # the fast suite keeps one law test per sampler kind
    pytest.param(StochasticRounding(epsilon=1.0, low=0.0, high=10.0), marks=_slow),
    PiecewiseMechanism(epsilon=1.0, report_cells=64),
    pytest.param(
        PiecewiseMechanism(epsilon=2.0, low=0.0, high=120.0, report_cells=1000), marks=_slow
    ),
    pytest.param(HybridMechanism(epsilon=2.0, low=-3.0, high=5.0, report_cells=64), marks=_slow),
    pytest.param(HybridMechanism(epsilon=0.5, report_cells=64), marks=_slow),
]


@pytest.mark.parametrize(
    "spec",
    LAW_SPECS,
    ids=lambda s: f"{s.name}-{s.epsilon:g}" + ("-log" if getattr(s, "log_scale", None) else ""),
)
def test_js_sampler_law_matches_python(spec: Mechanism) -> None:
    low, high = _domain(spec)
    per_input = 25_000
    if isinstance(spec, DiscreteSquareWave):
        points = [0.0, 5.0, high]
    elif isinstance(spec, SquareWave) and spec.log_scale is not None:
        points = [low, high, low + spec.log_scale * 3.141592653589793]  # off-grid, near s
    else:
        points = [low, high, low + (high - low) * 0.3141592653589793]  # the last one off-grid
    inputs = np.repeat(points, per_input)
    js_values = (
        inputs.astype(int).tolist() if isinstance(spec, DiscreteSquareWave) else inputs.tolist()
    )
    reports = js_reports(spec, values=js_values, seed=20261124)
    y = np.asarray(reports.values, dtype=np.float64)
    edges = _edges(spec, 40)

    def p_values_under(law):  # one p-value per input point, its reports against ``law``
        return [
            binned_p_value(
                law,
                y[i * per_input : (i + 1) * per_input],
                inputs[i * per_input : (i + 1) * per_input],
                edges,
            )
            for i in range(len(points))
        ]

    p_values = p_values_under(spec)
    assert min(p_values) > ALPHA / len(points), p_values
    # power: the law of the same spec at epsilon x 1.3 is rejected
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)  # type: ignore[attr-defined]
    p_wrong = p_values_under(wrong)
    assert min(p_wrong) < ALPHA, p_wrong
    if isinstance(spec, SquareWave) and spec.log_scale is not None:
        # power: the law of the same spec with the log scale x 1.3 (or linear) is rejected
        for other in (spec.replace(log_scale=spec.log_scale * 1.3), spec.replace(log_scale=None)):
            p_other = p_values_under(other)
            assert min(p_other) < ALPHA, (other, p_other)


MEAN_SPECS = [
    PiecewiseMechanism(epsilon=1.0, low=0.0, high=120.0),
    HybridMechanism(epsilon=2.0, low=-3.0, high=5.0),
    HybridMechanism(epsilon=0.5, low=0.0, high=1.0),
    StochasticRounding(epsilon=1.0, low=0.0, high=10.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("spec", MEAN_SPECS, ids=lambda s: f"{s.name}-{s.epsilon:g}")
def test_js_means_are_unbiased(spec: Any) -> None:
    n = 20_000
    values = spec.low + (spec.high - spec.low) * np.random.default_rng(3).beta(5.0, 2.0, n)
    reports = js_reports(spec, values=values.tolist(), seed=77)
    est = spec.estimate(spec.aggregate(reports))
    sd = np.sqrt(spec.variance_at(n, values))
    assert abs(est.mean - values.mean()) / sd <= 5.0
    # power: the mirrored truth (Beta(2, 5)) is rejected
    mirrored = spec.low + spec.high - values.mean()
    assert abs(est.mean - mirrored) / sd > 6.0


@pytest.mark.slow
def test_js_square_wave_histogram_matches_the_truth() -> None:
    spec = SquareWave(epsilon=1.0, buckets=32)
    n = 50_000
    values = np.random.default_rng(4).beta(5.0, 2.0, n)
    reports = js_reports(spec, values=values.tolist(), seed=78)
    stats = spec.aggregate(reports)  # the server's code path: output buckets on the grid
    _, law = expected_law(spec, values)
    buckets = ((2 * np.arange(spec.n_cells) + 1) * spec.n_output_buckets) // (2 * spec.n_cells)
    expected = np.bincount(buckets, weights=law, minlength=spec.n_output_buckets)
    assert chi_square_p(stats.counts, expected) > ALPHA
    # the estimate is a distribution close to the truth (EMS at n = 5e4: mean within 0.02)
    dist = spec.estimate(stats)
    assert abs(dist.mean() - values.mean()) < 0.02
    # power: the truth mirrored (Beta(2, 5)) predicts a histogram that is rejected
    _, law_m = expected_law(spec, 1.0 - values)
    expected_m = np.bincount(buckets, weights=law_m, minlength=spec.n_output_buckets)
    assert chi_square_p(stats.counts, expected_m) < ALPHA


@pytest.mark.slow
def test_js_secure_coins_pm_mean_unbiased() -> None:
    # the production path (crypto.getRandomValues): |z| <= 5.5 fails by chance w.p. < 4e-8
    spec = PiecewiseMechanism(epsilon=1.0, low=0.0, high=120.0)
    values = 120.0 * np.random.default_rng(5).beta(5.0, 2.0, 10_000)
    reports = js_reports(spec, values=values.tolist(), seed=None)
    est = spec.estimate(spec.aggregate(reports))
    assert abs(est.mean - values.mean()) / np.sqrt(spec.variance_at(values.size, values)) <= 5.5


def test_numeric_vector_bodies_are_on_the_python_grid() -> None:
    # every report of the shared vectors decodes and aggregates (values exactly on the grid)
    cases = json.loads((CLIENT.parents[1] / "tests" / "vectors" / "numeric.json").read_text())
    for case in cases["bodies"]:
        reports = reports_from_dict(case["body"])
        assert reports.spec.aggregate(reports).n == len(case["values"])


@pytest.fixture
def numeric_collector(tmp_path: Path, serve_app: Any) -> Any:
    """A collector on 127.0.0.1 with numerical collections and an encoder (no auth)."""
    pytest.importorskip("uvicorn")
    from ldpkit import OLH, Encoder
    from ldpkit.service import Collection, create_app

    collections = {
        "sw": SquareWave(epsilon=1.0, low=0.0, high=60.0, buckets=64),
        "pm": PiecewiseMechanism(epsilon=1.0, low=0.0, high=120.0),
        "hm": HybridMechanism(epsilon=2.0, low=-3.0, high=5.0),
        "browser": Collection(
            OLH(epsilon=1.0, domain_size=5),
            encoder=Encoder(["chrome", "firefox", "safari"], unknown="other", missing="item"),
        ),
    }
    app = create_app(collections, f"sqlite:///{tmp_path / 'collector.db'}")
    return serve_app(app)


@pytest.mark.slow
def test_send_numbers_and_labels_to_a_live_collector(numeric_collector: str) -> None:
    import urllib.request

    from ldpkit import OLH

    rng = np.random.default_rng(9)
    sends: dict[str, list[Any]] = {
        "sw": (60.0 * rng.beta(5.0, 2.0, 600)).tolist(),
        "pm": (120.0 * rng.random(600)).tolist(),
        "hm": (-3.0 + 8.0 * rng.random(600)).tolist(),
        "browser": ["chrome", "lynx", None, "safari", "firefox", "chrome"] * 100,
    }
    for name, values in sends.items():
        arg = {"url": numeric_collector, "collection": name, "values": values, "batch": 200}
        assert send(arg) == {"stored": len(values)}
        with urllib.request.urlopen(f"{numeric_collector}/v1/collections/{name}", timeout=30) as r:
            info = json.loads(r.read())
        assert (info["n"], info["batches"]) == (len(values), 3)
    assert info["encoder"] == {
        "categories": ["chrome", "firefox", "safari"],
        "unknown": "other",
        "missing": "item",
    }
    with urllib.request.urlopen(f"{numeric_collector}/v1/collections/browser/estimate") as r:
        est = json.loads(r.read())
    assert est["n"] == 600
    assert est["labels"] == ["chrome", "firefox", "safari", "<other>", "<missing>"]
    # "lynx" went to <other> and None to <missing> (1/6 each): |z| <= 5 for every item
    truth = np.array([2, 1, 1, 1, 1]) / 6
    freq = np.array(est["frequencies"])
    sd = np.sqrt(OLH(epsilon=1.0, domain_size=5).variance(600))
    assert np.max(np.abs(freq - truth)) / sd <= 5.0


def test_js_topl_threshold_phase_reports_aggregate_in_python() -> None:
    # a browser in ToPL's default (log-scale) threshold phase: its reports decode against the
    # spec the collector serves and aggregate; mass sits near log(1 + v/s) of the values, not
    # where the linear wave would put them (v = 20 of B = 16470 is ~ 0.3 on the log scale)
    from ldpkit.stream import ToPL

    spec = ToPL(epsilon=4.0, bound=16470.0, rng=0).client_spec("threshold")
    assert isinstance(spec, SquareWave) and spec.log_scale is not None
    reports = js_reports(spec, values=[20.0] * 2000, seed=81)
    stats = spec.aggregate(reports)
    lam, s = float(spec.log_span or 0.0), float(spec.log_scale)
    u = np.log1p(20.0 / s) / lam  # the value's place on the wave's unit scale
    top = (np.arange(spec.n_output_buckets) + 0.5) / spec.n_output_buckets * (1 + 2 * spec.b)
    near = np.abs(top - spec.b - u) <= spec.b  # output buckets under the wave
    # eps = 4: the wave holds 2b e^eps / (2b e^eps + 1) = 0.77 of the mass, ~0.70 in the 96
    # buckets whose centres lie under it (Python's own randomize: 0.699); sd ~ 0.01 at n = 2000
    frac = stats.counts[near].sum() / stats.n
    assert frac > 0.6, frac
    linear = np.abs(top - spec.b - 20.0 / 16470.0) <= spec.b
    assert stats.counts[linear].sum() / stats.n < 0.3
