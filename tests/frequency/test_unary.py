"""Unary encoding (SUE, OUE): exact constants, the compiled sampler's law, aggregation."""

from __future__ import annotations

import math
import multiprocessing

import numpy as np
import pytest
from scipy import stats as sps

from ldpkit import OUE, SUE, Reports, privacy_loss
from ldpkit.frequency import _bits, _kernels_unary
from ldpkit.frequency._kernels_unary import (
    packed_column_counts,
    sample_unary_bits,
    xoshiro_uint64,
)
from ldpkit.frequency.unary import (
    PROBABILITY_SCALE,
    _reference_bits,
    unary_integer_probabilities,
    unary_privacy_loss,
)
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof

ALPHA = 1e-6
EPSILONS = [0.5, 1.0, 2.0, 4.0]
MASK64 = (1 << 64) - 1


# -- exact constants ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("epsilon", "sue", "oue"),
    [(0.5, 15.92, 15.67), (1.0, 3.92, 3.68), (2.0, 0.92, 0.72), (4.0, 0.18, 0.08)],
)
def test_fo17_table2(epsilon, sue, oue):
    n = 10_000
    assert round(n * SUE(epsilon=epsilon, domain_size=64).variance(n), 2) == sue
    assert round(n * OUE(epsilon=epsilon, domain_size=64).variance(n), 2) == oue
    # and the closed forms (FO17 section 4.3) at the nominal probabilities
    h = math.exp(epsilon / 2)
    assert round(h / (h - 1) ** 2, 2) == sue
    e = math.exp(epsilon)
    assert round(4 * e / (e - 1) ** 2, 2) == oue


@pytest.mark.parametrize("cls", [SUE, OUE])
@pytest.mark.parametrize("epsilon", [1e-6, 0.01, *EPSILONS, 8.0, 16.0])
def test_realized_probabilities_round_towards_privacy(cls, epsilon):
    spec = cls(epsilon=epsilon, domain_size=16)
    big, small = spec._thresholds()  # the sampler's integer thresholds (multiples of 2^-64)
    assert 0 < small < big < PROBABILITY_SCALE
    assert spec.p == big / PROBABILITY_SCALE and spec.q == small / PROBABILITY_SCALE
    # p rounds down and q up; the privacy repair may raise T_q by a few ulps of q more
    assert big == math.floor(spec.nominal_p * PROBABILITY_SCALE)
    assert math.ceil(spec.nominal_q * PROBABILITY_SCALE) <= small
    # (p near 1 holds 1 - p only to ~1e-16 / q relative, which the repair absorbs in T_q)
    assert small <= spec.nominal_q * PROBABILITY_SCALE * (1 + 1e-11) + 1
    loss = spec.privacy_loss()
    p, q = spec.p, spec.q
    assert loss == pytest.approx(math.log(p * (1 - q) / (q * (1 - p))), rel=1e-12)
    assert loss <= epsilon
    # the shortfall is the 4-ulp safety margin plus two 2^-64 roundings, first order
    shortfall = 2.0**-64 * (1 / p + 1 / (1 - p) + 1 / q + 1 / (1 - q))
    assert epsilon - loss <= 1.01 * shortfall + 8 * math.ulp(epsilon) + 1e-15


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_privacy_loss_within_1e8_of_epsilon(epsilon):
    for cls in (SUE, OUE):
        assert 0 <= epsilon - cls(epsilon=epsilon, domain_size=8).privacy_loss() < 1e-8
    assert OUE(epsilon=epsilon, domain_size=8).p == 0.5
    sue = SUE(epsilon=epsilon, domain_size=8)
    assert sue.p + sue.q == pytest.approx(1.0, rel=0, abs=1e-14)


@pytest.mark.parametrize(("cls", "top"), [(SUE, 50.0), (OUE, 30.0)])
def test_largest_accepted_epsilon_is_realized_and_beyond_is_refused(cls, top):
    # At 2^-32 resolution OUE(epsilon=500) once spent only 22.2 while claiming
    # 500. Now the sampler's 2^-64 grid realizes epsilon up to max_epsilon, and beyond it
    # the spec refuses instead of silently spending less.
    spec = cls(epsilon=top, domain_size=8)
    assert cls.max_epsilon == top
    assert 0 < spec.q < spec.p < 1
    assert 0 <= top - spec.privacy_loss() <= 1e-6 * top
    for eps in (top * 1.01, 500.0):
        with pytest.raises(
            ValueError, match=f"epsilon must be a finite number >= 1e-06 and <= {top:g}"
        ):
            cls(epsilon=eps, domain_size=8)


def test_thresholds_repair_an_overspending_pair():
    # p = 0.6 with OUE's q at epsilon 1 would spend ~1.4: T_q must rise to fit epsilon.
    big, small = unary_integer_probabilities(0.6, 1 / (math.e + 1), 1.0)
    assert unary_privacy_loss(big, small) <= 1.0
    assert unary_privacy_loss(big, small - 1) > 1.0 - 4 * 2.0**-52
    assert big == math.floor(0.6 * 2.0**64)
    assert small / 2.0**64 == pytest.approx(0.6 / (0.6 + 0.4 * math.e), rel=1e-8)


def test_tiny_epsilon_rejected():
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        OUE(epsilon=1e-12, domain_size=4)
    with pytest.raises(ValueError, match="epsilon must be large enough"):
        unary_integer_probabilities(0.5, 0.5 - 1e-20, 1e-19)


@pytest.mark.parametrize("cls", [SUE, OUE])
def test_transition_matrix_and_closed_form_loss(cls):
    spec = cls(epsilon=1.3, domain_size=6)
    m = spec.transition_matrix()
    assert m.shape == (6, 64)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
    assert privacy_loss(m) == pytest.approx(spec.privacy_loss(), rel=1e-10)
    # column y = 0b100000 (only item 0's bit set) under input 0: p (1-q)^5
    assert m[0, 0b100000] == pytest.approx(spec.p * (1 - spec.q) ** 5, rel=1e-12)
    big = cls(epsilon=1.0, domain_size=13)
    with pytest.raises(NotImplementedError, match="domain_size <= 12"):
        big.transition_matrix()
    with pytest.raises(NotImplementedError, match="domain_size <= 12"):
        big.output_index(big.randomize([0], rng=0))


def test_output_index_reads_bits_item0_first():
    spec = OUE(epsilon=1.0, domain_size=10)
    bits = np.zeros((3, 10), dtype=bool)
    bits[0, 0] = True
    bits[1, 9] = True
    bits[2, [0, 8, 9]] = True
    reports = Reports(spec, bits=_bits.pack_bits(bits))
    np.testing.assert_array_equal(spec.output_index(reports), [512, 1, 512 + 2 + 1])


# -- generator --------------------------------------------------------------------------------
def _splitmix64(x: int) -> tuple[int, int]:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return x, z ^ (z >> 31)


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK64


def _xoshiro_python(seed: int, count: int) -> list[int]:
    s = []
    x = seed
    for _ in range(4):
        x, out = _splitmix64(x)
        s.append(out)
    result = []
    for _ in range(count):
        result.append((_rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64)
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
    return result


def test_generator_is_xoshiro256starstar_seeded_by_splitmix64():
    assert _splitmix64(0)[1] == 0xE220A8397B1DCDAF  # published first splitmix64 output
    for seed in (0, 1, 0xDEADBEEF, MASK64):
        got = xoshiro_uint64(np.uint64(seed), 12)
        assert [int(x) for x in got] == _xoshiro_python(seed, 12)


# -- the sampler's law --------------------------------------------------------------------------
def _kernel(values, d, big, small, seed):
    values = np.asarray(values, dtype=np.int64)
    seeds = np.random.default_rng(seed).integers(0, 2**64, size=values.size, dtype=np.uint64)
    out = np.empty((values.size, _bits.packed_width(d)), dtype=np.uint8)
    sample_unary_bits(values, seeds, d, np.uint64(big), np.uint64(small), out)
    return out


def test_deterministic_threshold_edges():
    d = 70
    values = np.arange(200) % d
    zero = _kernel(values, d, 0, 0, seed=1)
    assert not zero.any()
    only_true = _kernel(values, d, PROBABILITY_SCALE - 1, 0, seed=2)
    np.testing.assert_array_equal(
        _bits.unpack_bits(only_true, d), np.eye(d, dtype=np.uint8)[values]
    )


@pytest.mark.parametrize(
    "threshold",
    [
        0x0000FFFF_FFFFFFFF,
        0x5A5A5A5A_5A5A5A5A,
        0xA5A5A5A5_A5A5A5A5,
        0xFFFF0000_00000000,
        0x80000000_0000FFFF,
        PROBABILITY_SCALE // 3,
    ],
)
def test_kernel_marginals_are_exact(threshold):
    """Every non-true bit is 1 w.p. T / 2^64 exactly, T chosen so that a bug in the high or
    in the low bits of the bit-sliced comparison would show (a bug in bits below ~2^-20
    changes probabilities by too little for any sample to see: the exact-threshold edge
    cases are checked in test_deterministic_threshold_edges)."""
    d, n = 130, 200_000  # three 64-lane words per row, the last one partial
    values = np.zeros(n, dtype=np.int64)
    packed = _kernel(values, d, PROBABILITY_SCALE // 2, threshold, seed=3)
    _bits.check_packed(packed, d)  # padding bits are zero
    counts = packed_column_counts(packed, d)
    prob = threshold / PROBABILITY_SCALE
    z = binomial_z(counts[1:], n, np.full(d - 1, prob))
    total_z = binomial_z(counts[1:].sum(), n * (d - 1), prob)
    limit = bonferroni_z(ALPHA, d)
    assert np.max(np.abs(z)) < limit and abs(total_z) < limit, (np.max(np.abs(z)), total_z)
    assert abs(binomial_z(counts[0], n, 0.5)) < limit
    # the same counts reject a threshold off by half in its low 48 bits
    if threshold == 0x0000FFFF_FFFFFFFF:
        assert abs(binomial_z(counts[1:].sum(), n * (d - 1), prob * 1.5)) > limit


@pytest.mark.parametrize("cls", [SUE, OUE])
def test_sampler_matches_realized_law_and_rejects_wrong_ones(cls):
    d, n = 5, 100_000
    spec = cls(epsilon=1.0, domain_size=d)
    m = spec.transition_matrix()
    hist = np.bincount(spec.output_index(spec.randomize(np.full(n, 2), rng=4)), minlength=2**d)
    assert chisquare_gof(hist, m[2]) > ALPHA
    louder = spec.replace(epsilon=1.3).transition_matrix()
    assert chisquare_gof(hist, louder[2]) < ALPHA
    bits = (np.arange(2**d)[:, None] >> (d - 1 - np.arange(d))) & 1
    probs = np.full(d, spec.p)  # p and q swapped
    probs[2] = spec.q
    swapped_row = np.prod(np.where(bits == 1, probs, 1 - probs), axis=1)
    assert chisquare_gof(hist, swapped_row) < ALPHA


def test_kernel_law_equals_numpy_reference():
    d, n = 6, 120_000
    spec = OUE(epsilon=0.8, domain_size=d)
    big, small = spec._thresholds()
    values = np.full(n, 4, dtype=np.int64)
    ref = _reference_bits(values, d, big, small, np.random.default_rng(5))
    ker = _kernel(values, d, big, small, seed=6)
    reports = [Reports(spec, bits=x) for x in (ref, ker)]
    hists = [np.bincount(spec.output_index(r), minlength=2**d) for r in reports]
    row = spec.transition_matrix()[4]
    assert chisquare_gof(hists[0], row) > ALPHA  # the reference itself is right
    assert chisquare_gof(hists[1], row) > ALPHA
    keep = (hists[0] + hists[1]) > 0
    pval = sps.chi2_contingency(np.array(hists)[:, keep])[1]
    assert pval > ALPHA, f"kernel and reference differ: p = {pval:.2e}"


def test_bits_are_independent():
    """Joint of two non-true bits (in different 64-lane words) and of the true bit with a
    non-true one equal the products of the marginals."""
    d, n = 100, 300_000
    spec = SUE(epsilon=2.0, domain_size=d)
    bits = _bits.unpack_bits(spec.randomize(np.full(n, 70), rng=7).bits, d)
    p, q = spec.p, spec.q
    for a, b, pa, pb in ((3, 64, q, q), (63, 64, q, q), (70, 71, p, q), (0, 99, q, q)):
        joint = np.bincount(2 * bits[:, a] + bits[:, b], minlength=4)
        expected = np.array([(1 - pa) * (1 - pb), (1 - pa) * pb, pa * (1 - pb), pa * pb])
        assert chisquare_gof(joint, expected) > ALPHA, (a, b)
    # a dependent pair would be caught: bit 3 against a copy of itself
    joint = np.bincount(2 * bits[:, 3] + bits[:, 3], minlength=4)
    assert chisquare_gof(joint, np.array([(1 - q) ** 2, (1 - q) * q, q * (1 - q), q * q])) < ALPHA


# -- determinism --------------------------------------------------------------------------------
def test_same_seed_same_reports_regardless_of_threads(monkeypatch):
    spec = OUE(epsilon=1.0, domain_size=300)
    values = np.random.default_rng(0).integers(0, 300, 40_000)
    monkeypatch.setattr(_kernels_unary, "WORKERS", 3)
    a = spec.randomize(values, rng=123)
    assert len(_kernels_unary._row_blocks(values.size)) == 3  # really split over threads
    monkeypatch.setattr(_kernels_unary, "WORKERS", 1)
    b = spec.randomize(values, rng=123)
    np.testing.assert_array_equal(a.bits, b.bits)
    assert not np.array_equal(a.bits, spec.randomize(values, rng=124).bits)
    counts = [_kernels_unary.packed_column_counts(a.bits, 300, workers=w) for w in (1, 2, 4)]
    np.testing.assert_array_equal(counts[0], counts[1])
    np.testing.assert_array_equal(counts[0], counts[2])
    np.testing.assert_array_equal(counts[0], _bits.unpack_bits(a.bits, 300).sum(axis=0))


def _child_counts(seed: int) -> np.ndarray:
    spec = OUE(epsilon=1.0, domain_size=64)
    return spec.support_counts(spec.randomize(np.arange(20_000) % 64, rng=seed))


def test_kernels_survive_fork():
    """Kernels used before a fork() keep working in the children (numba's OpenMP layer
    would terminate them) and give the same results as in the parent."""
    expected = [_child_counts(seed) for seed in (1, 2)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map_async(_child_counts, [1, 2]).get(timeout=120)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_array_equal(e, g)


def test_rows_depend_only_on_their_seed():
    spec = SUE(epsilon=1.0, domain_size=77)
    values = np.arange(1000) % 77
    seeds = np.random.default_rng(1).integers(0, 2**64, size=1000, dtype=np.uint64)
    whole = spec._sample(values, seeds)
    np.testing.assert_array_equal(spec._sample(values[300:420], seeds[300:420]), whole[300:420])


# -- aggregation --------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "d"), [(0, 9), (1, 8), (7, 3), (5000, 17), (20_000, 130)])
def test_column_counts_match_unpacked_sum(n, d):
    bits = np.random.default_rng(n + d).random((n, d)) < 0.3
    packed = _bits.pack_bits(bits)
    np.testing.assert_array_equal(_bits.column_counts(packed, d), bits.sum(axis=0))


def test_support_counts_validate_reports():
    spec = OUE(epsilon=1.0, domain_size=10)
    good = spec.randomize([1, 2, 3], rng=0)
    assert spec.support_counts(good).shape == (10,)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        spec.aggregate(Reports(spec, bits=np.zeros((3, 3), dtype=np.uint8)))
    with pytest.raises(ValueError, match="uint8"):
        spec.aggregate(Reports(spec, bits=np.zeros((3, 2), dtype=np.int64)))
    with pytest.raises(ValueError, match="padding"):
        spec.aggregate(Reports(spec, bits=np.full((3, 2), 0xFF, dtype=np.uint8)))


def test_unbiased_at_large_domain():
    d, n = 1024, 100_000
    spec = OUE(epsilon=1.0, domain_size=d)
    rng = np.random.default_rng(8)
    truth = rng.dirichlet(np.full(d, 0.1))
    values = rng.choice(d, size=n, p=truth)
    freq_true = np.bincount(values, minlength=d) / n
    est = spec.run(values, rng=9)
    z = (est.frequencies - freq_true) / np.sqrt(spec.variance(n, freq_true))
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, d)
