"""Numerical attributes in a tuple: Duchi et al.'s vertex mechanism and PM/HM sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.multidim import AttributeSampling, DuchiMean, LaplaceMean, TupleMeans
from ldpkit.multidim.sampling import sampled_attributes
from ldpkit.numeric import PiecewiseMechanism
from ldpkit.privacy import privacy_loss
from ldpkit.testing import check_mechanism, chisquare_gof


def _bits(d: int) -> np.ndarray:
    codes = np.arange(2**d)
    return (codes[:, None] >> np.arange(d - 1, -1, -1)) & 1


# -- DuchiMean: the exact law ----------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_duchi_law_is_exact_and_unbiased(d, epsilon):
    """Check that the vertex law has rows summing to 1, loss epsilon and E[z] = sign."""
    spec = DuchiMean(epsilon=epsilon, low=(0.0,) * d, high=(1.0,) * d)
    m = spec.grid_matrix()
    assert m.shape == (2**d, 2**d)
    assert np.allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert abs(privacy_loss(m) - spec.privacy_loss()) < 1e-9
    assert abs(spec.privacy_loss() - epsilon) < 1e-9
    signs = 2.0 * _bits(d) - 1.0
    # E[z | sign vector] = sign vector, for every one of the 2^d rows
    assert np.abs(spec.magnitude * (m @ signs) - signs).max() < 1e-9


@pytest.mark.parametrize("d", [3, 5, 7])
def test_duchi_magnitude_is_the_papers_for_odd_d(d):
    """Check that B equals the paper's constant for odd d."""
    eps = 1.0
    paper = (
        (math.exp(eps) + 1) / (math.exp(eps) - 1) * 2 ** (d - 1) / math.comb(d - 1, (d - 1) // 2)
    )
    spec = DuchiMean(epsilon=eps, low=(0.0,) * d, high=(1.0,) * d)
    assert abs(spec.magnitude / paper - 1.0) < 1e-9


def test_duchi_sampler_matches_the_law_and_fails_for_a_wrong_epsilon():
    """Check the sampler against grid_matrix (and that a wrong epsilon is rejected)."""
    d = 3
    spec = DuchiMean(epsilon=1.0, low=(0.0,) * d, high=(1.0,) * d)
    # inputs at corners round to fixed signs: high, low, high -> sign vector 101
    x = np.tile([1.0, 0.0, 1.0], (60_000, 1))
    idx = spec.output_index(spec.randomize(x, rng=4))
    observed = np.bincount(idx, minlength=2**d)
    row = 0b101
    assert chisquare_gof(observed, spec.grid_matrix()[row]) > 1e-4
    wrong = spec.replace(epsilon=1.3).grid_matrix()[row]
    assert chisquare_gof(observed, wrong) < 1e-8


def _duchi_population(n: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    x = np.column_stack([gen.beta(5, 2, n), gen.uniform(0, 10, n), gen.exponential(20, n)])
    x[:, 2] = np.minimum(x[:, 2], 100.0)
    return x


def test_duchi_means_z():
    """Check the means against the truth with the exact variance (|z| <= 5)."""
    x = _duchi_population(200_000)
    spec = DuchiMean(epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 10.0, 100.0))
    est = spec.run(x, rng=1)
    z = (est.means - x.mean(axis=0)) / np.sqrt(spec.variance_at(len(x), x))
    assert np.abs(z).max() <= 5.0
    # the empirical variance: the exact one plus the users' own spread (Var(t) / n)
    assert np.all(est.variance >= 0.9 * spec.variance_at(len(x), x))
    assert np.all(est.variance <= spec.variance(len(x)) * (1 + 1e-4))  # n / (n - 1)


def test_duchi_means_z_fails_for_a_wrong_epsilon():
    """Check that the same z-test fails when the estimate assumes a wrong epsilon."""
    x = _duchi_population(200_000)
    spec = DuchiMean(epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 10.0, 100.0))
    other = spec.replace(epsilon=2.6)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    est = other.estimate(Stats(other, stats.n, **stats.arrays))
    z = (est.means - x.mean(axis=0)) / np.sqrt(spec.variance_at(len(x), x))
    assert np.abs(z).max() > 6.0


def test_duchi_coverage():
    """Check the 95% intervals cover the true means 93-98.5% of the time."""
    x = _duchi_population(2000, seed=2)
    spec = DuchiMean(epsilon=1.0, low=(0.0, 0.0, 0.0), high=(1.0, 10.0, 100.0))
    gen = np.random.default_rng(5)
    truth = x.mean(axis=0)
    hits = []
    for _ in range(300):
        lo, hi = spec.run(x, rng=gen).confidence_interval(0.05)
        hits.append((lo <= truth) & (truth <= hi))
    assert 0.93 <= float(np.mean(hits)) <= 0.985


# -- LaplaceMean ---------------------------------------------------------------------------
def _two_sided_geometric(rho: float, width: int) -> np.ndarray:
    """P[N = m] for m in [-width, width], the tails beyond lumped into the ends."""
    m = np.arange(-width, width + 1)
    law = (1 - rho) / (1 + rho) * rho ** np.abs(m)
    law[0] = law[-1] = rho**width / (1 + rho)  # P[N <= -width] = P[N >= width]
    return law


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_laplace_noise_law_and_fails_for_a_wrong_epsilon(epsilon):
    """Check the reports' two-sided geometric law at grid inputs, and a wrong epsilon's."""
    spec = LaplaceMean(epsilon=epsilon, low=(0.0, 0.0), high=(1.0, 1.0))
    g, rho = spec.steps, spec.rho
    assert abs(spec.privacy_loss() - epsilon) < 1e-9
    assert abs(-2 * g * math.log(rho) - epsilon) < 1e-9
    y = spec.randomize(np.tile([0.0, 1.0], (100_000, 1)), rng=3).values  # k = 0 and k = G
    wrong = [
        LaplaceMean(epsilon=epsilon * f, low=(0.0, 0.0), high=(1.0, 1.0)).rho for f in (0.7, 1.3)
    ]
    for col, k in ((0, 0), (1, g)):
        observed = np.bincount(np.clip(y[:, col] - k, -30, 30) + 30, minlength=61)
        assert chisquare_gof(observed, _two_sided_geometric(rho, 30)) > 1e-4
        for r in wrong:  # a smaller and a larger epsilon's law are both rejected
            assert chisquare_gof(observed, _two_sided_geometric(r, 30)) < 1e-8


def test_laplace_means_z_and_variance_fail_for_a_wrong_epsilon():
    """Check the means' z-scores and the variance formula, which a wrong epsilon misses."""
    x = _duchi_population(200_000)
    spec = LaplaceMean(epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 10.0, 100.0))
    est = spec.run(x, rng=1)
    exact = spec.variance_at(len(x), x)
    assert np.abs((est.means - x.mean(axis=0)) / np.sqrt(exact)).max() <= 5.0
    assert np.all(exact <= spec.variance(len(x)))
    # the empirical variance (+ the users' spread, small here) matches the formula ...
    assert np.all(np.abs(est.variance / exact - 1.0) < 0.1)
    # ... and not the formula at a wrong epsilon (the mean itself is unbiased at any rho)
    other = LaplaceMean(epsilon=2.6, low=spec.low, high=spec.high)
    assert np.all(np.abs(est.variance / other.variance_at(len(x), x) - 1.0) > 0.2)


# -- AttributeSampling ------------------------------------------------------------------------
def test_sampled_attributes_rule():
    """Check the paper's rule for k."""
    assert [sampled_attributes(e, 6) for e in (0.5, 2.4, 2.5, 5.0, 7.6, 100.0)] == [
        1,
        1,
        1,
        2,
        3,
        6,
    ]
    assert AttributeSampling(epsilon=5.0, low=(0.0,) * 4, high=(1.0,) * 4).k == 2
    assert AttributeSampling(epsilon=5.0, low=(0.0,) * 4, high=(1.0,) * 4, sampled=3).k == 3


def _mixed_population(n: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    return np.column_stack(
        [
            gen.beta(2, 5, n),
            np.minimum(gen.exponential(15, n), 60.0),
            gen.uniform(-5, 5, n),
            gen.choice(3, n, p=[0.6, 0.3, 0.1]),
            gen.integers(0, 5, n),
        ]
    )


MIXED = {"low": (0.0, 0.0, -5.0), "high": (1.0, 60.0, 5.0), "domain_sizes": (3, 5)}


@pytest.mark.parametrize("mechanism", ["hm", "pm"])
@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_sampling_means_and_frequencies_z(mechanism, epsilon):
    """Check means and frequencies against the truth (|z| <= 5)."""
    x = _mixed_population(200_000)
    spec = AttributeSampling(epsilon=epsilon, mechanism=mechanism, **MIXED)
    est = spec.run(x, rng=1)
    assert isinstance(est, TupleMeans)
    z = (est.means - x[:, :3].mean(axis=0)) / np.sqrt(spec.variance_at(len(x), x))
    assert np.abs(z).max() <= 5.0
    for j, k in enumerate(spec.domain_sizes):
        f = np.bincount(x[:, 3 + j].astype(int), minlength=k) / len(x)
        fz = (est.categorical[j].frequencies - f) / est.categorical[j].std_error
        assert np.abs(fz).max() <= 5.0
    assert np.all(spec.variance_at(len(x), x) <= spec.variance(len(x)) * (1 + 1e-9))


def test_sampling_z_fails_for_a_wrong_epsilon():
    """Check that the z-test fails when the estimate assumes a wrong epsilon."""
    x = _mixed_population(200_000)
    spec = AttributeSampling(epsilon=1.0, **MIXED)
    other = spec.replace(epsilon=1.3)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    est = other.estimate(Stats(other, stats.n, **stats.arrays))
    f = np.bincount(x[:, 3].astype(int), minlength=3) / len(x)
    fz = (est.categorical[0].frequencies - f) / est.categorical[0].std_error
    z = (est.means - x[:, :3].mean(axis=0)) / est.std_error
    assert max(np.abs(fz).max(), np.abs(z).max()) > 6.0


def test_sampling_law_given_the_sample_and_fails_for_a_wrong_epsilon():
    """Check the sampled subsets and PM's grid law (and a wrong epsilon's rejection)."""
    # attribute 0 at its low end (t = -1, grid input 0): its reports follow PM's row 0 at
    # epsilon / k; the sampled pairs are uniform over the C(3, 2) subsets
    spec = AttributeSampling(
        epsilon=5.0, low=(0.0, 0.0, 0.0), high=(1.0, 1.0, 1.0), mechanism="pm", report_cells=64
    )
    assert spec.k == 2
    x = np.tile([0.0, 1.0, 0.5], (90_000, 1))
    r = spec.randomize(x, rng=2)
    pairs = r.attributes[:, 0] * 3 + r.attributes[:, 1]
    observed_pairs = np.bincount(pairs, minlength=9)[[1, 2, 5]]
    assert chisquare_gof(observed_pairs, np.full(3, 1 / 3)) > 1e-4
    cells = r.values[r.attributes == 0]
    observed = np.bincount(cells, minlength=64)
    pm = PiecewiseMechanism(epsilon=2.5, report_cells=64)
    assert chisquare_gof(observed, pm.grid_matrix()[0]) > 1e-4
    wrong = PiecewiseMechanism(epsilon=2.5 * 1.3, report_cells=64)
    assert chisquare_gof(observed, wrong.grid_matrix()[0]) < 1e-8


def test_sampling_coverage():
    """Check the 95% intervals cover the true means and frequencies 93-98.5%."""
    x = _mixed_population(3000, seed=3)
    spec = AttributeSampling(epsilon=2.0, **MIXED)
    gen = np.random.default_rng(6)
    truth = x[:, :3].mean(axis=0)
    f = np.bincount(x[:, 3].astype(int), minlength=3) / len(x)
    hits = []
    for _ in range(300):
        est = spec.run(x, rng=gen)
        lo, hi = est.confidence_interval(0.05)
        flo, fhi = est.categorical[0].confidence_interval(0.05)
        hits.append(np.concatenate([(lo <= truth) & (truth <= hi), (flo <= f) & (f <= fhi)]))
    assert 0.93 <= float(np.mean(hits)) <= 0.985


def test_privacy_loss_sums_the_sampled_budgets():
    """Check that the loss is the sum of k budgets of epsilon / k."""
    spec = AttributeSampling(epsilon=7.5, **MIXED)
    assert spec.k == 3
    assert abs(spec.privacy_loss() - 7.5) < 1e-7
    assert spec.numeric_oracle().epsilon == pytest.approx(2.5)


@pytest.mark.parametrize(
    "spec",
    [
        DuchiMean(epsilon=2.0, low=(0.0, -1.0, 5.0, 0.0), high=(1.0, 1.0, 9.0, 1.0)),
        LaplaceMean(epsilon=3.0, low=(0.0, -1.0, 5.0), high=(1.0, 1.0, 9.0)),
        AttributeSampling(epsilon=6.0, **MIXED),
        AttributeSampling(epsilon=3.0, low=(0.0, 0.0), high=(1.0, 2.0), mechanism="pm"),
    ],
    ids=repr,
)
def test_contract(spec):
    """Run the shared mechanism contract."""
    check_mechanism(spec)


def test_frame_and_validation():
    """Check the long frame and the parameter and value errors."""
    x = _mixed_population(2000)
    est = AttributeSampling(epsilon=2.0, **MIXED).run(x, rng=0)
    frame = est.to_frame()
    assert list(frame.columns) == [
        "attribute",
        "kind",
        "item",
        "estimate",
        "std_error",
        "low",
        "high",
    ]
    assert len(frame) == 3 + 3 + 5
    with pytest.raises(ValueError, match="low must hold 2 to 32"):
        DuchiMean(epsilon=1.0, low=(0.0,), high=(1.0,))
    with pytest.raises(ValueError, match="high must hold 2 bounds"):
        DuchiMean(epsilon=1.0, low=(0.0, 0.0), high=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="low and domain_sizes must declare 2"):
        AttributeSampling(epsilon=1.0, low=(0.0,), high=(1.0,))
    with pytest.raises(ValueError, match="sampled must be"):
        AttributeSampling(epsilon=1.0, sampled=6, **MIXED)
    with pytest.raises(ValueError, match="mechanism must be 'hm' or 'pm'"):
        AttributeSampling(epsilon=1.0, mechanism="sr", **MIXED)
    with pytest.raises(TypeError, match="domain_sizes must be a sequence"):
        AttributeSampling(epsilon=1.0, low=(0.0,), high=(1.0,), domain_sizes=3)
    spec = AttributeSampling(epsilon=1.0, **MIXED)
    bad = x.copy()
    bad[0, 4] = 5
    with pytest.raises(ValueError, match="values must be an"):
        spec.randomize(bad)
    with pytest.raises(ValueError, match="epsilon must be <="):
        DuchiMean(epsilon=25.0, low=(0.0,) * 32, high=(1.0,) * 32)
