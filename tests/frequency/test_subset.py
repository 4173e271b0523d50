"""SubsetSelection: exact constants against brute-force enumeration of the k-subset law,
sampler laws (chi-square, with power checks), the compiled Floyd kernel against a plain
Python reference, report validation, unbiasedness and variance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldpkit import GRR, SubsetSelection
from ldpkit.frequency._bits import pack_bits, unpack_bits
from ldpkit.frequency.subset import _colex_rank, _sample_subsets, default_subset_size
from ldpkit.privacy import privacy_loss
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof, variance_ratio_bounds

ALPHA = 1e-6


def subset_law(d: int, k: int, epsilon: float, v: int) -> tuple[np.ndarray, np.ndarray]:
    """All k-subsets (indicator rows, lexicographic) and P[S | v] ∝ e^eps if v in S else 1,
    straight from the definition."""
    combos = list(itertools.combinations(range(d), k))
    members = np.zeros((len(combos), d), dtype=bool)
    for row, combo in enumerate(combos):
        members[row, list(combo)] = True
    weights = np.where(members[:, v], math.exp(epsilon), 1.0)
    return members, weights / weights.sum()


def law_in_spec_order(spec: SubsetSelection, v: int, epsilon: float | None = None) -> np.ndarray:
    """The definition's law for input v, rearranged into the spec's output_index columns."""
    d, k = spec.domain_size, spec.effective_subset_size
    members, probs = subset_law(d, k, spec.epsilon if epsilon is None else epsilon, v)
    out = np.zeros(math.comb(d, k))
    out[_colex_rank(members, k)] = probs
    return out


# -- the subset size -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("epsilon", "d", "k"),
    [
        (1.0, 1024, 275),
        (1.0, 4, 1),
        (0.5, 33, 12),
        (0.1, 10, 5),
        (2.0, 64, 8),
        (8.0, 64, 1),
        (40.0, 10, 1),
    ],
)
def test_default_subset_size_table(epsilon, d, k):
    assert default_subset_size(epsilon, d) == k
    assert SubsetSelection(epsilon=epsilon, domain_size=d).effective_subset_size == k


def test_default_subset_size_is_rounded_optimum():
    for d in (2, 3, 7, 50, 333, 4096):
        for eps in np.linspace(0.05, 9.0, 37):
            k = default_subset_size(float(eps), d)
            assert k == max(1, math.floor(d / (math.exp(eps) + 1) + 0.5))
            assert 1 <= k <= d - 1


def test_subset_size_setting_and_validation():
    spec = SubsetSelection(epsilon=1.0, domain_size=8, subset_size=3)
    assert spec.effective_subset_size == 3
    assert spec.replace(epsilon=4.0).effective_subset_size == 3
    default = SubsetSelection(epsilon=0.1, domain_size=8)
    assert default.subset_size is None and default.effective_subset_size == 4
    assert default.replace(epsilon=3.0).effective_subset_size == 1  # follows epsilon
    assert default.to_dict()["params"]["subset_size"] is None
    for bad in (0, 8, -1):
        with pytest.raises(ValueError, match=r"subset_size must be an integer in \[1, 7\], got"):
            SubsetSelection(epsilon=1.0, domain_size=8, subset_size=bad)
    for bad in (2.0, True, "2"):
        with pytest.raises(TypeError, match="subset_size must be an integer"):
            SubsetSelection(epsilon=1.0, domain_size=8, subset_size=bad)


# -- exact constants ---------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d", [2, 3, 5, 7])
def test_p_and_q_against_enumeration(epsilon, d):
    for k in range(1, d):
        spec = SubsetSelection(epsilon=epsilon, domain_size=d, subset_size=k)
        for v in range(d):
            members, probs = subset_law(d, k, epsilon, v)
            support = probs @ members  # P[u in S | v] for every u
            assert support[v] == pytest.approx(spec.p, rel=1e-12)
            others = np.delete(support, v)
            np.testing.assert_allclose(others, spec.q, rtol=1e-12)
        e = math.exp(epsilon)
        assert spec.p == pytest.approx(k * e / (k * e + d - k), rel=1e-14)
        assert spec.q == pytest.approx((spec.p * (k - 1) + (1 - spec.p) * k) / (d - 1), rel=1e-12)
        assert spec.variance(1) == pytest.approx(
            spec.q * (1 - spec.q) / (spec.p - spec.q) ** 2, rel=1e-12
        )


def test_subset_size_one_is_grr():
    for eps, d in [(0.5, 2), (1.0, 9), (3.0, 40)]:
        spec = SubsetSelection(epsilon=eps, domain_size=d, subset_size=1)
        grr = GRR(epsilon=eps, domain_size=d)
        assert spec.p == pytest.approx(grr.p, rel=1e-14)
        assert spec.q == pytest.approx(grr.q, rel=1e-14)


def test_variance_at_real_optimum_is_below_olh():
    # CON20 section III: with k near d/(e+1), Var* is below OLH's 4e/(e-1)^2.
    for eps, d in [(1.0, 64), (2.0, 100), (0.5, 1024)]:
        e = math.exp(eps)
        assert SubsetSelection(epsilon=eps, domain_size=d).variance(1) < 4 * e / (e - 1) ** 2


def test_large_epsilon_constants_are_stable():
    spec = SubsetSelection(epsilon=30.0, domain_size=64, subset_size=5)
    assert 0 < 1 - spec.p < 1e-11 and np.isfinite(spec.variance(10))
    assert spec.privacy_loss() == pytest.approx(30.0, rel=1e-12)
    top = SubsetSelection(epsilon=40.0, domain_size=4, subset_size=2)
    assert 0 < top._p_out < 1e-15 and np.isfinite(top.q) and np.isfinite(top.variance(5))
    assert top.privacy_loss() == pytest.approx(40.0, rel=1e-12) and top.privacy_loss() <= 40.0
    # Beyond max_epsilon, or when k e^eps overflows the 2^62 integer total, the
    # exact coin cannot be built: refused with the limit.
    with pytest.raises(ValueError, match="epsilon must be"):
        SubsetSelection(epsilon=800.0, domain_size=4, subset_size=2)
    with pytest.raises(ValueError, match=r"epsilon must be <= 2\d\.\d+ for this configuration"):
        SubsetSelection(epsilon=39.0, domain_size=1 << 22, subset_size=1 << 21)


# -- exact law and privacy -----------------------------------------------------------------
def test_colex_rank_is_a_bijection():
    d = 7
    for k in range(1, d):
        members, _ = subset_law(d, k, 1.0, 0)
        ranks = _colex_rank(members, k)
        assert sorted(ranks.tolist()) == list(range(math.comb(d, k)))
        first = np.zeros((1, d), dtype=bool)
        first[0, :k] = True
        last = np.zeros((1, d), dtype=bool)
        last[0, d - k :] = True
        assert _colex_rank(first, k)[0] == 0 and _colex_rank(last, k)[0] == math.comb(d, k) - 1


@pytest.mark.parametrize(
    ("epsilon", "d", "k"), [(1.0, 5, 2), (0.4, 6, 3), (2.0, 6, 5), (1.3, 2, 1)]
)
def test_transition_matrix_is_the_law(epsilon, d, k):
    spec = SubsetSelection(epsilon=epsilon, domain_size=d, subset_size=k)
    matrix = spec.transition_matrix()
    assert matrix.shape == (d, math.comb(d, k))
    for v in range(d):
        np.testing.assert_allclose(matrix[v], law_in_spec_order(spec, v), rtol=1e-12)
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    assert privacy_loss(matrix) == pytest.approx(epsilon, rel=1e-12)
    assert spec.privacy_loss() == pytest.approx(epsilon, rel=1e-12)


def test_privacy_loss_without_matrix_and_matrix_size_limit():
    spec = SubsetSelection(epsilon=0.7, domain_size=1024)
    assert spec.privacy_loss() == pytest.approx(0.7, rel=1e-10)
    with pytest.raises(ValueError, match="transition_matrix must have at most"):
        spec.transition_matrix()


# -- sampler laws ---------------------------------------------------------------------------
def _output_histogram(spec: SubsetSelection, v: int, n: int, seed: int) -> np.ndarray:
    reports = spec.randomize(np.full(n, v), rng=seed)
    return np.bincount(
        spec.output_index(reports),
        minlength=math.comb(spec.domain_size, spec.effective_subset_size),
    )


# (6, 4) and (5, 4) take the complement path (non-members drawn), the others do not.
@pytest.mark.parametrize(
    ("epsilon", "d", "k"), [(1.0, 6, 2), (0.7, 6, 3), (1.0, 6, 4), (2.0, 5, 4), (1.5, 7, 3)]
)
def test_sampler_matches_law_for_every_input(epsilon, d, k):
    spec = SubsetSelection(epsilon=epsilon, domain_size=d, subset_size=k)
    n = 40_000
    for v in range(d):
        hist = _output_histogram(spec, v, n, seed=100 + v)
        p = chisquare_gof(hist, law_in_spec_order(spec, v))
        assert p > ALPHA, f"input {v}: chi-square p = {p:.2e}"


@pytest.mark.parametrize(("d", "k"), [(6, 2), (6, 4)])
def test_sampler_law_test_has_power(d, k):
    spec = SubsetSelection(epsilon=1.0, domain_size=d, subset_size=k)
    n = 40_000
    louder = spec.replace(epsilon=1.3)
    assert (
        chisquare_gof(_output_histogram(louder, 1, n, seed=7), law_in_spec_order(spec, 1)) < ALPHA
    )
    # "swapped": subsets missing v favoured instead of those holding it
    hist = _output_histogram(spec, 1, n, seed=8)
    assert chisquare_gof(hist, law_in_spec_order(spec, 1, epsilon=-1.0)) < ALPHA


@pytest.mark.parametrize(("d", "k"), [(1024, None), (1000, 700)])
def test_large_domain_marginals_and_pairs(d, k):
    """Several sampling chunks, padding bits (d = 1000), complement path (k = 700): each row
    is a k-subset, single-item marginals are Binomial(n, p)/(n, q), and pair inclusion
    P[a, b in S | v] = (p (k-1)(k-2) + (1-p) k (k-1)) / ((d-1)(d-2)) for a, b != v."""
    spec = SubsetSelection(epsilon=1.0, domain_size=d, subset_size=k)
    k = spec.effective_subset_size
    n, u = 40_000, 700 if d == 1024 else 3
    reports = spec.randomize(np.full(n, u), rng=21)
    members = unpack_bits(reports.bits, d).astype(bool)
    assert np.all(members.sum(axis=1) == k)
    counts = spec.support_counts(reports)
    probs = np.full(d, spec.q)
    probs[u] = spec.p
    limit = bonferroni_z(ALPHA, d + 4)
    assert np.max(np.abs(binomial_z(counts, n, probs))) < limit
    p = spec.p
    pair = (p * (k - 1) * (k - 2) + (1 - p) * k * (k - 1)) / ((d - 1) * (d - 2))
    for a, b in [(0, 1), (5, d - 1), (u - 1, u + 1), (d - 2, d - 1)]:
        both = int(np.sum(members[:, a] & members[:, b]))
        assert abs(binomial_z(both, n, pair)) < limit
    with_u = (p * (k - 1)) / (d - 1)  # P[u and a in S | u]
    both = int(np.sum(members[:, u] & members[:, 0]))
    assert abs(binomial_z(both, n, with_u)) < limit


def _reference_floyd(values, d, k, odds, gen):
    """Plain-Python Floyd per user, consuming the generator exactly as _sample_subsets."""
    c = len(values)
    included = gen.integers(0, odds[0] + odds[1], size=c, dtype=np.int64) < odds[0]
    others = d - 1
    complement = 2 * k > others + 1
    steps = others - k + 1 if complement else k
    draws = [gen.integers(0, others - steps + s + 1, size=c, dtype=np.int32) for s in range(steps)]
    rows = np.zeros((c, d), dtype=bool)
    for i, v in enumerate(values):
        short = (not included[i]) if complement else included[i]
        chosen: set[int] = set()
        for s in range(1 if short else 0, steps):
            j = others - steps + s
            t = int(draws[s][i])
            chosen.add(j if t in chosen else t)
        items = {t + (t >= v) for t in chosen}
        if complement:
            items = set(range(d)) - items - {v}
        if included[i]:
            items.add(int(v))
        rows[i, sorted(items)] = True
    return rows


@pytest.mark.parametrize(("d", "k"), [(9, 3), (9, 6), (13, 12), (20, 1)])
def test_kernel_matches_python_reference(d, k):
    values = np.random.default_rng(0).integers(0, d, 300)
    odds = SubsetSelection(epsilon=0.8, domain_size=d, subset_size=k)._odds_terms()
    out = np.zeros((300, (d + 7) // 8), dtype=np.uint8)
    _sample_subsets(values, d, k, odds, np.random.default_rng(5), out)
    expected = _reference_floyd(values, d, k, odds, np.random.default_rng(5))
    np.testing.assert_array_equal(unpack_bits(out, d).astype(bool), expected)
    np.testing.assert_array_equal(out, pack_bits(expected))


# -- aggregation and reports ----------------------------------------------------------------
def test_support_counts_and_report_validation():
    spec = SubsetSelection(epsilon=1.0, domain_size=10, subset_size=3)
    reports = spec.randomize(np.random.default_rng(1).integers(0, 10, 500), rng=2)
    assert reports.bits.shape == (500, 2) and reports.bits.dtype == np.uint8
    members = unpack_bits(reports.bits, 10)
    np.testing.assert_array_equal(spec.support_counts(reports), members.sum(axis=0))
    np.testing.assert_array_equal(spec.aggregate(reports).counts, members.sum(axis=0))
    bad = members.copy()
    bad[0, :] = 0
    bad[0, :4] = 1  # 4 bits set
    bad[1, :] = 0
    bad[1, :2] = 1  # 2 bits set: the total still matches, the per-row check must catch it
    from ldpkit import Reports

    with pytest.raises(ValueError, match="exactly 3 bits set"):
        spec.support_counts(Reports(spec, bits=pack_bits(bad)))
    padded = reports.bits.copy()
    padded[0, 1] |= 1  # a padding bit after item 9
    with pytest.raises(ValueError, match="padding"):
        spec.support_counts(Reports(spec, bits=padded))
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        spec.support_counts(Reports(spec, bits=np.zeros((3, 3), dtype=np.uint8)))


# -- estimation ----------------------------------------------------------------------------
def test_unbiased_with_custom_subset_size():
    d, n = 40, 200_000
    spec = SubsetSelection(epsilon=0.5, domain_size=d, subset_size=11)
    w = 1.0 / np.arange(1, d + 1)
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    truth = counts / n
    values = np.random.default_rng(3).permutation(np.repeat(np.arange(d), counts))
    est = spec.run(values, rng=4)
    z = (est.frequencies - truth) / np.sqrt(spec.variance(n, truth))
    assert np.max(np.abs(z)) < 6, f"max |z| = {np.max(np.abs(z)):.2f}"


def test_variance_matches_formula():
    d, n, runs = 12, 2_000, 300
    spec = SubsetSelection(epsilon=0.5, domain_size=d, subset_size=4)
    values = np.repeat(np.arange(d), [600, 400, 300, 200, 150, 100, 80, 60, 50, 30, 20, 10])
    truth = np.bincount(values, minlength=d) / n
    freqs = np.array(
        [spec.run(values, rng=g).frequencies for g in np.random.default_rng(9).spawn(runs)]
    )
    lo, hi = variance_ratio_bounds(runs - 1, ALPHA / d)
    ratio = freqs.var(axis=0, ddof=1) / spec.variance(n, truth)
    assert np.all((ratio > lo) & (ratio < hi)), f"variance ratios {np.round(ratio, 3)}"
    z = (freqs.mean(axis=0) - truth) / np.sqrt(spec.variance(n, truth) / runs)
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, d)
