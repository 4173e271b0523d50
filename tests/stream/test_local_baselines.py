"""ToPL's baselines: SW-only (per-user unbiased SW estimates, or the EMS mean) and PM/SR on [0, B]."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import integrate

from _streamhelpers import geometric_stream as _stream
from ldpkit.numeric import PiecewiseMechanism, SquareWave, StochasticRounding, piecewise_variance
from ldpkit.stream import (
    FixedDomainLDP,
    SWOnly,
    client_randomize,
    square_wave_mean_constants,
    stream_from_dict,
)
from ldpkit.stream.local_baselines import square_wave_mean_variance


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_square_wave_mean_constants_by_integration(epsilon: float) -> None:
    spec = SquareWave(epsilon=epsilon)
    b, p, q = spec.b, spec.density_high, spec.density_low
    a, c, worst = square_wave_mean_constants(spec)
    for v in (0.0, 0.3, 0.5, 1.0):

        def moment(k: int, v: float = v) -> float:
            pts = [v - b, v + b]
            low = integrate.quad(lambda u: u**k * q, -b, 1 + b, limit=200)[0]
            wave = integrate.quad(lambda u: u**k * (p - q), *pts, limit=200)[0]
            return low + wave

        assert moment(0) == pytest.approx(1.0, abs=1e-12)
        assert moment(1) == pytest.approx(a + c * v, abs=1e-12)
        var = (moment(2) - moment(1) ** 2) / c**2
        assert float(square_wave_mean_variance(spec, v)) == pytest.approx(var, rel=1e-10)
        assert var <= worst * (1 + 1e-12)
    assert float(square_wave_mean_variance(spec, 0.0)) == pytest.approx(worst, rel=1e-12)


def test_square_wave_unbiased_estimate_by_sampling() -> None:
    spec, n, v = SquareWave(epsilon=1.0, low=0.0, high=10.0), 400_000, 3.0
    a, c, _ = square_wave_mean_constants(spec)
    y = spec.randomize(np.full(n, v), rng=0).values
    x = (y - a * 10.0) / c
    var = 100.0 * float(square_wave_mean_variance(spec, 0.3))
    assert abs((x.mean() - v) / math.sqrt(var / n)) <= 6
    m4 = np.mean((x - v) ** 4)
    z_var = (x.var() - var) / math.sqrt((m4 - var**2) / n)
    assert abs(z_var) <= 6
    assert abs((x.var() - 1.3 * var) / math.sqrt((m4 - var**2) / n)) > 6


def _disjoint(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    inner = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), k - 1, replace=False))
    starts = np.concatenate([[0], inner])
    return starts, np.append(inner, n)


@pytest.mark.parametrize("mechanism", ["pm", "sr", "hm"])
def test_fixed_domain_range_sums_are_unbiased_for_the_raw_values(mechanism: str) -> None:
    n, bound = 200_000, 100.0
    values = _stream(n, seed=1)
    release = FixedDomainLDP(1.0, bound, mechanism=mechanism, rng=2).update(values)
    assert release.threshold == bound and release.n_released == n
    starts, stops = _disjoint(n, 500)
    est, se = release.range_sums(starts, stops)
    prefix = np.concatenate([[0.0], np.cumsum(values)])
    truth = prefix[stops] - prefix[starts]
    assert np.max(np.abs((est - truth) / se)) <= 6
    spec = release.client_spec()
    t = 2 * values / bound - 1
    exact = (bound / 2) ** 2 * spec.unit_variance(t)
    assert np.all(se**2 >= np.add.reduceat(exact, starts) * (1 - 1e-12))  # worst case: conservative
    if mechanism == "pm":
        assert release.per_user_variance == pytest.approx(50.0**2 * piecewise_variance(1.0))
        assert spec == PiecewiseMechanism(epsilon=1.0, low=0.0, high=bound)
    if mechanism == "sr":
        assert spec == StochasticRounding(epsilon=1.0, low=0.0, high=bound)


def test_sw_only_unbiased_range_sums() -> None:
    n, bound = 200_000, 100.0
    values = _stream(n, seed=3)
    release = SWOnly(2.0, bound, buckets=128, rng=4).update(values)
    starts, stops = _disjoint(n, 500, seed=5)
    est, se = release.range_sums(starts, stops)
    prefix = np.concatenate([[0.0], np.cumsum(values)])
    err = est - (prefix[stops] - prefix[starts])
    assert np.max(np.abs(err / se)) <= 6
    exact = bound**2 * square_wave_mean_variance(release.client_spec(), values / bound)
    range_var = np.add.reduceat(exact, starts)
    assert np.all(se**2 >= range_var)
    z_all = err.sum() / math.sqrt(range_var.sum())
    assert abs(z_all) <= 6
    assert (
        abs((err.sum() + 0.25 * values.sum()) / math.sqrt(range_var.sum())) > 6
    )  # a 25% bias is seen


def test_sw_only_distribution_answers_use_the_ems_mean() -> None:
    values = _stream(20_000, seed=6)
    release = SWOnly(2.0, 100.0, buckets=128, estimator="distribution", rng=7).update(
        values[:10_000]
    )
    mean = release.distribution().mean()
    stats = release.report_counts
    assert stats.n == 10_000
    assert mean == SquareWave(epsilon=2.0, low=0.0, high=100.0, buckets=128).estimate(stats).mean()
    est, se = release.range_sums(np.array([0, 10]), np.array([100, 5010]))
    np.testing.assert_allclose(est, [100 * mean, 5000 * mean], rtol=1e-12)
    assert np.all(np.isnan(se))
    release.update(values[10_000:])  # the cached estimate is refreshed
    assert release.distribution() == SquareWave(
        epsilon=2.0, low=0.0, high=100.0, buckets=128
    ).estimate(release.report_counts)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SWOnly(1.0, 100.0, buckets=64, block_size=16, rng=1),
        lambda: FixedDomainLDP(1.0, 100.0, mechanism="sr", rng=1),
    ],
)
def test_baselines_resume_with_identical_answers(make) -> None:
    values = _stream(9000, seed=8)
    live = make().update(values[:4321])
    resumed = stream_from_dict(live.to_dict())
    unpickled = pickle.loads(pickle.dumps(live))
    for release in (live, resumed, unpickled):
        release.extend(np.array_split(values[4321:], 3))
    q = (np.arange(0, 9000, 301), np.arange(0, 9000, 301) + 77)
    ref = live.range_sums(*q)
    for other in (resumed, unpickled):
        got = other.range_sums(*q)
        np.testing.assert_array_equal(ref[0], got[0])
        np.testing.assert_array_equal(ref[1], got[1])


def test_baselines_have_no_threshold_phase_and_validate() -> None:
    release = FixedDomainLDP(1.0, 100.0, mechanism="pm")
    assert release.phase == "perturb" and release.threshold_size == 0
    with pytest.raises(ValueError, match="phase must be 'perturb'"):
        release.client_spec("threshold")
    other = PiecewiseMechanism(epsilon=1.0, low=0.0, high=50.0)
    with pytest.raises(ValueError, match="reports must come from"):
        release.ingest(client_randomize(other, [1.0], rng=0))
    with pytest.raises(ValueError, match="mechanism must be one of"):
        FixedDomainLDP(1.0, 100.0, mechanism="laplace")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="estimator must be one of"):
        SWOnly(1.0, 100.0, estimator="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="buckets must be"):
        SWOnly(1.0, 100.0, buckets=0)
    with pytest.raises(ValueError, match="no reports"):
        SWOnly(1.0, 100.0, buckets=8, estimator="distribution").distribution()
