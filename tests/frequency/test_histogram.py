"""Histogram encoding (SHE, THE): exact constants, noise law, thresholding, aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ldpkit import SHE, THE, Reports, Stats, privacy_loss
from ldpkit.frequency import _bits
from ldpkit.frequency.histogram import optimal_cutoff, the_probabilities, the_variance_star
from ldpkit.testing import bonferroni_z, chisquare_gof

ALPHA = 1e-6
TABLE2 = [(0.5, 32.00, 19.44), (1.0, 8.00, 5.46), (2.0, 2.00, 1.50), (4.0, 0.50, 0.34)]


# -- exact constants ------------------------------------------------------------------------
@pytest.mark.parametrize(("epsilon", "she", "the"), TABLE2)
def test_fo17_table2(epsilon, she, the):
    n = 10_000
    assert round(n * SHE(epsilon=epsilon, domain_size=32).variance(n), 2) == she
    assert round(n * THE(epsilon=epsilon, domain_size=32, cutoff=1.0).variance(n), 2) == the
    # FO17's closed form for THE's Var* (section 4.2) at theta = 1
    e = math.exp
    closed = (2 * e(epsilon / 2) - 1) / (1 + e(epsilon / 2) - 2 * e(epsilon / 2)) ** 2
    assert round(closed, 2) == the
    assert the_variance_star(epsilon, 1.0) == pytest.approx(closed, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("theta", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_the_probabilities_are_laplace_tails(epsilon, theta):
    p, q = the_probabilities(epsilon, theta)
    scale = 2 / epsilon
    assert p == pytest.approx(sps.laplace.sf(theta - 1, scale=scale), rel=1e-13)
    assert q == pytest.approx(sps.laplace.sf(theta, scale=scale), rel=1e-13)
    e = math.exp
    closed = (2 * e(epsilon * theta / 2) - 1) / (
        1 + e(epsilon * (theta - 0.5)) - 2 * e(epsilon * theta / 2)
    ) ** 2
    assert the_variance_star(epsilon, theta) == pytest.approx(closed, rel=1e-10)
    spec = THE(epsilon=epsilon, domain_size=4, cutoff=theta)
    assert spec.nominal_p == p and spec.nominal_q == q
    assert p - 2.0**-32 < spec.p <= p and q <= spec.q < q + 2.0**-32


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 4.0, 8.0])
def test_optimal_cutoff(epsilon):
    theta = optimal_cutoff(epsilon)
    assert 0.5 < theta < 1.0
    best = the_variance_star(epsilon, theta)
    assert best < the_variance_star(epsilon, 1.0)
    for other in (theta - 1e-3, theta + 1e-3, 0.5, 0.75, 0.999):
        assert best <= the_variance_star(epsilon, other)
    spec = THE(epsilon=epsilon, domain_size=8)
    assert spec.cutoff is None and spec.effective_cutoff == theta
    assert spec.variance(100) < THE(epsilon=epsilon, domain_size=8, cutoff=1.0).variance(100)
    # THE beats SHE at every epsilon (FO17 section 4.2)
    assert spec.variance(100) < SHE(epsilon=epsilon, domain_size=8).variance(100)


def test_optimal_cutoff_grows_towards_one():
    thetas = [optimal_cutoff(e) for e in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)]
    assert np.all(np.diff(thetas) > 0)
    assert thetas[-1] > 0.9


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.5, 4.0])
@pytest.mark.parametrize("theta", [None, 0.0, 0.6, 1.0])
def test_the_privacy_loss_is_honest(epsilon, theta):
    spec = THE(epsilon=epsilon, domain_size=5, cutoff=theta)
    assert not spec.exact_epsilon
    loss = spec.privacy_loss()
    p, q = spec.p, spec.q
    assert loss == pytest.approx(math.log(p * (1 - q) / (q * (1 - p))), rel=1e-12)
    assert loss == pytest.approx(privacy_loss(spec.transition_matrix()), rel=1e-10)
    assert loss < epsilon


def test_cutoff_validation_and_identity():
    for bad in (-0.1, 1.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="cutoff must be a finite number >= 0 and <= 1"):
            THE(epsilon=1.0, domain_size=4, cutoff=bad)
    with pytest.raises(TypeError, match="cutoff must be"):
        THE(epsilon=1.0, domain_size=4, cutoff="0.5")
    spec = THE(epsilon=1.0, domain_size=4)
    assert spec.to_dict()["params"]["cutoff"] is None
    # None means "optimal for this epsilon", so it follows epsilon on replace()
    assert spec.replace(epsilon=2.0).effective_cutoff == optimal_cutoff(2.0)
    fixed = THE(epsilon=1.0, domain_size=4, cutoff=1)
    assert fixed.cutoff == 1.0 and isinstance(fixed.cutoff, float)
    assert fixed != spec and fixed.fingerprint != spec.fingerprint


def test_the_sampler_equals_thresholded_noise():
    """THE's bits have the law of thresholding SHE's noisy vector on the device."""
    d, n, epsilon = 4, 120_000, 1.0
    spec = THE(epsilon=epsilon, domain_size=d)
    rng = np.random.default_rng(10)
    noisy = rng.laplace(0.0, 2 / epsilon, size=(n, d))
    noisy[:, 1] += 1.0
    thresholded = Reports(spec, bits=_bits.pack_bits(noisy > spec.effective_cutoff))
    row = spec.transition_matrix()[1]
    h_thresh = np.bincount(spec.output_index(thresholded), minlength=2**d)
    h_kernel = np.bincount(spec.output_index(spec.randomize(np.full(n, 1), rng=11)), minlength=2**d)
    assert chisquare_gof(h_thresh, row) > ALPHA
    assert chisquare_gof(h_kernel, row) > ALPHA
    # power: the law at theta = 1 or at epsilon * 1.3 is rejected
    assert chisquare_gof(h_kernel, spec.replace(cutoff=1.0).transition_matrix()[1]) < ALPHA
    assert chisquare_gof(h_kernel, spec.replace(epsilon=1.3).transition_matrix()[1]) < ALPHA


def test_the_reports_are_packed_bits():
    spec = THE(epsilon=1.0, domain_size=1000)
    reports = spec.randomize(np.arange(1000), rng=0)
    assert reports.bits.shape == (1000, 125) and reports.bits.dtype == np.uint8
    assert spec.aggregate(reports).counts.shape == (1000,)


# -- SHE --------------------------------------------------------------------------------------
def _noise(spec: SHE, values: np.ndarray, rng: int) -> np.ndarray:
    x = np.array(spec.randomize(values, rng=rng).values)
    x[np.arange(values.size), values] -= 1.0
    return x.ravel()


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_she_noise_is_laplace(epsilon):
    d, n = 8, 40_000
    spec = SHE(epsilon=epsilon, domain_size=d)
    values = np.arange(n) % d
    noise = _noise(spec, values, rng=12)
    assert sps.kstest(noise, "laplace", args=(0.0, 2 / epsilon)).pvalue > ALPHA
    # the noise of epsilon * 1.3 is rejected against the same law
    louder = _noise(spec.replace(epsilon=epsilon * 1.3), values, rng=13)
    assert sps.kstest(louder, "laplace", args=(0.0, 2 / epsilon)).pvalue < ALPHA
    # and the one-hot sits on the true coordinate (a shifted vector would fail)
    shifted = _noise(spec, values, rng=12) + 1.0 / d
    assert sps.kstest(shifted, "laplace", args=(0.0, 2 / epsilon)).pvalue < ALPHA


def test_she_privacy_and_shapes():
    spec = SHE(epsilon=1.5, domain_size=6)
    # the exact discrete noise's loss: <= epsilon, ~2e-8 short
    assert spec.exact_epsilon and 1.5 * (1 - 1e-7) < spec.privacy_loss() <= 1.5
    assert spec.noise_scale == pytest.approx(2 / 1.5)
    with pytest.raises(NotImplementedError):
        spec.transition_matrix()
    reports = spec.randomize([0, 5, 5], rng=0)
    assert reports.values.shape == (3, 6) and reports.values.dtype == np.float64
    # reports sit on the 2^-20 grid, so the server's fixed-point sums are exact
    np.testing.assert_array_equal(reports.values * 2**20, np.rint(reports.values * 2**20))


def test_she_aggregate_is_exact_across_chunks():
    d, n = 300, 9_000  # several aggregation chunks
    spec = SHE(epsilon=1.0, domain_size=d)
    values = np.random.default_rng(14).integers(0, d, n)
    reports = spec.randomize(values, rng=15)
    stats = spec.aggregate(reports)
    assert stats.sums.dtype == np.int64
    np.testing.assert_array_equal(
        stats.sums, np.rint(np.asarray(reports.values) * 2**20).astype(np.int64).sum(axis=0)
    )
    parts = [spec.aggregate(reports[i : i + 1234]) for i in range(0, n, 1234)]
    assert parts[0].merge(*parts[1:]) == stats


def test_she_aggregate_validates_values():
    spec = SHE(epsilon=1.0, domain_size=3)
    with pytest.raises(ValueError, match=r"float64 array of shape \(n, 3\)"):
        spec.aggregate(Reports(spec, values=np.zeros((2, 4))))
    with pytest.raises(ValueError, match=r"float64 array of shape \(n, 3\)"):
        spec.aggregate(Reports(spec, values=np.zeros((2, 3), dtype=np.float32)))
    for bad in (math.nan, math.inf, 0.1, 2.0**40):
        x = np.zeros((2, 3))
        x[1, 2] = bad
        match = "finite real numbers" if not math.isfinite(bad) else "multiples of 2\\^-20"
        with pytest.raises(ValueError, match=match):
            spec.aggregate(Reports(spec, values=x))


def test_she_unbiased_and_variance_formula():
    d, n = 16, 50_000
    spec = SHE(epsilon=1.0, domain_size=d)
    rng = np.random.default_rng(16)
    values = rng.integers(0, 4, n)  # items 4.. absent
    truth = np.bincount(values, minlength=d) / n
    est = spec.run(values, rng=17)
    z = (est.frequencies - truth) / np.sqrt(spec.variance(n, truth))
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, d)
    np.testing.assert_allclose(spec.variance(n, truth), (8 + truth * (1 - truth)) / n)
    assert Stats.empty(spec).n == 0
