"""L-GRR, L-OUE, L-OSUE, L-SUE, L-SOUE: exact laws, losses, unbiasedness."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit.longitudinal import LGRR, LOSUE, LOUE, LSOUE, LSUE
from ldpkit.testing import chisquare_gof

ALL = [LGRR, LOUE, LOSUE, LSUE, LSOUE]
UNARY = [LOUE, LOSUE, LSUE, LSOUE]


def _paper_rounds(cls, eps_inf, eps_1, d):
    """(p1, q1, p2, q2) from the papers' closed forms (floats, computed independently)."""
    a, b = math.exp(eps_inf), math.exp(eps_1)
    if cls is LGRR:
        p1 = a / (a + d - 1)
        q1 = (1 - p1) / (d - 1)
        # one report's ratio (p1 g + 1 - p1) / (q1 g + 1 - q1) = e^eps_1, g = p2 / q2
        g = (b * (1 - q1) - (1 - p1)) / (p1 - b * q1)
        return p1, q1, g / (g + d - 1), 1 / (g + d - 1)
    if cls in (LOUE, LOSUE):
        p1, q1 = 0.5, 1 / (a + 1)
    else:
        p1 = math.exp(eps_inf / 2) / (math.exp(eps_inf / 2) + 1)
        q1 = 1 - p1
    if cls is LOSUE:  # Arcolezi et al.'s closed form for the SUE second round
        p2 = (1 - a * b) / (b - a - a * b + 1)
        return p1, q1, p2, 1 - p2

    # otherwise solve the one free parameter by bisection on floats
    def loss(p2, q2):
        ps, qs = p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2
        return math.log(ps * (1 - qs) / (qs * (1 - ps)))

    if cls in (LOUE, LSOUE):
        lo, hi = 1e-300, 0.5
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if loss(0.5, mid) <= eps_1 else (mid, hi)
        return p1, q1, 0.5, hi
    lo, hi = 0.5, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if loss(mid, 1 - mid) <= eps_1 else (lo, mid)
    return p1, q1, lo, 1 - lo


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize(("eps_inf", "eps_1"), [(2.0, 1.0), (1.0, 0.3), (5.0, 2.0)])
def test_rounds_match_the_papers_closed_forms(cls, eps_inf, eps_1):
    spec = cls(epsilon_inf=eps_inf, epsilon_1=eps_1, domain_size=16)
    p1, q1, p2, q2 = _paper_rounds(cls, eps_inf, eps_1, 16)
    if cls is LGRR:
        assert spec.permanent_matrix()[0, 0] == pytest.approx(p1, rel=1e-12)
        assert spec.instantaneous_matrix()[0, 0] == pytest.approx(p2, rel=1e-9)
        assert spec.instantaneous_matrix()[0, 1] == pytest.approx(q2, rel=1e-9)
    else:
        assert (spec.p1, spec.q1) == (pytest.approx(p1, rel=1e-12), pytest.approx(q1, rel=1e-12))
        assert (spec.p2, spec.q2) == (pytest.approx(p2, rel=1e-9), pytest.approx(q2, rel=1e-9))
    assert spec.p == pytest.approx(p1 * p2 + (1 - p1) * q2, rel=1e-9)
    assert spec.q == pytest.approx(q1 * p2 + (1 - q1) * q2, rel=1e-9)
    # both losses from the realized probabilities: tight, never above the budgets
    assert eps_1 - 1e-9 <= spec.privacy_loss() <= eps_1
    assert eps_inf - 1e-7 <= spec.longitudinal_privacy_loss() <= eps_inf
    assert spec.longitudinal_privacy_loss(3) == pytest.approx(3 * spec.longitudinal_privacy_loss())
    assert spec.change_privacy_loss() == spec.longitudinal_privacy_loss(1)


def test_constructor_names():
    a = LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=8)
    assert a == LOSUE(epsilon_inf=2.0, epsilon=1.0, domain_size=8)
    assert a.epsilon_1 == a.epsilon == 1.0
    assert LGRR(epsilon=1.0, domain_size=4).epsilon_inf == 3.0  # the documented default
    with pytest.raises(TypeError, match="epsilon_1 and epsilon are one parameter"):
        LGRR(epsilon=1.0, epsilon_1=1.0, domain_size=4)
    with pytest.raises(TypeError, match="needs epsilon_1"):
        LGRR(domain_size=4, epsilon_inf=2.0)
    with pytest.raises(TypeError, match="parameters must be among"):
        LGRR(epsilon=1.0, domain_size=4, k=3)
    with pytest.raises(ValueError, match=r"epsilon \(epsilon_1\) must be < epsilon_inf"):
        LGRR(epsilon_inf=1.0, epsilon_1=1.0, domain_size=4)
    with pytest.raises(ValueError, match=r"epsilon \(epsilon_1\) must be < 1.3"):
        LSOUE(epsilon_inf=2.0, epsilon_1=1.5, domain_size=4)
    with pytest.raises(ValueError, match="epsilon_inf must be"):
        LOUE(epsilon_inf=-1.0, epsilon_1=0.5, domain_size=4)


@pytest.mark.parametrize("cls", ALL)
def test_sampler_law_is_the_chained_matrix(cls):
    d = 4 if cls is not LGRR else 6
    spec = cls(epsilon_inf=2.0, epsilon_1=0.8, domain_size=d)
    matrix = spec.transition_matrix()
    for v in (0, d - 1):
        reports = spec.randomize(np.full(20_000, v), rng=v + 11)
        counts = np.bincount(spec.output_index(reports), minlength=matrix.shape[1])
        assert chisquare_gof(counts, matrix[v]) > 1e-4


@pytest.mark.parametrize("cls", [LOUE, LOSUE, LSUE, LSOUE])
def test_two_rounds_and_the_direct_draw_have_one_law(cls):
    # randomize draws the chained law in one pass; the device's path draws both rounds
    spec = cls(epsilon_inf=2.0, epsilon_1=0.8, domain_size=4)
    matrix = spec.transition_matrix()
    gen = np.random.default_rng(3)
    values = np.full(20_000, 1)
    two = spec._instantaneous_round(spec._permanent_round(values, gen), gen)
    counts = np.bincount(spec.output_index(two), minlength=matrix.shape[1])
    assert chisquare_gof(counts, matrix[1]) > 1e-4
    # the same check tells a wrong law apart: the value's row is not another value's
    assert chisquare_gof(counts, matrix[2]) < 1e-6


@pytest.mark.parametrize(("cls", "d"), [(LOUE, 4), (LSOUE, 3), (LOSUE, 16), (LSUE, 32)])
def test_rows_sharing_a_word_are_independent(cls, d):
    # randomize packs several users' bits into one 64-lane word (8 rows at d <= 8, 4 at
    # d = 16, 2 at d = 32): neighbours' reports must be independent, each with its value's law
    spec = cls(epsilon_inf=2.0, epsilon_1=0.8, domain_size=d)
    pairs = 30_000
    values = np.tile([0, d - 1], pairs)
    bits = np.unpackbits(spec.randomize(values, rng=5).bits, axis=1, count=d)
    if d > 4:  # the joint law of two reports' first two bits (and of the values' bits)
        bits = bits[:, [0, d - 1]]
        law = [np.array([1 - p, p]) for p in (spec.p, spec.q, spec.q, spec.p)]
        row = [np.kron(law[0], law[1]), np.kron(law[2], law[3])]
    else:
        m = spec.transition_matrix()
        row = [m[0], m[d - 1]]
    index = bits @ (1 << np.arange(bits.shape[1] - 1, -1, -1))
    joint = index[0::2] * row[1].size + index[1::2]
    observed = np.bincount(joint, minlength=row[0].size * row[1].size)
    assert chisquare_gof(observed, np.outer(row[0], row[1]).ravel()) > 1e-4
    # the same check tells swapped values apart (first report of value d - 1, second of 0)
    assert chisquare_gof(observed, np.outer(row[1], row[0]).ravel()) < 1e-6


@pytest.mark.parametrize("cls", ALL)
def test_permanent_round_law(cls):
    spec = cls(epsilon_inf=1.5, epsilon_1=0.5, domain_size=5)
    gen = np.random.default_rng(5)
    perm = spec._permanent_round(np.full(20_000, 2), gen)
    if cls is LGRR:
        counts = np.bincount(perm, minlength=5)
        assert chisquare_gof(counts, spec.permanent_matrix()[2]) > 1e-4
    else:
        ones = np.unpackbits(perm, axis=1, count=5).sum(axis=0)
        z = (ones - 20_000 * np.array([spec.q1, spec.q1, spec.p1, spec.q1, spec.q1])) / np.sqrt(
            20_000 * 0.25
        )
        assert np.all(np.abs(z) < 5)


def _z_scores(spec, truth_items, seed, est_spec=None):
    """z of every item's estimate against the true frequencies (variance of eq. 2)."""
    n = truth_items.size
    stats = spec.aggregate(spec.randomize(truth_items, rng=seed))
    f = np.bincount(truth_items, minlength=spec.domain_size) / n
    e = est_spec or spec
    freq = (stats.counts / n - e.q) / (e.p - e.q)
    return (freq - f) / np.sqrt(spec.variance(n, f))


@pytest.mark.parametrize("cls", ALL)
def test_unbiased_with_the_papers_variance(cls):
    d, n = 8, 200_000
    items = np.random.default_rng(1).choice(d, size=n, p=np.linspace(1, 3, d) / 16)
    spec = cls(epsilon_inf=2.0, epsilon_1=0.7, domain_size=d)
    z = _z_scores(spec, items, seed=2)
    assert np.max(np.abs(z)) < 5
    est = spec.estimate(spec.aggregate(spec.randomize(items, rng=3)))
    assert np.max(np.abs(est.frequencies - np.bincount(items, minlength=d) / n)) < 5 * np.max(
        est.std_error
    )


@pytest.mark.parametrize("cls", ALL)
def test_the_z_test_fails_for_a_wrong_budget(cls):
    d, n = 8, 200_000
    items = np.random.default_rng(1).choice(d, size=n, p=np.linspace(1, 3, d) / 16)
    spec = cls(epsilon_inf=2.0, epsilon_1=0.7, domain_size=d)
    wrong = cls(epsilon_inf=2.0, epsilon_1=0.55, domain_size=d)
    z = _z_scores(spec, items, seed=2, est_spec=wrong)
    assert np.max(np.abs(z)) > 6, wrong


def _rounds(spec):
    if isinstance(spec, LGRR):
        m1, m2 = spec.permanent_matrix(), spec.instantaneous_matrix()
        return m1[0, 0], m2[0, 0], m2[0, 1]
    return spec.p1, spec.p2, spec.q2


def _pair_z(spec, model, n=200_000, seed=4):
    """z of the number of devices whose two memoized reports both support their value v,
    against ``model``'s ``p1 p2^2 + (1 - p1) q2^2``: the law of repeated reports, where
    epsilon_inf shows (one report's law depends on epsilon_1 and d only for L-GRR)."""
    gen = np.random.default_rng(seed)
    v = gen.integers(0, spec.domain_size, n)
    perm = spec._permanent_round(v, gen)
    both = np.ones(n, dtype=bool)
    for _ in range(2):
        r = spec._instantaneous_round(perm, gen)
        if isinstance(spec, LGRR):
            both &= r.values == v
        else:
            both &= np.unpackbits(r.bits, axis=1, count=spec.domain_size)[np.arange(n), v] == 1
    p1, p2, q2 = _rounds(model)
    prob = p1 * p2**2 + (1 - p1) * q2**2
    return (both.sum() - n * prob) / math.sqrt(n * prob * (1 - prob))


@pytest.mark.parametrize("cls", ALL)
def test_memoized_pairs_identify_epsilon_inf(cls):
    spec = cls(epsilon_inf=2.0, epsilon_1=0.7, domain_size=8)
    assert abs(_pair_z(spec, spec)) < 5
    wrong = cls(epsilon_inf=3.0, epsilon_1=0.7, domain_size=8)
    assert abs(_pair_z(spec, wrong)) > 6


@pytest.mark.parametrize("cls", [LGRR, LOSUE])
def test_empirical_variance_matches(cls):
    d, n, reps = 6, 2_000, 300
    spec = cls(epsilon_inf=2.0, epsilon_1=1.0, domain_size=d)
    items = np.arange(n) % d
    f = np.full(d, 1 / d)
    gen = np.random.default_rng(9)
    est = np.array(
        [
            spec.estimate(spec.aggregate(spec.randomize(items, rng=gen))).frequencies
            for _ in range(reps)
        ]
    )
    ratio = est.var(axis=0, ddof=1).mean() / spec.variance(n, f).mean()
    # 6 items x 299 dof, pooled: ratio within ~ +-4 sd of 1 (sd ~ sqrt(2 / 1794) = 0.033)
    assert 0.85 < ratio < 1.15


@pytest.mark.parametrize("cls", ALL)
def test_estimate_postprocess_norm_mul_is_the_clipped_renormalized_estimate(cls):
    # multi-freq-ldpy's longitudinal "MI" aggregators clip at 0 and renormalize: offered as
    # an option of estimate(); the default stays the unbiased estimate
    spec = cls(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    values = np.random.default_rng(6).integers(0, 3, 500)
    stats = spec.aggregate(spec.randomize(values, rng=7))
    plain = spec.estimate(stats)
    assert plain.unbiased and plain.frequencies.min() < 0
    out = spec.estimate(stats, postprocess="norm_mul")
    clipped = np.maximum(plain.frequencies, 0.0)
    np.testing.assert_array_equal(out.frequencies, clipped / clipped.sum())
    assert out.postprocessing == ("norm_mul",) and not out.unbiased


@pytest.mark.parametrize("d", [2, 5, 32, 64, 65, 300])
@pytest.mark.parametrize("n", [1, 2, 7, 1001, 65539])  # 65539: several blocks of pairs
def test_lgrr_support_counts_equal_grr_counts(d, n):
    from ldpkit.frequency.grr import OneItemReports

    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=d)
    values = np.random.default_rng(d * 1000 + n).integers(0, d, n)
    reports = spec.randomize(values, rng=n)
    counts = spec.support_counts(reports)
    assert counts.dtype == np.int64 and counts.shape == (d,)
    np.testing.assert_array_equal(counts, np.bincount(reports.values, minlength=d))
    np.testing.assert_array_equal(counts, OneItemReports.support_counts(spec, reports))


def test_lgrr_support_counts_refuse_items_past_the_domain():
    from ldpkit import Reports

    spec = LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=32)
    # 1 * 32 + 0 would alias the pair (1, 0) were 32 not refused
    bad = Reports(spec, values=np.array([0, 32, 1, 0], dtype=np.uint8))
    with pytest.raises(ValueError, match=r"reports.values must be items in \[0, 32\)"):
        spec.support_counts(bad)
