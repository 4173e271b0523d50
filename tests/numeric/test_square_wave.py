"""Square Wave family: constants, sampler laws, exact transition matrices, privacy, flow."""

from __future__ import annotations

import json
import math
import pickle
from decimal import Decimal, getcontext

import numpy as np
import pytest
from scipy import integrate, stats

from ldpkit import Reports, Stats
from ldpkit.numeric import (
    DiscreteSquareWave,
    Distribution,
    GeneralWave,
    SquareWave,
    square_wave_bandwidth,
)
from ldpkit.spec import spec_from_dict
from ldpkit.testing import chisquare_gof

ALPHA = 1e-6


# -- independent reference formulas (written from SW20, not from the implementation) ----------
def b_reference(eps: float) -> float:
    """SW20's b in 60-digit decimal arithmetic (no cancellation issue at all)."""
    getcontext().prec = 60
    e = Decimal(eps).exp()
    x = Decimal(eps)
    return float((x * e - e + 1) / (2 * e * (e - 1 - x)))


def sw_cdf(y, v, eps, b=None):
    """CDF of SW's report on the unit scale for input v (SW20 eq. 3)."""
    b = square_wave_bandwidth(eps) if b is None else b
    e = math.exp(eps)
    q = 1.0 / (2 * b * e + 1)
    p = e * q
    y = np.clip(np.asarray(y, dtype=float), -b, 1 + b)
    return np.where(
        y <= v - b,
        q * (y + b),
        np.where(y <= v + b, q * v + p * (y - v + b), q * v + 2 * b * p + q * (y - v - b)),
    )


def trapezoid_cdf(z, h1, h2):
    """CDF of U1 + U2, U1 ~ U[-h1, h1], U2 ~ U[-h2, h2] (h2 > 0), by convolution."""

    def r2(x):
        return np.maximum(x, 0.0) ** 2 / 2

    return (r2(z + h1 + h2) - r2(z + h1 - h2) - r2(z - h1 + h2) + r2(z - h1 - h2)) / (4 * h1 * h2)


def gw_cdf(y, v, eps, ratio, b=None):
    b = square_wave_bandwidth(eps) if b is None else b
    q = 1.0 / (1 + 2 * b + (math.exp(eps) - 1) * b * (1 + ratio))
    y = np.clip(np.asarray(y, dtype=float), -b, 1 + b)
    if ratio == 1.0:
        return sw_cdf(y, v, eps, b)
    h1, h2 = (1 + ratio) * b / 2, (1 - ratio) * b / 2
    return q * (y + b) + (1 - q * (1 + 2 * b)) * trapezoid_cdf(y - v, h1, h2)


def grid_brute_matrix(spec):
    """M[i, j] of the grid law by plain enumeration: average the exact cell laws of the grid
    inputs inside input bucket i (trapezoid weights: v uniform on the bucket rounds to its
    interior grid points with weight 1/r, to its ends with 1/(2r)), then add up the cells
    whose centres fall in each output bucket."""
    d, dt, steps, n = spec.buckets, spec.n_output_buckets, spec.input_steps, spec.n_cells
    r = steps // d
    centres = (np.arange(n) + 0.5) / n  # position of each cell's centre in [-b, 1 + b]
    bucket = np.minimum((centres * dt).astype(int), dt - 1)
    per_bucket = np.array(
        [np.bincount(bucket, spec.cell_probabilities(k), minlength=dt) for k in range(steps + 1)]
    )
    m = np.zeros((d, dt))
    for i in range(d):
        weights = np.full(r + 1, 1.0 / r)
        weights[[0, -1]] = 0.5 / r
        m[i] = weights @ per_bucket[i * r : (i + 1) * r + 1]
    return m


def brute_matrix(cdf, b, d, dt):
    """M[i, j] by adaptive quadrature of P[y in bucket j | v] over input bucket i."""
    inp = np.linspace(0, 1, d + 1)
    out = np.linspace(-b, 1 + b, dt + 1)
    m = np.empty((d, dt))
    for i in range(d):
        s, t = inp[i], inp[i + 1]
        for j in range(dt):
            a, c = out[j], out[j + 1]
            kinks = [x for x in (a - b, a + b, c - b, c + b, a, c) if s < x < t]
            val, _ = integrate.quad(
                lambda v, a=a, c=c: float(cdf(c, v) - cdf(a, v)),
                s,
                t,
                points=kinks or None,
                epsabs=1e-14,
                epsrel=1e-12,
                limit=200,
            )
            m[i, j] = val / (t - s)
    return m


# -- constants --------------------------------------------------------------------------------
@pytest.mark.parametrize("eps, want", [(0.5, 0.3582), (1.0, 0.2561), (2.0, 0.1293), (4.0, 0.0304)])
def test_b_check_values(eps, want):
    assert round(square_wave_bandwidth(eps), 4) == want
    sw = SquareWave(epsilon=eps)
    assert sw.nominal_b == pytest.approx(b_reference(eps), rel=1e-13)
    # the grid's b' = round(b L) / L
    assert sw.b == round(sw.nominal_b * sw.input_steps) / sw.input_steps


@pytest.mark.parametrize(
    "eps", [1e-6, 1.1e-6, 1e-3, 0.05, 0.0999, 0.1, 0.1001, 0.7, 3.0, 12.0, 29.9, 30.1, 60.0]
)
def test_b_is_stable(eps):
    assert square_wave_bandwidth(eps) == pytest.approx(b_reference(eps), rel=1e-12)


@pytest.mark.parametrize("eps", [1e-170, 1e-9, 9.9e-7])
def test_tiny_epsilon_is_refused_not_looped(eps):
    # square_wave_bandwidth(1e-170) used to loop forever (the series never converged)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        square_wave_bandwidth(eps)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        SquareWave(epsilon=eps)


def test_a_grid_that_cannot_be_exact_is_refused_at_construction():
    # a wide explicit bandwidth at large epsilon overflows the 2^62 integer law below
    # max_epsilon: refused when the spec is built, not at the first randomize
    with pytest.raises(ValueError, match=r"epsilon must be <= 34\.88 for this configuration"):
        SquareWave(epsilon=35.0, bandwidth=0.1, buckets=7)
    assert SquareWave(epsilon=34.0, bandwidth=0.1, buckets=7).privacy_loss() <= 34.0


def test_b_limits_and_monotone():
    eps = np.geomspace(1e-6, 700, 400)
    b = np.array([square_wave_bandwidth(e) for e in eps])
    assert np.all(np.diff(b) < 0) and b[0] == pytest.approx(0.5) and 0 < b[-1] < 1e-300
    with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 1e-06 and <= 700"):
        square_wave_bandwidth(800.0)  # b would underflow to 0


@pytest.mark.parametrize("eps", [1e-6, 0.01, 0.5, 1.0, 4.0, 20.0, 40.0])
def test_p_q_and_privacy(eps):
    sw = SquareWave(epsilon=eps)
    lo, hi = sw.density_low, sw.density_high
    assert lo * (1 + 2 * sw.b) + 2 * sw.b * (hi - lo) == pytest.approx(1.0, rel=1e-12)
    loss = sw.privacy_loss()
    assert loss <= eps and loss == pytest.approx(eps, rel=1e-7)
    assert hi / lo == pytest.approx(math.exp(eps), rel=1e-7)


def test_validation():
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <= 40"):
        SquareWave(epsilon=41.0)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        SquareWave(epsilon=0.0)
    with pytest.raises(ValueError, match="high must be a finite number > low"):
        SquareWave(epsilon=1.0, low=2.0, high=1.0)
    with pytest.raises(ValueError, match=r"buckets must be an integer in \[2, 1048576\]"):
        SquareWave(epsilon=1.0, buckets=0)
    with pytest.raises(TypeError, match="output_buckets must be an integer"):
        SquareWave(epsilon=1.0, output_buckets=2.5)
    with pytest.raises(ValueError, match="bandwidth must be a finite number > 0"):
        SquareWave(epsilon=1.0, bandwidth=0.0)
    with pytest.raises(ValueError, match=r"ratio must be a finite number >= 0 and <= 1"):
        GeneralWave(epsilon=1.0, ratio=1.5)
    sw = SquareWave(epsilon=1.0, low=10.0, high=20.0)
    with pytest.raises(ValueError, match=r"values must be real numbers in \[10, 20\]"):
        sw.randomize([9.0, 15.0], rng=0)
    with pytest.raises(ValueError, match="values must be real numbers"):
        sw.randomize([np.nan], rng=0)
    with pytest.raises(ValueError, match="reports.values must be real numbers in"):
        sw.aggregate(Reports(sw, values=np.array([15.0, 30.0])))
    with pytest.raises(ValueError, match="reports must come from"):
        sw.aggregate(SquareWave(epsilon=2.0, low=10.0, high=20.0).randomize([15.0], rng=0))
    with pytest.raises(ValueError, match="method must be one of"):
        sw.estimate(sw.aggregate(sw.randomize([15.0], rng=0)), method="mle")
    with pytest.raises(ValueError, match="n = 0"):
        sw.estimate(sw.empty_stats())


# -- the sampler ------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("v", [0.0, 0.3, 1.0])
def test_sampler_matches_analytic_cdf(eps, v):
    low, high = -5.0, 10.0
    sw = SquareWave(epsilon=eps, low=low, high=high)
    y = sw.randomize(np.full(100_000, low + v * (high - low)), rng=7).values
    assert y.dtype == np.float64
    assert sw.output_low <= y.min() and y.max() <= sw.output_high
    unit = (y - low) / (high - low)
    p = stats.kstest(unit, lambda x: sw_cdf(x, v, eps)).pvalue
    assert p > ALPHA, f"SW sampler rejected at eps={eps}, v={v}: p={p:.2e}"
    # power: the law of the mechanism at 1.3 eps is rejected
    wrong = stats.kstest(unit, lambda x: sw_cdf(x, v, 1.3 * eps)).pvalue
    assert wrong < ALPHA, f"KS test failed to reject eps x 1.3 (p={wrong:.2e})"


def test_sampler_over_a_population():
    sw = SquareWave(epsilon=1.0)
    v = np.random.default_rng(3).random(200_000)
    y = sw.randomize(v, rng=4).values
    # mixture CDF over the uniform inputs, by quadrature-free averaging over a fine v grid
    grid = (np.arange(2000) + 0.5) / 2000
    ys = np.sort(y)[::50]
    mix = np.array([sw_cdf(ys, g, 1.0) for g in grid]).mean(0)
    emp = (np.arange(ys.size) * 50 + 1) / y.size
    assert np.max(np.abs(mix - emp)) < 0.005


@pytest.mark.parametrize("ratio", [0.0, 0.5])
def test_general_wave_sampler(ratio):
    gw = GeneralWave(epsilon=1.5, ratio=ratio)
    for v in (0.1, 0.8):
        y = gw.randomize(np.full(100_000, v), rng=11).values
        assert stats.kstest(y, lambda x, v=v: gw_cdf(x, v, 1.5, ratio)).pvalue > ALPHA
        assert stats.kstest(y, lambda x, v=v: gw_cdf(x, v, 1.5 * 1.3, ratio)).pvalue < ALPHA
    # the triangle (ratio 0) peaks between two cells' centres: slightly below epsilon
    assert 1.5 - 1e-3 < gw.privacy_loss() <= 1.5


def test_seeding_and_reports():
    sw = SquareWave(epsilon=1.0, buckets=16)
    v = np.linspace(0, 1, 1000)
    a, b = sw.randomize(v, rng=1), sw.randomize(v, rng=1)
    assert a.equals(b) and not a.equals(sw.randomize(v, rng=2))
    assert len(a) == 1000 and a.values.flags.writeable is False


# -- aggregation -----------------------------------------------------------------------------
def test_aggregate_merge_and_round_trips():
    sw = SquareWave(epsilon=1.0, low=0.0, high=100.0, buckets=32, output_buckets=48)
    v = np.random.default_rng(30).random(5000) * 100
    r = sw.randomize(v, rng=31)
    s = sw.aggregate(r)
    assert s.n == 5000 and s.counts.shape == (48,) and s.counts.sum() == 5000
    assert sw.aggregate(r[:2000]).merge(sw.aggregate(r[2000:])) == s
    assert s.merge(sw.empty_stats()) == s
    assert Stats.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert pickle.loads(pickle.dumps(sw)) == sw
    # bucket edges: reports are counted where they fall
    edges = sw.output_edges()
    np.testing.assert_array_equal(s.counts, np.histogram(r.values, edges)[0])


# -- exact transition matrix ------------------------------------------------------------------
@pytest.mark.parametrize(
    "eps, d, dt",
    [
        (0.5, 1024, 1024),
        (1.0, 256, 1024),
        (4.0, 1024, 256),
        (4.0, 3, 64),
        (8.0, 64, 512),
        (40.0, 16, 16),
        (0.001, 10, 3),
    ],
)
def test_rows_sum_to_one(eps, d, dt):
    for spec in (
        SquareWave(epsilon=eps, buckets=d, output_buckets=dt),
        GeneralWave(epsilon=eps, buckets=d, output_buckets=dt, ratio=0.3),
    ):
        m = spec.bucket_matrix()
        assert m.shape == (d, dt) and np.all(m >= 0)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert not hasattr(spec, "transition_matrix")  # continuous inputs: no finite law
        assert not m.flags.writeable


@pytest.mark.parametrize(
    "eps, d, dt",
    [
        (1.0, 5, 7),
        # d~ > d and 2b spans less than one output bucket: the cases where a closed-form
        # fill that assumes the wave covers whole output buckets goes wrong
        pytest.param(0.5, 8, 3, marks=pytest.mark.slow),
        pytest.param(4.0, 3, 16, marks=pytest.mark.slow),
        (4.0, 4, 40),
        pytest.param(2.0, 2, 11, marks=pytest.mark.slow),
    ],
)
@pytest.mark.slow
def test_matrix_matches_brute_force_integration(eps, d, dt):
    sw = SquareWave(epsilon=eps, buckets=d, output_buckets=dt)
    # exact: the grid law's matrix, enumerated cell by cell
    np.testing.assert_allclose(sw.bucket_matrix(), grid_brute_matrix(sw), rtol=1e-9, atol=1e-13)
    # and close to SW20's continuous law (the grid is 2^14 steps fine)
    want = brute_matrix(lambda y, v: sw_cdf(y, v, eps), sw.nominal_b, d, dt)
    np.testing.assert_allclose(sw.bucket_matrix(), want, rtol=0, atol=2e-3)


@pytest.mark.slow
@pytest.mark.parametrize("ratio", [0.0, 0.4])
def test_general_wave_matrix_matches_brute_force(ratio):
    gw = GeneralWave(epsilon=2.0, ratio=ratio, buckets=4, output_buckets=9)
    np.testing.assert_allclose(gw.bucket_matrix(), grid_brute_matrix(gw), rtol=1e-9, atol=1e-13)
    want = brute_matrix(lambda y, v: gw_cdf(y, v, 2.0, ratio), gw.nominal_b, 4, 9)
    np.testing.assert_allclose(gw.bucket_matrix(), want, rtol=0, atol=2e-3)


def test_general_wave_ratio_one_is_square_wave():
    kw = dict(epsilon=1.3, buckets=50, output_buckets=70)
    np.testing.assert_allclose(
        GeneralWave(ratio=1.0, **kw).bucket_matrix(),
        SquareWave(**kw).bucket_matrix(),
        rtol=1e-12,
        atol=0,
    )


@pytest.mark.parametrize("column", [0, 7, 15])
def test_matrix_matches_monte_carlo(column):
    eps, d, dt = 1.0, 16, 24
    sw = SquareWave(epsilon=eps, buckets=d, output_buckets=dt)
    rng = np.random.default_rng(column)
    v = (column + rng.random(300_000)) / d  # uniform inside input bucket `column`
    counts = np.bincount(sw.bucket_index(sw.randomize(v, rng=rng)), minlength=dt)
    p = chisquare_gof(counts, sw.bucket_matrix()[column])
    assert p > ALPHA, f"Monte Carlo histogram rejected the exact column (p={p:.2e})"
    wrong = SquareWave(epsilon=1.3 * eps, buckets=d, output_buckets=dt, bandwidth=sw.b)
    assert chisquare_gof(counts, wrong.bucket_matrix()[column]) < ALPHA


@pytest.mark.slow
def test_bucketized_privacy_loss():
    """The bucketized channel's epsilon: exactly eps once an output bucket can sit inside the
    wave for a whole input bucket (2b >= w_in + w_out), strictly less before."""
    for eps in (1.0, 4.0, 8.0):
        previous = 0.0
        for d in (2, 3, 4, 8, 16, 32, 64, 128, 256, 1024):
            sw = SquareWave(epsilon=eps, buckets=d)
            loss = sw.bucketized_privacy_loss()
            b = sw.b
            w_in, w_out = 1.0 / d, (1.0 + 2.0 * b) / d
            margin = 2.0 / sw.input_steps  # the grid blurs the condition by a cell or two
            if 2 * b > w_in + w_out + margin:
                assert loss == pytest.approx(eps, abs=1e-12)
            elif 2 * b < w_in + w_out - margin:
                assert loss < eps - 1e-6
            assert loss >= previous - 1e-12  # finer buckets never lose privacy loss
            previous = loss
    # the value itself, from an independently integrated matrix
    sw = SquareWave(epsilon=4.0, buckets=4, output_buckets=6)
    m = grid_brute_matrix(sw)
    want = float(np.max(np.log(m.max(axis=0) / m.min(axis=0))))
    assert sw.bucketized_privacy_loss() == pytest.approx(want, rel=1e-9)
    assert want < 4.0


# -- discrete square wave ---------------------------------------------------------------------
@pytest.mark.parametrize("eps, d", [(0.5, 2), (1.0, 16), (2.0, 100), (4.0, 1024), (40.0, 10)])
def test_discrete_constants(eps, d):
    dsw = DiscreteSquareWave(epsilon=eps, buckets=d)
    bt = math.floor(b_reference(eps) * d) if eps < 700 else 0
    assert dsw.half_width == bt and dsw.n_outputs == d + 2 * bt
    e = math.exp(min(eps, 700.0))
    if eps < 700:
        assert dsw.p == pytest.approx(e / ((2 * bt + 1) * e + d - 1), rel=1e-13)
        assert dsw.q == pytest.approx(1 / ((2 * bt + 1) * e + d - 1), rel=1e-13)
    m = dsw.transition_matrix()
    assert m.shape == (d, dsw.n_outputs)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-13)
    assert set(np.unique(m)) == {dsw.p, dsw.q}
    np.testing.assert_array_equal(dsw.bucket_matrix(), m)
    if eps < 700:
        assert dsw.privacy_loss() == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("item", [0, 9, 19])
def test_discrete_sampler_matches_matrix(item):
    dsw = DiscreteSquareWave(epsilon=1.0, buckets=20)
    r = dsw.randomize(np.full(200_000, item), rng=item)
    counts = np.bincount(dsw.output_index(r), minlength=dsw.n_outputs)
    p = chisquare_gof(counts, dsw.transition_matrix()[item])
    assert p > ALPHA, f"discrete SW sampler rejected (p={p:.2e})"
    # power: the same window with the probabilities of 1.3 eps is rejected
    e, w = math.exp(1.3), 2 * dsw.half_width + 1
    wrong = np.where(dsw.transition_matrix()[item] == dsw.p, e, 1.0) / (w * e + 20 - 1)
    assert wrong.sum() == pytest.approx(1.0)
    assert chisquare_gof(counts, wrong) < ALPHA


def test_discrete_flow():
    dsw = DiscreteSquareWave(epsilon=2.0, buckets=32, low=0.0, high=32.0)
    values = np.random.default_rng(10).binomial(31, 0.3, 50_000)
    s = dsw.aggregate(dsw.randomize(values, rng=11))
    assert s.counts.sum() == 50_000 and s.counts.size == dsw.n_outputs
    est = dsw.estimate(s)
    assert isinstance(est, Distribution) and est.buckets == 32 and est.high == 32.0
    truth = Distribution(np.bincount(values, minlength=32) / values.size, 0.0, 32.0)
    from ldpkit import metrics

    # EMS smooths this narrow law (sd 2.5 items) a little: far closer than a uniform guess,
    # and the mean is kept (measured: W1 0.60 vs 7.5, mean error 0.02)
    baseline = metrics.wasserstein(Distribution.uniform(0.0, 32.0, 32), truth)
    assert metrics.wasserstein(est, truth) < 0.15 * baseline
    assert abs(est.mean() - truth.mean()) < 0.25
    with pytest.raises(ValueError, match=r"values must be integers in \[0, 32\)"):
        dsw.randomize([32], rng=0)
    with pytest.raises(ValueError, match="reports.values must be items"):
        dsw.aggregate(Reports(dsw, values=np.array([dsw.n_outputs], dtype=np.int64)))


# -- whole flow -------------------------------------------------------------------------------
def test_estimate_returns_distribution_on_original_units():
    sw = SquareWave(epsilon=2.0, low=100.0, high=200.0, buckets=64)
    values = 100.0 + 100.0 * np.random.default_rng(21).beta(5, 2, 100_000)
    s = sw.aggregate(sw.randomize(values, rng=22))
    for method in ("ems", "em"):
        est = sw.estimate(s, method=method)
        assert (est.low, est.high, est.buckets) == (100.0, 200.0, 64)
        assert abs(est.mean() - values.mean()) < 1.0


def test_log_scale_wave_keeps_epsilon_and_reports_unbiased_values():
    """SquareWave(log_scale=s): the same wave on log(1 + v / s) (eps-LDP as the linear one);
    value_estimates() is exactly unbiased at every grid input and, with the rounding in the
    value's own units, for any value (z test); the same test fails with a wrong scale."""
    s = 2.0
    sw = SquareWave(epsilon=2.0, high=1000.0, buckets=64, log_scale=s)
    assert abs(sw.privacy_loss() - 2.0) < 1e-9
    est, worst = sw.value_estimates()
    grid = sw.grid_values()
    assert grid[0] == 0.0 and grid[-1] == pytest.approx(1000.0, rel=1e-12)
    for k in (0, 1, 777, sw.input_steps // 2, sw.input_steps):
        p = sw.cell_probabilities(k)
        assert p @ est == pytest.approx(grid[k], rel=1e-9, abs=1e-9)
        assert p @ (est - grid[k]) ** 2 <= worst * (1 + 1e-9)
    values = np.full(200_000, 40.0)  # between grid values: the rounding must be unbiased
    cells = sw.report_cells_of(sw.randomize(values, rng=3))
    k = int(np.searchsorted(grid, 40.0))  # 40 is rounded to grid input k - 1 or k
    var = max(sw.cell_probabilities(j) @ (est - grid[j]) ** 2 for j in (k - 1, k))
    se = math.sqrt((var + (grid[k] - grid[k - 1]) ** 2 / 4) / values.size)
    assert abs(est[cells].mean() - 40.0) < 5 * se
    wrong = sw.replace(log_scale=2 * s).value_estimates()[0]  # same cells, wrong scale
    assert abs(wrong[cells].mean() - 40.0) > 6 * se
    # the estimate is the histogram of log(1 + v / s) on [0, log(1 + 1000 / s)]
    dist = sw.estimate(sw.aggregate(sw.randomize(values, rng=4)), method="em")
    assert dist.high == pytest.approx(math.log1p(500.0))
    assert abs(dist.mean() - math.log1p(20.0)) < 0.1


def test_log_scale_wave_linear_histogram_and_identity():
    sw = SquareWave(epsilon=2.0, high=1000.0, buckets=64, log_scale=1.0)
    lam = math.log1p(1000.0)
    f = np.zeros(64)
    f[40] = 1.0  # log bucket 40 holds values in [e^(40 lam / 64) - 1, e^(41 lam / 64) - 1]
    lo, hi = math.expm1(40 * lam / 64), math.expm1(41 * lam / 64)
    lin = sw.linear_histogram(f, 1000)  # unit-wide buckets of [0, 1000]
    assert lin.sum() == pytest.approx(1.0)
    support = np.flatnonzero(lin > 1e-12)
    assert support[0] == math.floor(lo) and support[-1] == math.floor(hi)
    # spread evenly in log(1 + v): the bucket [k, k + 1) gets log((k + 2) / (k + 1)) / (lam / 64)
    k = support[1]
    assert lin[k] == pytest.approx(math.log((k + 2) / (k + 1)) / (lam / 64))
    # on the linear scale the re-binning is the even spread
    flat = SquareWave(epsilon=2.0, high=1000.0, buckets=4)
    assert flat.linear_histogram([0.5, 0.5, 0.0, 0.0], 8).tolist() == [0.25] * 4 + [0.0] * 4
    # wire identity: the linear wave's params are unchanged; the log wave round-trips
    assert "log_scale" not in SquareWave(epsilon=1.0).to_dict()["params"]
    assert spec_from_dict(sw.to_dict()) == sw
    with pytest.raises(ValueError, match="log_scale"):
        SquareWave(epsilon=1.0, log_scale=0.0)
    with pytest.raises(ValueError, match="needs log_scale"):
        flat.value_estimates()
    with pytest.raises(ValueError, match="probabilities must be 64"):
        sw.linear_histogram(np.ones(3), 10)
