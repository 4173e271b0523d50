"""One contract suite over every registered frequency oracle.

Adding an oracle to ``ldpkit.frequency.ORACLES`` subjects it to all of these tests:
validation messages, seeding, pickling, JSON round trips, merge laws, foreign-config
rejection, support-marginal laws (exact binomials), unbiasedness, variance, CI coverage,
d = 2 and very large epsilon.
"""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

from ldpkit import Reports, Stats, privacy_loss
from ldpkit.frequency import ORACLES, PureFrequencyOracle
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof, variance_ratio_bounds

NAMES = sorted(ORACLES)
ALPHA = 1e-6


def make(name: str, epsilon: float = 1.0, domain_size: int = 8):
    return ORACLES[name](epsilon=epsilon, domain_size=domain_size)


def skewed(d: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n users over d items with a Zipf-like law, and the exact true frequencies."""
    w = 1.0 / np.arange(1, d + 1)
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(d), counts)
    np.random.default_rng(seed).shuffle(values)
    return values, counts / n


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, -math.inf])
def test_bad_epsilon_value(name, bad):
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        make(name, epsilon=bad)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", ["1", None, True, [1.0]])
def test_bad_epsilon_type(name, bad):
    with pytest.raises(TypeError, match="epsilon must be"):
        make(name, epsilon=bad)


@pytest.mark.parametrize("name", NAMES)
def test_bad_domain_size(name):
    with pytest.raises(ValueError, match="domain_size must be an integer >= 2"):
        make(name, domain_size=1)
    with pytest.raises(TypeError, match="domain_size must be an integer"):
        make(name, domain_size=4.0)


@pytest.mark.parametrize("name", NAMES)
def test_bad_values(name):
    spec = make(name)
    with pytest.raises(ValueError, match=r"values must be integers in \[0, 8\)"):
        spec.randomize([0, 8], rng=0)
    with pytest.raises(ValueError, match=r"values must be integers in \[0, 8\)"):
        spec.randomize([-1, 2], rng=0)
    with pytest.raises(TypeError, match="values must be integers"):
        spec.randomize([0.0, math.nan], rng=0)
    with pytest.raises(TypeError, match="Encoder"):
        spec.randomize(["a", "b"], rng=0)
    with pytest.raises(ValueError, match="1-D"):
        spec.randomize(np.zeros((2, 2), dtype=int), rng=0)


@pytest.mark.parametrize("name", NAMES)
def test_seeding_and_shapes(name):
    spec = make(name)
    values, _ = skewed(8, 500)
    a = spec.randomize(values, rng=42)
    b = spec.randomize(values, rng=42)
    c = spec.randomize(values, rng=43)
    assert isinstance(a, Reports) and len(a) == 500
    assert a.equals(b)
    assert not a.equals(c)
    g = np.random.default_rng(7)
    assert spec.randomize(values, rng=g).equals(
        spec.randomize(values, rng=np.random.default_rng(7))
    )
    for arr in a.arrays.values():
        assert arr.shape[0] == 500 and not arr.flags.writeable
    empty = spec.randomize(np.array([], dtype=np.int64), rng=0)
    assert len(empty) == 0 and spec.aggregate(empty).n == 0


@pytest.mark.parametrize("name", NAMES)
def test_pickle_and_json_round_trip(name):
    spec = make(name)
    values, _ = skewed(8, 300)
    reports = spec.randomize(values, rng=1)
    stats = spec.aggregate(reports)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert hash(pickle.loads(pickle.dumps(spec))) == hash(spec)
    assert pickle.loads(pickle.dumps(reports)).equals(reports)
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert Stats.from_dict(json.loads(json.dumps(stats.to_dict()))) == stats
    np.testing.assert_array_equal(
        spec.estimate(Stats.from_dict(json.loads(json.dumps(stats.to_dict())))).frequencies,
        spec.estimate(stats).frequencies,
    )


@pytest.mark.parametrize("name", NAMES)
def test_merge_equals_aggregate_of_concat(name):
    spec = make(name)
    values, _ = skewed(8, 900)
    r = spec.randomize(values, rng=3)
    a, b, c = r[:200], r[200:650], r[650:]
    whole = spec.aggregate(r)
    assert spec.aggregate(a.concat(b, c)) == whole
    assert spec.aggregate(a).merge(spec.aggregate(b), spec.aggregate(c)) == whole
    assert Stats.empty(spec).merge(whole) == whole
    assert spec.aggregate(b).merge(spec.aggregate(a)) == spec.aggregate(a).merge(spec.aggregate(b))


@pytest.mark.parametrize("name", NAMES)
def test_foreign_configuration_rejected(name):
    spec = make(name)
    other = make(name, epsilon=2.0)
    values, _ = skewed(8, 100)
    mine, theirs = spec.randomize(values, rng=0), other.randomize(values, rng=0)
    with pytest.raises(ValueError, match="reports must come from"):
        spec.aggregate(theirs)
    with pytest.raises(ValueError, match="stats must come from"):
        spec.estimate(other.aggregate(theirs))
    with pytest.raises(ValueError, match="stats must come from"):
        spec.aggregate(mine).merge(other.aggregate(theirs))
    with pytest.raises(ValueError, match="reports must come from"):
        mine.concat(theirs)
    with pytest.raises(TypeError, match="reports must be ldpkit.Reports"):
        spec.aggregate(np.zeros(3))


@pytest.mark.parametrize("name", NAMES)
def test_estimate_needs_reports(name):
    spec = make(name)
    with pytest.raises(ValueError, match="at least one report"):
        spec.estimate(Stats.empty(spec))


@pytest.mark.parametrize("name", [n for n in NAMES if issubclass(ORACLES[n], PureFrequencyOracle)])
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 8), (2.0, 2), (0.5, 33)])
def test_support_marginals_are_exact_binomials(name, epsilon, d):
    """C_v ~ Binomial(n, p) for the true item and Binomial(n, q) for the others; the test
    must also reject the sampler of epsilon * 1.3 and the p/q-swapped hypothesis."""
    spec = make(name, epsilon, d)
    n = 150_000
    u = d // 2
    counts = spec.support_counts(spec.randomize(np.full(n, u), rng=11))
    probs = np.full(d, spec.q)
    probs[u] = spec.p
    limit = bonferroni_z(ALPHA, d)
    z = binomial_z(counts, n, probs)
    assert np.max(np.abs(z)) < limit, f"support marginals off: max |z| = {np.max(np.abs(z)):.2f}"
    swapped = np.full(d, spec.p)
    swapped[u] = spec.q
    assert np.max(np.abs(binomial_z(counts, n, swapped))) > limit
    louder = spec.replace(epsilon=epsilon * 1.3)
    counts13 = louder.support_counts(louder.randomize(np.full(n, u), rng=12))
    assert np.max(np.abs(binomial_z(counts13, n, probs))) > limit


def unbiased_run(spec, values, rng):
    """The oracle's unbiased estimator: ``run`` unless its default estimate is biased by
    design (``unbiased_by_default = False``, e.g. RAPPOR's LASSO selection), in which case
    its ``unbiased_estimate`` path."""
    if getattr(spec, "unbiased_by_default", True):
        return spec.run(values, rng=rng)
    return spec.unbiased_estimate(spec.aggregate(spec.randomize(values, rng=rng)))


def _enumerable(name: str) -> bool:
    try:
        make(name, 1.0, 4).transition_matrix()
        return True
    except NotImplementedError:
        return False


@pytest.mark.parametrize("name", [n for n in NAMES if _enumerable(n)])
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 4), (0.7, 2), (2.5, 5)])
def test_sampler_matches_transition_matrix(name, epsilon, d):
    spec = make(name, epsilon, d)
    matrix = spec.transition_matrix()
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    if spec.exact_epsilon:
        # Kernels that compare uniform 32-bit integers with integer thresholds realize
        # probabilities that are multiples of 2^-32, rounded towards less privacy loss:
        # the realized epsilon may fall short of the nominal one by ~1e-8, never exceed it.
        assert spec.privacy_loss() == pytest.approx(epsilon, rel=0, abs=1e-7)
    else:
        # Strictly more private than the budget (e.g. THE): the loss must stay within it.
        assert spec.privacy_loss() <= epsilon
    assert spec.privacy_loss() == pytest.approx(privacy_loss(matrix), rel=1e-9, abs=1e-12)
    n = 60_000
    for u in range(d):
        hist = np.bincount(
            spec.output_index(spec.randomize(np.full(n, u), rng=u)), minlength=matrix.shape[1]
        )
        p = chisquare_gof(hist, matrix[u])
        assert p > ALPHA, f"input {u}: chi-square p = {p:.2e} < {ALPHA}"
    wrong = spec.replace(epsilon=epsilon * 1.3)
    hist = np.bincount(
        wrong.output_index(wrong.randomize(np.full(n, 0), rng=99)), minlength=matrix.shape[1]
    )
    assert chisquare_gof(hist, matrix[0]) < ALPHA


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 16), (4.0, 2)])
def test_unbiased(name, epsilon, d):
    spec = make(name, epsilon, d)
    values, truth = skewed(d, 200_000, seed=5)
    est = unbiased_run(spec, values, rng=6)
    z = (est.frequencies - truth) / np.sqrt(spec.variance(200_000, truth))
    assert np.max(np.abs(z)) < 6, f"max |z| = {np.max(np.abs(z)):.2f}"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_variance_and_ci_coverage(name):
    """Repeated runs: empirical variance matches variance(n, f); 95% CIs cover ~95%."""
    d, n, runs = 8, 3_000, 240
    spec = make(name, 1.0, d)
    values, truth = skewed(d, n, seed=8)
    gens = np.random.default_rng(9).spawn(runs)
    est = [unbiased_run(spec, values, rng=g) for g in gens]
    freqs = np.array([e.frequencies for e in est])
    lo, hi = variance_ratio_bounds(runs - 1, ALPHA / d)
    ratio = freqs.var(axis=0, ddof=1) / spec.variance(n, truth)
    assert np.all((ratio > lo) & (ratio < hi)), (
        f"variance ratios {np.round(ratio, 3)} outside [{lo:.2f}, {hi:.2f}]"
    )
    covered = np.mean(
        [
            ((e.confidence_interval(0.05)[0] <= truth) & (truth <= e.confidence_interval(0.05)[1]))
            for e in est
        ]
    )
    assert 0.93 <= covered <= 0.97, f"coverage {covered:.3f}"


@pytest.mark.parametrize("name", NAMES)
def test_large_epsilon_and_binary_domain(name):
    values, truth = skewed(2, 5_000, seed=1)
    top = type(make(name)).max_epsilon  # issue 11: each mechanism's largest exact budget
    for eps in (min(30.0, top), min(200.0, top)):
        est = make(name, eps, 2).run(values, rng=2)
        assert np.all(np.isfinite(est.frequencies)) and np.all(np.isfinite(est.variance))
        np.testing.assert_allclose(est.frequencies, truth, atol=0.02)
    huge = make(name, min(800.0, top), 4)
    assert np.isfinite(huge.variance(10)) and huge.variance(10) >= 0


@pytest.mark.parametrize("name", NAMES)
def test_variance_formula_shape(name):
    spec = make(name)
    assert np.ndim(spec.variance(100)) == 0
    assert np.shape(spec.variance(100, np.full(8, 0.125))) == (8,)
    assert spec.variance(100) > spec.variance(1000) > 0
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        spec.variance(0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("d", [2, 3, 16, 1024])
def test_privacy_loss_grid(name, epsilon, d):
    """privacy_loss() is computed from the real output probabilities: tight at epsilon
    (up to the 2^-64 quantization of integer-threshold samplers), never above it."""
    spec = make(name, epsilon, d)
    loss = spec.privacy_loss()
    assert loss <= epsilon + 1e-12
    if spec.exact_epsilon:
        assert loss == pytest.approx(epsilon, rel=0, abs=1e-7 * max(1.0, epsilon))
    else:
        assert loss > 0


@pytest.mark.parametrize("name", NAMES)
def test_vectorized_aggregation_equals_loop(name):
    """Aggregating a batch equals merging the aggregates of its reports one by one."""
    spec = make(name)
    values, _ = skewed(8, 60, seed=4)
    reports = spec.randomize(values, rng=5)
    looped = Stats.empty(spec)
    for i in range(len(reports)):
        looped = looped.merge(spec.aggregate(reports[i : i + 1]))
    assert looped == spec.aggregate(reports)
