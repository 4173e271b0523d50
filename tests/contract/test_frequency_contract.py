"""The statistical laws of every registered frequency oracle.

Adding an oracle to ``ldpkit.frequency.ORACLES`` subjects it to all of these tests:
support-marginal laws (exact binomials), unbiasedness, variance, CI coverage, d = 2 and very large epsilon, privacy
loss over a grid. The deterministic contract (validation messages, seeding, round trips,
merge laws, vectorized == loop, shapes) is :func:`ldpkit.testing.check_mechanism`, run on
every mechanism in ``test_contract.py``; every sampler is tested against its transition
matrix in ``test_sampler_laws.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.frequency import ORACLES, PureFrequencyOracle
from ldpkit.testing import (
    binomial_z,
    bonferroni_z,
    check_mechanism,
    variance_ratio_bounds,
)

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
def test_labels_need_an_encoder(name):
    with pytest.raises(TypeError, match="Encoder"):
        make(name).randomize(["a", "b"], rng=0)


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
    """The oracle's plain estimate, unbiased for every oracle (RAPPOR included)."""
    est = spec.run(values, rng=rng)
    assert est.unbiased and est.postprocessing == ()
    return est


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
    top = type(make(name)).max_epsilon  # each mechanism's largest exact budget
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
    """privacy_loss() from the real output probabilities, over a grid of (epsilon, d)."""
    check_mechanism(make(name, epsilon, d), checks=["privacy"])
