"""Baselines: PAK's smooth sensitivity (brute force), threshold laws, perturber structure."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from ldpkit.stream import HC16, NME, PAK, FlatLaplace, ToPS, stream_from_dict
from ldpkit.stream.baselines import pak_threshold, smooth_sensitivity_order_statistic
from ldpkit.stream.threshold import choose_threshold


def _order_stat(data: tuple[int, ...], rank: int) -> int:
    return sorted(data)[rank - 1]


def brute_smooth_sensitivity(x: tuple[int, ...], rank: int, bound: int, beta: float) -> float:
    """max_y exp(-beta d(x, y)) LS(y) over all multisets y of {0..bound} (NRS Def. 2.2)."""
    m = len(x)
    domain = range(bound + 1)

    def local(y: tuple[int, ...]) -> int:
        f = _order_stat(y, rank)
        best = 0
        for i in range(m):
            for v in domain:  # extremes 0 and bound suffice, but check all
                z = (*y[:i], v, *y[i + 1 :])
                best = max(best, abs(_order_stat(z, rank) - f))
        return best

    cx = Counter(x)
    best = 0.0
    for y in itertools.combinations_with_replacement(domain, m):
        d = m - sum((Counter(y) & cx).values())
        best = max(best, math.exp(-beta * d) * local(y))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_smooth_sensitivity_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bound, m = 6, 5
    x = tuple(int(v) for v in rng.integers(0, bound + 1, m))
    for rank in range(1, m + 1):
        for beta in (0.05, 0.4, 1.5):
            expect = brute_smooth_sensitivity(x, rank, bound, beta)
            got = smooth_sensitivity_order_statistic(np.array(x, float), rank, bound, beta)
            assert got == pytest.approx(expect, rel=1e-12), (x, rank, beta)


def test_smooth_sensitivity_needs_the_wide_window() -> None:
    # x = (0, 3, 3, 3, 6), median: moving t + 1 values can open the gap x_{k+t+1} - x_{k-1}
    x = (0, 3, 3, 3, 6)
    expect = brute_smooth_sensitivity(x, 3, 6, 0.2)
    assert smooth_sensitivity_order_statistic(np.array(x, float), 3, 6, 0.2) == pytest.approx(
        expect
    )


@pytest.mark.slow
def test_pak_threshold_law() -> None:
    values = np.arange(1, 2001) % 100.0  # 99.5th percentile = 99 (rank 1991)
    big = [pak_threshold(values, 1e9, 200, delta=1e-6, rng=s) for s in range(5)]
    np.testing.assert_allclose(big, 99.0, atol=1e-6)
    # moderate epsilon: theta - x_(k) is Laplace with scale 2 S* / eps (before clipping)
    values = np.linspace(0.0, 100.0, 20_000)
    k = 19_901  # floor(0.995 m) + 1
    eps, delta = 2.0, 1e-6
    beta = eps / (2 * math.log(2 / delta))
    ss = smooth_sensitivity_order_statistic(values, k, 150, beta)
    assert 0.005 < ss < 1.0
    rng = np.random.default_rng(0)
    draws = np.array([pak_threshold(values, eps, 150, delta=delta, rng=rng) for _ in range(3000)])
    draws -= values[k - 1]
    assert stats.kstest(draws, stats.laplace(scale=2 * ss / eps).cdf).pvalue > 1e-6
    assert stats.kstest(draws, stats.laplace(scale=1.3 * 2 * ss / eps).cdf).pvalue < 1e-6


def test_baseline_structures_and_thresholds() -> None:
    values = np.minimum(np.random.default_rng(0).geometric(0.1, 12_000), 300).astype(float)
    m, n = 2000, 10_000
    pak = PAK(1.0, 300, threshold_size=m, length=n, rng=1).update(values)
    assert (pak.branching, pak.leaf_size, pak.levels, pak.consistency) == (2, 1, 13, False)
    assert pak.threshold == pytest.approx(
        pak_threshold(values[:m], 1.0, 300, delta=1 / n**2, rng=1)
    )
    nme = NME(1.0, 300, threshold_size=m, length=n, rng=2).update(values)
    assert (nme.branching, nme.leaf_size, nme.levels, nme.consistency) == (2, 1, 13, False)
    assert nme.threshold == choose_threshold(
        values[:m], 1.0, 300, length=n, branching=2, levels=13, rng=2
    )
    hc = HC16(1.0, 300, threshold_size=m, length=n, rng=1).update(values)
    tops = ToPS(1.0, 300, threshold_size=m, length=n, rng=1)
    assert hc.threshold == pak.threshold
    assert (hc.branching, hc.leaf_size, hc.levels, hc.consistency) == (
        tops.branching,
        tops.leaf_size,
        tops.levels,
        True,
    )
    flat = FlatLaplace(1.0, 300, threshold_size=m, length=n, rng=3).update(values)
    ref = ToPS(1.0, 300, threshold_size=m, length=n, rng=3).update(values)
    assert flat.threshold == ref.threshold  # same lambda, same draw
    for est in (pak, nme, hc, flat):
        again = stream_from_dict(est.to_dict())
        assert type(again) is type(est) and again.threshold == est.threshold
        np.testing.assert_array_equal(
            again.range_sums([0, 5], [n, 999])[0], est.range_sums([0, 5], [n, 999])[0]
        )
    with pytest.raises(TypeError, match="HC16 does not take"):
        HC16(1.0, 300, excess=3.0)


@pytest.mark.slow
def test_flat_laplace_adds_laplace_theta_over_epsilon_per_value() -> None:
    values = np.random.default_rng(0).integers(0, 20, 30_000).astype(float)
    flat = FlatLaplace(0.5, 20, threshold=8.0, threshold_size=0, rng=0).update(values)
    clipped = np.minimum(values, 8.0)
    noise = np.array([flat.value_at(t) for t in range(0, 30_000, 3)]) - clipped[::3]
    assert stats.kstest(noise, stats.laplace(scale=16.0).cdf).pvalue > 1e-6
    assert stats.kstest(noise, stats.laplace(scale=16.0 * 1.3).cdf).pvalue < 1e-6
    assert flat.range_sum(10, 110).std_error == pytest.approx(math.sqrt(100 * 2 * 16.0**2))
    none = FlatLaplace(0.5, 20, threshold=None, rng=0)
    assert none.threshold == 20.0 and none.threshold_size == 0


_RELEASES = ["ToPS", "PAK", "NME", "HC16", "FlatLaplace", "FixedDomainLDP", "SWOnly", "ToPL"]


@pytest.mark.parametrize("name", _RELEASES)
def test_bound_is_capped_at_construction(name: str) -> None:
    # the bound is squared (variances, the ToPL objective's n^2 B^2) and summed: 1e308 used
    # to be accepted and overflow (or fail with a message naming another parameter) later
    from ldpkit.stream import STREAM_CLASSES

    cls = STREAM_CLASSES[name]
    extra = {"threshold": 5.0} if name == "FlatLaplace" else {}
    for bound in (1e308, 1.01e100, math.inf):
        with pytest.raises(
            ValueError, match=r"bound must be a finite number >= 1e-100 and <= 1e\+100"
        ):
            cls(1.0, bound, **extra)
    release = cls(1.0, 1e100, **extra)  # the cap itself works end to end
    release.extend(np.linspace(0.0, 1e100, 64))
    sums, se = release.range_sums(np.array([0]), np.array([release.n_released]))
    assert np.all(np.isfinite(sums)) and np.all(np.isfinite(se))


def test_threshold_helpers_cap_the_bound() -> None:
    v = np.array([1.0, 2.0, 3.0])
    calls = [
        lambda b: choose_threshold(v, 1.0, b, length=100, branching=4, levels=3, rng=0),
        lambda b: pak_threshold(v, 1.0, b, delta=1e-4, percentile=0.9, rng=0),
        lambda b: smooth_sensitivity_order_statistic(v, 2, b, 0.1),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"bound must be .* <= 1e\+100, got 1e\+308"):
            call(1e308)


def test_flat_laplace_array_threshold_is_refused_by_name() -> None:
    # threshold == "tops" on an array used to leak numpy's "truth value ... is ambiguous"
    with pytest.raises(TypeError, match="threshold must be"):
        FlatLaplace(1.0, 10, threshold=np.array([True, False]))  # type: ignore[arg-type]
