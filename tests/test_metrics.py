"""Metrics: exact closed forms, agreement with brute-force integration, metric axioms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpkit import metrics
from ldpkit.numeric import Distribution, MeanEstimate, StochasticRounding, estimate_variance


@st.composite
def on_unit(draw, max_buckets=30):
    b = draw(st.integers(1, max_buckets))
    w = np.asarray(
        draw(
            st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1.0)), min_size=b, max_size=b).filter(
                lambda x: sum(x) > 0
            )
        )
    )
    return Distribution(w / w.sum(), 0.0, 1.0)


def brute_w1_ks(a: Distribution, b: Distribution, n: int = 400_001) -> tuple[float, float]:
    lo, hi = min(a.low, b.low), max(a.high, b.high)
    x = np.linspace(lo, hi, n)
    gap = np.abs(np.asarray(a.cdf(x)) - np.asarray(b.cdf(x)))
    return float(np.trapezoid(gap, x)), float(gap.max())


def test_wasserstein_closed_forms():
    left, right = Distribution([1.0, 0.0]), Distribution([0.0, 1.0])
    assert metrics.wasserstein(left, right) == pytest.approx(0.5, abs=1e-15)
    assert metrics.ks_distance(left, right) == 1.0
    # the same density on two grids is distance 0
    assert metrics.wasserstein(Distribution.uniform(0, 1, 4), Distribution.uniform(0, 1, 7)) < 1e-15
    # a shift by 0.5 of a uniform law costs 0.5, even on different intervals
    a, b = Distribution.uniform(0, 1, 3), Distribution.uniform(0.5, 1.5, 5)
    assert metrics.wasserstein(a, b) == pytest.approx(0.5, abs=1e-12)
    assert metrics.ks_distance(a, b) == pytest.approx(0.5, abs=1e-12)
    # SW20 section 3.1's example: moving mass farther costs more
    x = Distribution([0.7, 0.1, 0.1, 0.1])
    x1, x2 = Distribution([0.1, 0.7, 0.1, 0.1]), Distribution([0.1, 0.1, 0.1, 0.7])
    assert metrics.wasserstein(x, x1) == pytest.approx(0.6 * 0.25)
    assert metrics.wasserstein(x, x2) == pytest.approx(0.6 * 0.75)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(on_unit(), on_unit())
def test_exact_against_brute_force(a, b):
    w1, ks = brute_w1_ks(a, b)
    assert metrics.wasserstein(a, b) == pytest.approx(w1, abs=1e-6)
    assert metrics.ks_distance(a, b) == pytest.approx(ks, abs=1e-5)
    assert metrics.ks_distance(a, b) >= ks - 1e-12  # exact max is never below a grid max


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(on_unit(), on_unit(), on_unit())
def test_metric_axioms(a, b, c):
    for dist in (metrics.wasserstein, metrics.ks_distance):
        assert dist(a, a) == 0.0
        ab, ba = dist(a, b), dist(b, a)
        assert ab >= 0 and ab == pytest.approx(ba, abs=1e-15)
        assert dist(a, c) <= ab + dist(b, c) + 1e-12
    assert metrics.ks_distance(a, b) <= 1.0
    assert metrics.wasserstein(a, b) <= metrics.ks_distance(a, b) + 1e-12  # interval length 1


def test_raw_values_and_resolution():
    values = np.random.default_rng(0).beta(2, 5, 50_000)
    fine = Distribution.from_values(values, 0, 1, 4096)
    assert metrics.wasserstein(fine, values) == 0.0  # raw values -> the same 4096-bucket histogram
    coarse = Distribution.from_values(values, 0, 1, 16)
    assert metrics.wasserstein(coarse, values, resolution=16) == 0.0  # SW20's convention
    # against the fine truth, coarse binning shows its bias (at most half a coarse bucket)
    w = metrics.wasserstein(coarse, values)
    assert 0.0 < w < 0.5 / 16
    # raw values must fit the Distribution's interval
    with pytest.raises(ValueError, match="must be raw values in"):
        metrics.wasserstein(Distribution.uniform(0, 0.5, 4), values)
    with pytest.raises(TypeError, match="must be an ldpkit.numeric.Distribution"):
        metrics.ks_distance(values, values)


def test_range_query_error():
    est = Distribution([1.0, 0.0])  # uniform on [0, 0.5]
    truth = Distribution.uniform(0.0, 1.0, 10)
    alpha = 0.1
    starts = np.random.default_rng(5).random(500) * (1.0 - alpha)
    want = np.mean(np.abs(np.asarray(est.range(starts, starts + alpha)) - alpha))
    got = metrics.range_query_error(est, truth, alpha, n_queries=500, rng=5)
    assert got == pytest.approx(want, abs=1e-15)
    assert metrics.range_query_error(truth, truth, 0.4, rng=0) == 0.0
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        metrics.range_query_error(est, truth, 0.0, rng=0)
    with pytest.raises(ValueError, match=r"n_queries must be an integer in \[1, "):
        metrics.range_query_error(est, truth, 0.1, n_queries=0, rng=0)


def test_quantile_error():
    u = Distribution.uniform(0.0, 1.0, 8)
    half = Distribution([0.5, 0.5, 0.0, 0.0])  # uniform on [0, 0.5]
    # Q_u(q) = q and Q_half(q) = q / 2, so the error averages q / 2 over 0.1 .. 0.9
    assert metrics.quantile_error(half, u) == pytest.approx(0.25)
    assert metrics.quantile_error(half, u, qs=[0.5]) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="qs must be"):
        metrics.quantile_error(half, u, qs=[])


def test_mean_and_variance_error():
    values = np.array([0.0, 1.0, 1.0, 2.0])
    d = Distribution([0.25, 0.5, 0.25], -0.5, 2.5)  # mean 1, variance 0.5 + 1/12
    assert metrics.mean_error(d, values) == pytest.approx(0.0, abs=1e-15)
    assert metrics.variance_error(d, values) == pytest.approx(1.0 / 12.0)
    assert metrics.mean_error(1.25, values) == pytest.approx(0.25)
    assert metrics.variance_error(0.5, values) == 0.0  # population variance (ddof = 0)
    est = MeanEstimate(mean=1.5, variance=0.1, variance_empirical=0.1, n=4)
    assert metrics.mean_error(est, values) == pytest.approx(0.5)
    with pytest.raises(TypeError, match="MeanEstimate"):
        metrics.variance_error(est, values)
    ve = estimate_variance(
        StochasticRounding(epsilon=2.0, low=0.0, high=2.0), np.tile(values, 50), rng=0
    )
    assert metrics.variance_error(ve, values) == pytest.approx(abs(ve.variance - 0.5))
    with pytest.raises(TypeError, match="truth must be"):
        metrics.mean_error(1.0, "abc")
    with pytest.raises(ValueError, match="finite"):
        metrics.mean_error(1.0, np.array([np.nan, 1.0]))
