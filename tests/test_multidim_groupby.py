"""GroupMean: the mean of a value per group, ratio estimator with delta-method intervals."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.multidim import GroupMean, GroupMeans


def population(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    c = gen.choice(4, size=n, p=[0.5, 0.3, 0.15, 0.05])
    v = np.clip(10 * c + gen.exponential(8, n), 0, 60)
    truth = np.array([v[c == g].mean() for g in range(4)])
    return np.stack([c, v], axis=1), truth


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_group_means_z(oracle):
    x, truth = population(200_000)
    spec = GroupMean(epsilon=1.0, domain_size=4, low=0.0, high=60.0, oracle=oracle)
    est = spec.run(x, rng=1)
    assert np.abs((est.means - truth) / est.std_error).max() <= 5.0
    shares = np.bincount(x[:, 0].astype(int), minlength=4) / len(x)
    assert np.abs((est.shares - shares) / np.sqrt(est.share_variance)).max() <= 5.0


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_group_means_z_fails_for_a_wrong_epsilon(oracle):
    x, truth = population(200_000)
    spec = GroupMean(epsilon=1.0, domain_size=4, low=0.0, high=60.0, oracle=oracle)
    other = spec.replace(epsilon=2.0)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    est = other.estimate(Stats(other, stats.n, **stats.arrays))
    assert np.abs((est.means - truth) / est.std_error).max() > 6.0


def test_group_means_coverage():
    # 300 repetitions, n = 3000: the delta-method intervals of the three larger groups
    x, truth = population(3000, seed=1)
    spec = GroupMean(epsilon=2.0, domain_size=4, low=0.0, high=60.0, oracle="olh")
    gen = np.random.default_rng(3)
    hits = []
    for _ in range(300):
        lo, hi = spec.run(x, rng=gen).confidence_interval(0.05)
        hits.append(((lo <= truth) & (truth <= hi))[:3])
    assert 0.93 <= float(np.mean(hits)) <= 0.97


def _largest_groups_spread_and_reported() -> tuple[np.ndarray, np.ndarray]:
    # users fixed, 400 runs drawn from one stream apart from the data's seed (a run seeded
    # like the data would round with the uniforms that chose the groups)
    x, _ = population(3000, seed=1)
    spec = GroupMean(epsilon=2.0, domain_size=4, low=0.0, high=60.0, oracle="olh")
    gen = np.random.default_rng(12)
    means, reported = [], []
    for _ in range(400):
        est = spec.run(x, rng=gen)
        means.append(est.means[:2])
        reported.append(est.variance[:2])
    return np.var(means, axis=0, ddof=1), np.mean(reported, axis=0)


def test_largest_groups_mean_spread_matches_reported_variance():
    # the two largest groups (50 %, 30 %): the ratio's standard error is sqrt(2 / 400) =
    # 0.071 (the reported variance bounds the rounding term: a few % above the spread)
    spread, reported = _largest_groups_spread_and_reported()
    ratio = spread / reported
    assert np.all(np.abs(ratio - 1.0) <= 5 * np.sqrt(2 / 400)), ratio


def test_largest_groups_mean_spread_check_fails_for_half_the_variance():
    # the same check catches a variance off by 2 (e.g. one of the pair's items' noise lost)
    spread, reported = _largest_groups_spread_and_reported()
    ratio = spread / (reported / 2.0)
    assert np.all(np.abs(ratio - 1.0) > 5 * np.sqrt(2 / 400)), ratio


def test_frame_and_validation():
    x, _ = population(5000)
    spec = GroupMean(epsilon=2.0, domain_size=4, low=0.0, high=60.0, oracle="grr")
    est = spec.run(x, rng=0)
    assert isinstance(est, GroupMeans)
    frame = est.to_frame()
    assert list(frame.columns) == ["group", "share", "mean", "std_error", "low", "high"]
    assert len(frame) == 4
    with pytest.raises(ValueError, match="values must be an"):
        spec.randomize([[4, 1.0]], rng=0)
    with pytest.raises(ValueError, match="values must be an"):
        spec.randomize([[0, 61.0]], rng=0)
    with pytest.raises(ValueError, match="values must be an"):
        spec.randomize([0.0, 1.0], rng=0)
    with pytest.raises(ValueError, match="high must be"):
        GroupMean(epsilon=1.0, domain_size=4, low=1.0, high=0.0)
    with pytest.raises(ValueError, match="oracle must be"):
        GroupMean(epsilon=1.0, domain_size=4, oracle="oue")
    # a group nobody reported: the middle of the bounds, flagged
    lonely = Stats(spec, 1, counts=[1, 0, 0, 0, 0, 0, 0, 0])
    out = spec.estimate(lonely)
    assert out.estimable.dtype == bool and np.all(np.isfinite(out.means))
