"""EM and EMS: likelihood monotonicity, stopping rule, smoothing kernel, recovery, merging."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldpkit import metrics
from ldpkit.numeric import Distribution, SquareWave, em, ems, smooth


def sw_stats(eps=1.0, n=100_000, buckets=256, seed=0):
    sw = SquareWave(epsilon=eps, buckets=buckets)
    values = np.random.default_rng(seed).beta(5, 2, n)
    return sw, values, sw.aggregate(sw.randomize(values, rng=seed + 1000))


# -- smoothing kernel -------------------------------------------------------------------------
def test_smoothing_kernel_exact():
    np.testing.assert_allclose(smooth([0, 0, 1, 0, 0]), [0, 0.25, 0.5, 0.25, 0])
    # ends: (2, 1)/3 and (1, 2)/3, then renormalized
    raw = np.array([2 / 3, 0.25, 0.0])
    np.testing.assert_allclose(smooth([1, 0, 0]), raw / raw.sum())
    x = np.random.default_rng(0).random(17)
    x /= x.sum()
    np.testing.assert_allclose(smooth(x[::-1]), smooth(x)[::-1], atol=1e-16)  # symmetric
    np.testing.assert_allclose(smooth(np.full(9, 1 / 9)), np.full(9, 1 / 9))  # keeps uniform
    np.testing.assert_allclose(smooth([1.0]), [1.0])
    np.testing.assert_allclose(smooth([0.3, 0.7]), np.array([1.3, 1.7]) / 3)


# -- EM --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_em_never_decreases_likelihood(eps):
    _, _, s = sw_stats(eps=eps, n=50_000, buckets=128)
    dist, info = em(s, tol=1e-6, max_iter=3000, return_info=True)
    trace = info.log_likelihood
    assert trace.size == info.iterations + 1
    # non-decreasing up to the rounding of a sum of ~1e5-size terms
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1]))
    assert trace[-1] > trace[0]
    assert isinstance(dist, Distribution) and dist.buckets == 128


def test_em_never_decreases_likelihood_random_problems():
    rng = np.random.default_rng(5)
    for _ in range(20):
        dt, d = rng.integers(2, 30, size=2)
        m = rng.random((d, dt)) ** 3
        m /= m.sum(axis=1, keepdims=True)
        counts = rng.integers(0, 50, size=dt)
        counts[0] += 1
        _, info = em(counts, m, tol=0.0, max_iter=200, return_info=True)
        trace = info.log_likelihood
        assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[:-1]) - 1e-12)


def test_em_recovers_exact_mle():
    """When the observed frequencies are exactly M theta* (theta* > 0), theta* is the MLE."""
    m = np.array([[0.6, 0.2, 0.1], [0.3, 0.5, 0.2], [0.1, 0.3, 0.7]]).T  # rows sum to 1
    theta = np.array([0.2, 0.5, 0.3])
    counts = theta @ m * 1e6
    dist, info = em(counts, m, tol=1e-9, return_info=True)
    assert info.converged
    np.testing.assert_allclose(dist.probabilities, theta, atol=1e-4)


def test_stopping_rule_and_cap():
    _, _, s = sw_stats(n=20_000, buckets=64)
    for fit in (em, ems):
        _, info = fit(s, tol=1e-3, return_info=True)
        trace = info.log_likelihood
        assert info.converged and info.iterations == trace.size - 1
        assert abs(trace[-1] - trace[-2]) < 1e-3
        assert np.all(np.abs(np.diff(trace[:-1])) >= 1e-3)  # it stopped at the first chance
        _, capped = fit(s, tol=0.0, max_iter=7, return_info=True)
        assert capped.iterations == 7 and not capped.converged
    _, zero = em(s, max_iter=0, return_info=True)
    np.testing.assert_allclose(zero.theta, 1 / 64)  # the uniform start


def test_merged_stats_estimate_the_same():
    sw, values, _ = sw_stats(n=30_000, buckets=64)
    r = sw.randomize(values, rng=9)
    whole = sw.aggregate(r)
    parts = [sw.aggregate(r[i : i + 7000]) for i in range(0, 30_000, 7000)]
    merged = parts[0].merge(*parts[1:])
    assert ems(merged) == ems(whole)


def test_counts_and_matrix_interface():
    sw, _, s = sw_stats(n=20_000, buckets=32)
    a = ems(s)
    b = ems(np.asarray(s.counts), sw.bucket_matrix(), low=0.0, high=1.0)
    assert a == b
    c = ems(np.asarray(s.counts), sw.bucket_matrix(), low=5.0, high=6.0)
    assert (c.low, c.high) == (5.0, 6.0)
    np.testing.assert_array_equal(c.probabilities, a.probabilities)


def test_validation():
    m = np.array([[0.7, 0.3], [0.2, 0.8]])  # inputs x outputs
    with pytest.raises(TypeError, match="matrix must be given"):
        em([1, 2])
    with pytest.raises(ValueError, match="data must hold one count per output of matrix"):
        em([1, 2, 3], m)
    with pytest.raises(ValueError, match="rows .* must each sum to 1"):
        em([1, 2], m * 0.9)
    with pytest.raises(ValueError, match=r"data must be finite real numbers in \[0, 1e\+100\]"):
        em([1, -2], m)
    with pytest.raises(ValueError, match="at least one report"):
        em([0, 0], m)
    with pytest.raises(ValueError, match="counts must be 0 on outputs"):
        em([1, 1], np.array([[1.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="init must be 2 non-negative"):
        em([1, 1], m, init=[0.5, 0.2, 0.3])
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        em([1, 1], m, tol=-1.0)
    with pytest.raises(TypeError, match="max_iter must be an integer"):
        em([1, 1], m, max_iter=1.5)


def test_zero_probability_outputs_are_handled():
    # an output nobody can produce, never observed: must not break logs or divisions
    m = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.5]])
    m = np.vstack([m, np.zeros((1, 2))]).T  # inputs x outputs
    dist = ems([10, 20, 10, 0], m)
    np.testing.assert_allclose(dist.probabilities, [0.5, 0.5], atol=1e-6)


# -- recovery (SW20 section 6.2) --------------------------------------------------------------
def test_ems_recovers_beta_5_2():
    """SW + EMS on Beta(5, 2), eps = 1, n = 1e5, 256 buckets (SW20's synthetic setting).

    Measured over 30 seeds: W1 to the exact Beta law 0.0050 +- 0.0011 (max 0.0074; a
    uniform guess is at 0.216), KS 0.0158 +- 0.0029 (max 0.023; uniform 0.39), mean error
    0.0019 +- 0.0012 (max 0.0045). Bounds are about mean + 6.5 sd.
    """
    truth = Distribution.from_cdf(stats.beta(5, 2).cdf, 0, 1, 256)
    _, _, s = sw_stats(eps=1.0, n=100_000, buckets=256, seed=4)
    dist, info = ems(s, return_info=True)
    assert info.converged
    w1 = metrics.wasserstein(dist, truth)
    assert w1 < 0.012, f"EMS W1 {w1:.4f}"
    assert metrics.wasserstein(Distribution.uniform(0, 1, 256), truth) > 0.2
    assert metrics.ks_distance(dist, truth) < 0.035
    assert metrics.mean_error(dist, truth) < 0.01


# -- the compiled band loop against the dense numpy reference ---------------------------------
def _both(data, matrix=None, smoothing=True, **kw):
    from ldpkit.numeric.em import _run

    args = dict(
        smoothing=smoothing,
        tol=kw.get("tol", 1e-3),
        max_iter=kw.get("max_iter", 10_000),
        init=None,
        low=None,
        high=None,
        return_info=True,
    )
    return _run(data, matrix, engine="band", **args), _run(data, matrix, engine="numpy", **args)


@pytest.mark.parametrize("eps", [0.5, 4.0])
@pytest.mark.parametrize("smoothing", [True, False])
def test_band_engine_matches_numpy_reference(eps, smoothing):
    _, _, s = sw_stats(eps=eps, n=50_000, buckets=128)
    (a, ia), (b, ib) = _both(s, smoothing=smoothing)
    assert ia.iterations == ib.iterations and ia.converged == ib.converged
    np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(ia.log_likelihood, ib.log_likelihood, rtol=1e-12)


def test_band_engine_on_dense_random_matrices():
    rng = np.random.default_rng(12)
    for _ in range(10):
        dt, d = rng.integers(2, 40, size=2)
        m = rng.random((dt, d)) * (rng.random((dt, d)) < 0.6)  # zeros inside rows too
        m[0] += 1e-3
        m /= m.sum(axis=0)
        counts = rng.integers(0, 100, size=dt) * (m.sum(axis=1) > 0)
        counts[0] += 1
        (a, ia), (b, ib) = _both(counts, m.T, tol=0.0, max_iter=50)  # inputs x outputs
        np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(ia.log_likelihood, ib.log_likelihood, rtol=1e-12)


def test_unknown_engine():
    from ldpkit.numeric.em import _run

    with pytest.raises(ValueError, match="engine must be one of"):
        _run(
            [1, 1],
            np.eye(2),
            smoothing=False,
            tol=1e-3,
            max_iter=5,
            init=None,
            low=None,
            high=None,
            return_info=False,
            engine="gpu",
        )


# -- box products (Square Wave rows: edges around one plateau) against the plain band loop -----
def _engines(data, smoothing, tol=1e-3, max_iter=5000):
    from ldpkit.numeric.em import _run

    args = dict(
        smoothing=smoothing, tol=tol, max_iter=max_iter, init=None, low=None, high=None,
        return_info=True,
    )  # fmt: skip
    return _run(data, None, engine="band", **args), _run(data, None, engine="band-only", **args)


@pytest.mark.parametrize(("eps", "buckets"), [(0.5, 256), (1.0, 100), (2.0, 512), (4.0, 1024)])
@pytest.mark.parametrize("smoothing", [True, False])
def test_box_loop_is_the_band_loop(eps, buckets, smoothing):
    """Prefix-sum products give the band loop's iterates: same count, estimate and trace."""
    from ldpkit.numeric.em import _Banded, _box_rows

    sw, _, s = sw_stats(eps=eps, n=20_000, buckets=buckets, seed=3)
    m = np.asarray(sw.bucket_matrix()).T[np.asarray(s.counts) > 0]
    box = _box_rows(_Banded(np.ascontiguousarray(m)))
    assert box is not None  # the box path is the one under test
    (a, ia), (b, ib) = _engines(s, smoothing)
    assert ia.iterations == ib.iterations and ia.converged == ib.converged
    np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(ia.log_likelihood, ib.log_likelihood, rtol=1e-12)


def test_box_loop_on_other_waves():
    """Trapezoid rows (GeneralWave) are not boxes and keep the band loop; DiscreteSquareWave
    rows are pure plateaus (no edges) and take the box loop. Both match the dense reference."""
    from ldpkit.numeric import DiscreteSquareWave, GeneralWave
    from ldpkit.numeric.em import _Banded, _box_rows

    for spec, is_box in (
        (GeneralWave(epsilon=1.0, ratio=0.3, buckets=128), False),
        (DiscreteSquareWave(epsilon=1.0, buckets=128), True),
    ):
        m = np.asarray(spec.bucket_matrix(), dtype=np.float64)
        assert (_box_rows(_Banded(np.ascontiguousarray(m.T))) is not None) == is_box
        values = np.random.default_rng(4).beta(5, 2, 20_000)
        if isinstance(spec, DiscreteSquareWave):
            values = np.minimum((values * 128).astype(np.int64), 127)
        s = spec.aggregate(spec.randomize(values, rng=4))
        for smoothing in (True, False):
            (a, ia), (b, ib) = _both(s, smoothing=smoothing)
            assert ia.iterations == ib.iterations
            np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-9, atol=1e-15)


def test_prefix_scan_of_the_box_kernels():
    """_scan (four interleaved running sums) is the cumulative sum, for every length."""
    from ldpkit.numeric._kernels_em import _scan

    x = np.random.default_rng(9).random(1030)
    for n in (0, 1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1030):
        out = np.full(n + 1, np.nan)
        _scan(x[:n], out)
        np.testing.assert_allclose(out, np.concatenate([[0.0], np.cumsum(x[:n])]), rtol=1e-13)
