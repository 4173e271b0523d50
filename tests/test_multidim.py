"""ldpkit.multidim: SPL, SMP, RS+FD: unbiased, with the papers' variances, exact privacy."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR
from ldpkit import consistency as C
from ldpkit.multidim import RSFD, SMP, SPL, MultiFrequencyEstimate
from ldpkit.privacy import privacy_loss
from ldpkit.testing import variance_ratio_bounds

SIZES = (3, 5, 2)
SPECS = [
    lambda eps: SPL(epsilon=eps, domain_sizes=SIZES),
    lambda eps: SMP(epsilon=eps, domain_sizes=SIZES),
    lambda eps: RSFD(epsilon=eps, domain_sizes=SIZES),
    lambda eps: RSFD(epsilon=eps, domain_sizes=SIZES, protocol="oue-z"),
]
IDS = ["SPL", "SMP", "RSFD-grr", "RSFD-oue-z"]


def population(n: int, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """Correlated attributes with skewed marginals; their exact marginal frequencies."""
    gen = np.random.default_rng(seed)
    a = gen.choice(3, size=n, p=[0.6, 0.3, 0.1])
    b = (a + gen.choice(5, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])) % 5
    c = (gen.random(n) < 0.2 + 0.2 * (a == 0)).astype(np.int64)
    x = np.stack([a, b, c], axis=1)
    truth = [np.bincount(x[:, j], minlength=k) / n for j, k in enumerate(SIZES)]
    return x, truth


def true_variance(spec, n, truth):
    """The analytical variance of every cell at the true frequencies."""
    if isinstance(spec, RSFD):
        return np.concatenate([spec.cell_variance(j, n, f) for j, f in enumerate(truth)])
    if isinstance(spec, SPL):
        return np.concatenate([spec.oracle(j).variance(n, f) for j, f in enumerate(truth)])
    d = spec.attributes  # SMP: n / d reports per attribute in expectation, plus sampling
    m = n / d
    return np.concatenate(
        [
            d * spec.oracle(j).variance(n, f) + f * (1 - f) / m * (n - m) / (n - 1)
            for j, f in enumerate(truth)
        ]
    )


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_unbiased_z(make):
    n = 200_000
    x, truth = population(n)
    spec = make(1.0)
    est = spec.run(x, rng=1)
    z = (est.frequencies - np.concatenate(truth)) / np.sqrt(true_variance(spec, n, truth))
    assert np.abs(z).max() <= 5.0, z


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_unbiased_z_fails_for_a_wrong_epsilon(make):
    # The same reports estimated as if made at another budget: the z-test must catch it.
    n = 200_000
    x, truth = population(n)
    spec = make(1.0)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    other = make(1.3)
    from ldpkit import Stats

    est = other.estimate(Stats(other, stats.n, **stats.arrays))
    z = (est.frequencies - np.concatenate(truth)) / np.sqrt(true_variance(spec, n, truth))
    assert np.abs(z).max() > 6.0


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_variance_matches_the_formula(make):
    # 300 repetitions of n = 3000: the sample variance of every cell against the formula.
    n, reps = 3000, 300
    x, truth = population(n, seed=2)
    spec = make(2.0)
    gen = np.random.default_rng(5)
    ests = np.stack([spec.run(x, rng=gen).frequencies for _ in range(reps)])
    ratio = ests.var(axis=0, ddof=1) / true_variance(spec, n, truth)
    # SMP's formula uses E[n_j] = n/d; the realized n_j varies: 1/E[n_j] <= E[1/n_j] by 1/n_j
    lo, hi = variance_ratio_bounds(reps - 1, 1e-4 / ratio.size)
    assert lo <= ratio.min() and ratio.max() <= hi * (1.02 if isinstance(spec, SMP) else 1.0), ratio
    mean_z = (ests.mean(axis=0) - np.concatenate(truth)) / np.sqrt(
        true_variance(spec, n, truth) / reps
    )
    assert np.abs(mean_z).max() <= 5.0


def test_variance_check_fails_for_swapped_formula():
    # RS+FD[GRR]'s variance read with SMP's formula is far off: the ratio test catches it.
    n, reps = 3000, 200
    x, truth = population(n, seed=2)
    spec = RSFD(epsilon=2.0, domain_sizes=SIZES)
    smp = SMP(epsilon=2.0, domain_sizes=SIZES)
    gen = np.random.default_rng(5)
    ests = np.stack([spec.run(x, rng=gen).frequencies for _ in range(reps)])
    ratio = ests.var(axis=0, ddof=1) / true_variance(smp, n, truth)
    lo, hi = variance_ratio_bounds(reps - 1, 1e-4 / ratio.size)
    assert not (lo <= ratio.min() and ratio.max() <= hi)


@pytest.mark.parametrize("protocol", ["grr", "oue-z"])
def test_rsfd_privacy_closed_forms_match_the_matrix(protocol):
    spec = RSFD(epsilon=1.3, domain_sizes=(2, 3, 2), protocol=protocol)
    m = spec.transition_matrix()
    assert abs(privacy_loss(m) - spec.privacy_loss()) <= 1e-12
    assert abs(spec.privacy_loss() - 1.3) <= 1e-12  # the whole tuple: no amplification
    tuples = spec._tuples()
    one = (tuples[:, None, :] != tuples[None, :, :]).sum(axis=-1) == 1
    worst = max(float(np.log(m[a] / m[b]).max()) for a, b in zip(*np.nonzero(one), strict=True))
    assert abs(worst - spec.attribute_privacy_loss()) <= 1e-12
    assert spec.attribute_privacy_loss() < 1.3


def test_rsfd_from_attribute_epsilon_is_the_papers_budget():
    sizes = (4, 4, 4)
    for protocol in ("grr", "oue-z"):
        spec = RSFD.from_attribute_epsilon(1.0, domain_sizes=sizes, protocol=protocol)
        assert abs(spec.epsilon - np.log(3 * np.expm1(1.0) + 1)) <= 1e-12
        assert abs(spec.privacy_loss() - spec.epsilon) <= 1e-9
    # OUE-z: exactly the per-attribute budget; GRR with equal domains: exactly too
    oue = RSFD.from_attribute_epsilon(1.0, domain_sizes=sizes, protocol="oue-z")
    assert abs(oue.attribute_privacy_loss() - 1.0) <= 1e-9
    grr = RSFD.from_attribute_epsilon(1.0, domain_sizes=sizes)
    assert abs(grr.attribute_privacy_loss() - 1.0) <= 1e-9
    # GRR with unequal domains: the paper's formula overshoots its per-attribute claim
    uneven = RSFD.from_attribute_epsilon(1.0, domain_sizes=(3, 4))
    assert uneven.attribute_privacy_loss() > 1.02


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_privacy_loss_matches_the_matrix(make):
    spec = make(0.8)
    m = spec.transition_matrix()
    assert abs(privacy_loss(m) - spec.privacy_loss()) <= 1e-9
    assert spec.privacy_loss() <= 0.8 * (1 + 1e-12)


def test_spl_smp_attribute_estimates_are_grr_and_take_ibu():
    x, _truth = population(20_000)
    for spec in (SPL(epsilon=1.0, domain_sizes=SIZES), SMP(epsilon=1.0, domain_sizes=SIZES)):
        est = spec.estimate(spec.aggregate(spec.randomize(x, rng=0)))
        assert isinstance(est[0].spec, GRR)
        post = spec.estimate(spec.aggregate(spec.randomize(x, rng=0)), postprocess="ibu")
        for j in range(3):
            np.testing.assert_array_equal(post[j].frequencies, C.ibu(est[j]).frequencies)
            assert post[j].frequencies.min() >= 0 and abs(post[j].frequencies.sum() - 1) < 1e-9
        assert post.postprocessing == ("ibu",)


def test_rsfd_postprocess_and_frame():
    x, _truth = population(20_000)
    spec = RSFD(epsilon=1.0, domain_sizes=SIZES, protocol="oue-z")
    stats = spec.aggregate(spec.randomize(x, rng=0))
    out = spec.estimate(stats, postprocess="norm_sub")
    assert all(abs(e.frequencies.sum() - 1) < 1e-12 for e in out)
    with pytest.raises(ValueError, match="ibu needs an estimate from a pure frequency oracle"):
        spec.estimate(stats, postprocess="ibu")
    with pytest.raises(ValueError, match="postprocess must be None or one of"):
        spec.estimate(stats, postprocess="nope")
    frame = spec.estimate(stats).to_frame()
    assert list(frame.columns) == [
        "attribute",
        "item",
        "label",
        "estimate",
        "std_error",
        "low",
        "high",
    ]
    assert len(frame) == sum(SIZES) and (frame["low"] < frame["high"]).all()
    assert isinstance(spec.estimate(stats), MultiFrequencyEstimate)


def test_coverage_of_the_intervals():
    # 95% intervals over 200 repetitions x 10 cells: coverage within binomial noise of 95%
    n, reps = 2000, 200
    x, truth = population(n, seed=3)
    t = np.concatenate(truth)
    spec = SMP(epsilon=2.0, domain_sizes=SIZES)
    gen = np.random.default_rng(9)
    hits = np.zeros(t.size)
    for _ in range(reps):
        frame = spec.run(x, rng=gen).to_frame(0.05)
        hits += (frame["low"].to_numpy() <= t) & (t <= frame["high"].to_numpy())
    cover = hits.sum() / (reps * t.size)
    assert 0.93 <= cover <= 0.97, cover


def test_validation_messages():
    with pytest.raises(TypeError, match="domain_sizes must be a sequence"):
        SPL(epsilon=1.0, domain_sizes=5)
    with pytest.raises(ValueError, match="domain_sizes must hold 2 to"):
        SPL(epsilon=1.0, domain_sizes=(5,))
    with pytest.raises(ValueError, match=r"domain_sizes\[1\] must be"):
        SPL(epsilon=1.0, domain_sizes=(5, 1))
    with pytest.raises(ValueError, match="protocol must be 'grr' or 'oue-z'"):
        RSFD(epsilon=1.0, domain_sizes=(2, 2), protocol="oue")
    spec = SMP(epsilon=1.0, domain_sizes=(2, 3))
    with pytest.raises(ValueError, match="values must be an"):
        spec.randomize([[0, 3]], rng=0)
    with pytest.raises(TypeError, match="values must be an"):
        spec.randomize([[0.5, 1]], rng=0)
    from ldpkit import Stats

    lonely = Stats(spec, 1, counts=[1, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="at least one report of every attribute"):
        spec.estimate(lonely)
    assert SPL(epsilon=1.0, domain_sizes=[2, 3]).domain_sizes == (2, 3)
