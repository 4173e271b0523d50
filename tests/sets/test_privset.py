"""PrivSet (Wang et al., INFOCOM 2018): exact law and privacy, unbiasedness, variance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldpkit.privacy import privacy_loss
from ldpkit.sets import PrivSet, UserSets
from ldpkit.spec import Reports
from ldpkit.testing import check_mechanism, chisquare_gof


def _subsets(spec: PrivSet) -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(spec.items), spec.k))


def _law(spec: PrivSet, items: list[int]) -> np.ndarray:
    """Exact P[report = z | set] over all k-subsets z (a long set: the mixture over its
    ell-subsets, each padded set equally likely)."""
    a, meet, miss, _ = spec._law()
    branch = a / 2**62
    d, ell = spec.domain_size, spec.padding
    if len(items) <= ell:
        padded_sets = [set(items) | set(range(d + len(items), d + ell))]
    else:
        padded_sets = [set(c) for c in itertools.combinations(items, ell)]
    out = np.zeros(len(_subsets(spec)))
    for x in padded_sets:
        out += [branch / meet if x & set(z) else (1 - branch) / miss for z in _subsets(spec)]
    return out / len(padded_sets)


def _observed(spec: PrivSet, items: list[int], n: int, seed: int) -> np.ndarray:
    reports = spec.randomize([items] * n, rng=seed)
    bits = np.unpackbits(reports.bits, axis=1)[:, : spec.items]
    index = {z: i for i, z in enumerate(_subsets(spec))}
    rows = [tuple(np.flatnonzero(r).tolist()) for r in bits]
    return np.bincount([index[z] for z in rows], minlength=len(index))


@pytest.mark.parametrize(
    ("spec", "items"),
    [
        (PrivSet(epsilon=1.0, domain_size=4, padding=2, subset_size=2), [0, 3]),
        (PrivSet(epsilon=1.0, domain_size=4, padding=2, subset_size=2), [1]),
        (PrivSet(epsilon=2.0, domain_size=5, padding=2, subset_size=3), [0, 2, 4]),  # long
        (PrivSet(epsilon=1.5, domain_size=5, padding=1, subset_size=1), []),
        # Floyd's sampler (k^2 <= D) with k - 1 >= 2 others and a sampled-down set
        (PrivSet(epsilon=1.0, domain_size=9, padding=2, subset_size=3), [1, 4, 7]),
        # k^2 > 8 D: the permutation sampler
        (PrivSet(epsilon=1.0, domain_size=9, padding=1, subset_size=9), [3]),
        (PrivSet(epsilon=2.0, domain_size=9, padding=1, subset_size=9), []),
    ],
)
def test_sampler_matches_the_law_and_fails_for_a_wrong_epsilon(
    spec: PrivSet, items: list[int]
) -> None:
    observed = _observed(spec, items, 40_000, seed=3)
    assert chisquare_gof(observed, _law(spec, items)) > 1e-6
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert chisquare_gof(observed, _law(wrong, items)) < 1e-6


def test_privacy_loss_is_the_exact_loss_of_the_law() -> None:
    spec = PrivSet(epsilon=1.2, domain_size=4, padding=2, subset_size=2)
    inputs = [[0, 1], [2], [], [3, 0], [1, 2]]
    matrix = np.array([_law(spec, x) for x in inputs])
    assert privacy_loss(matrix) == pytest.approx(spec.privacy_loss(), rel=1e-9)
    assert spec.privacy_loss() <= spec.epsilon
    assert spec.privacy_loss() == pytest.approx(spec.epsilon, rel=1e-12)  # 2^62 coin
    # p and q are the law's marginals
    zs = _subsets(spec)
    row = _law(spec, [0, 1])
    assert spec.p == pytest.approx(sum(r for r, z in zip(row, zs) if 0 in z), rel=1e-12)
    assert spec.q == pytest.approx(sum(r for r, z in zip(row, zs) if 2 in z), rel=1e-12)


def _users(n: int, d: int, ell: int, seed: int) -> UserSets:
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, d + 1)
    weights /= weights.sum()
    sets = [
        gen.choice(d, size=int(s), replace=False, p=weights).tolist()
        for s in gen.integers(0, ell + 3, n)
    ]
    return UserSets.from_lists(sets)


def _max_z(spec: PrivSet, stats_spec: PrivSet, sets: UserSets, seed: int) -> float:
    """Largest |z| of the padded frequencies and the length CDF (reports made by
    ``stats_spec``, decoded by ``spec``)."""
    reports = stats_spec.randomize(sets, rng=seed)
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    d, ell, n = spec.domain_size, spec.padding, len(sets)
    lengths = sets.lengths
    w = np.repeat(np.minimum(1.0, ell / np.maximum(lengths, 1)), lengths)
    truth = np.bincount(sets.items, weights=w, minlength=d) / n
    cdf = np.array([np.mean(lengths <= j) for j in range(ell)])
    full = np.concatenate([truth, cdf])
    got = np.concatenate([est.frequencies, est.length_cdf])
    return float(np.max(np.abs(got - full) / np.sqrt(spec.variance(n, full))))


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_estimates_are_unbiased_and_fail_for_a_wrong_epsilon(epsilon: float) -> None:
    spec = PrivSet(epsilon=epsilon, domain_size=20, padding=3)
    sets = _users(60_000, spec.domain_size, spec.padding, seed=5)
    assert _max_z(spec, spec, sets, seed=6) <= 5.0
    wrong = spec.replace(epsilon=epsilon * 1.3, subset_size=spec.k)  # the same reports' k
    assert _max_z(wrong, spec, sets, seed=6) > 6.0


def test_variance_formula_matches_the_spread() -> None:
    spec = PrivSet(epsilon=2.0, domain_size=8, padding=2)
    sets = UserSets.from_lists([[0, 1]] * 1000 + [[]] * 1000)
    runs = np.array(
        [spec.estimate(spec.aggregate(spec.randomize(sets, rng=s))).frequencies for s in range(300)]
    )
    truth = np.array([0.5, 0.5] + [0.0] * 6)
    ratio = runs.var(axis=0, ddof=1) / spec.variance(2000, truth)
    # 300 runs: the sample variance is within ~ +-25% of the true one at 3 sigma
    assert np.all((ratio > 0.7) & (ratio < 1.3)), ratio


def test_default_k_minimizes_the_variance() -> None:
    spec = PrivSet(epsilon=1.0, domain_size=30, padding=3)
    best = min(spec.replace(subset_size=k).variance(1000) for k in range(1, spec.domain_size + 1))
    assert spec.variance(1000) == pytest.approx(best, rel=1e-3)


def test_contract() -> None:
    check_mechanism(PrivSet(epsilon=1.0, domain_size=6, padding=2))
    check_mechanism(PrivSet(epsilon=3.0, domain_size=7, padding=3, subset_size=4))


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="subset_size must be"):
        PrivSet(epsilon=1.0, domain_size=6, padding=2, subset_size=7)
    with pytest.raises(ValueError, match="domain_size \\+ padding must be"):
        PrivSet(epsilon=1.0, domain_size=70_000, padding=2)
    with pytest.raises(ValueError, match="padding must be"):
        PrivSet(epsilon=1.0, domain_size=6, padding=0)
    assert math.isfinite(PrivSet(epsilon=40.0, domain_size=6, padding=2).privacy_loss())
