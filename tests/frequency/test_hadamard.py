"""fwht, Hadamard response and HRR: the transform against an explicit matrix, exact p*/q*
by enumeration of the definitions, sampler laws (chi-square, with power checks),
HR's side-fixing sampler, estimators against brute force, unbiasedness and variance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import hadamard

from ldpkit import HRR, HadamardResponse, Reports
from ldpkit.frequency import fwht
from ldpkit.frequency.hadamard import hadamard_sign, hrr_perturb_signs, hrr_signed_sums
from ldpkit.privacy import privacy_loss
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof, variance_ratio_bounds

ALPHA = 1e-6


# -- the transform --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 64, 256])
def test_fwht_matches_explicit_matrix(size):
    h = hadamard(size)
    rng = np.random.default_rng(size)
    x = rng.integers(-1000, 1000, size=(3, size, 2))
    expected = np.einsum("ij,ajb->aib", h, x)
    np.testing.assert_array_equal(fwht(x, axis=1), expected)
    np.testing.assert_array_equal(fwht(x, axis=-2), expected)
    np.testing.assert_array_equal(fwht(np.moveaxis(x, 1, -1)), np.moveaxis(expected, 1, -1))
    np.testing.assert_array_equal(fwht(x[0, :, 0]), h @ x[0, :, 0])
    xf = rng.normal(size=(size, 5))
    np.testing.assert_allclose(fwht(xf, axis=0), h @ xf, rtol=1e-12, atol=1e-9)
    xc = rng.normal(size=size) + 1j * rng.normal(size=size)
    np.testing.assert_allclose(fwht(xc), h @ xc, rtol=1e-12, atol=1e-9)


def test_fwht_is_its_own_inverse_up_to_size():
    rng = np.random.default_rng(0)
    for size in (1, 2, 32, 1024):
        x = rng.integers(-(2**20), 2**20, size=(4, size))
        np.testing.assert_array_equal(fwht(fwht(x)), size * x)
        xf = rng.normal(size=size)
        np.testing.assert_allclose(fwht(fwht(xf)) / size, xf, rtol=1e-10, atol=1e-12)


def test_fwht_dtypes_and_input_untouched():
    x = np.array([200, 100, 0, 255], dtype=np.uint8)
    out = fwht(x)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, hadamard(4) @ x.astype(np.int64))  # no uint8 wrap
    np.testing.assert_array_equal(x, [200, 100, 0, 255])
    assert fwht(np.array([True, False])).dtype == np.int64
    assert fwht(np.ones(4, dtype=np.float32)).dtype == np.float32


def test_fwht_bad_input():
    with pytest.raises(ValueError, match="power-of-two length along axis -1, got 6"):
        fwht(np.ones(6))
    with pytest.raises(ValueError, match="power-of-two length along axis 0, got 3"):
        fwht(np.ones((3, 4)), axis=0)
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones(0))
    with pytest.raises(ValueError, match="axis must be in"):
        fwht(np.ones(4), axis=1)
    with pytest.raises(ValueError, match="at least one dimension"):
        fwht(3.0)
    with pytest.raises(TypeError, match="numeric"):
        fwht(np.array(["a", "b"]))


def test_hadamard_sign_matches_matrix():
    h = hadamard(64)
    i = np.arange(64)
    np.testing.assert_array_equal(hadamard_sign(i[:, None], i[None, :]), h)
    assert hadamard_sign(i[:, None], i[None, :]).dtype == np.int8
    with pytest.raises(ValueError, match="rows must be non-negative"):
        hadamard_sign([-1], [0])
    with pytest.raises(TypeError, match="columns must be non-negative integers"):
        hadamard_sign([1], [0.5])


# -- sizes and closed forms -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("d", "hr", "hrr"),
    [
        (2, 4, 2),
        (3, 4, 4),
        (4, 8, 4),
        (5, 8, 8),
        (7, 8, 8),
        (8, 16, 8),
        (1023, 1024, 1024),
        (1024, 2048, 1024),
        (1025, 2048, 2048),
    ],
)
def test_hadamard_sizes(d, hr, hrr):
    assert HadamardResponse(epsilon=1.0, domain_size=d).hadamard_size == hr
    assert HRR(epsilon=1.0, domain_size=d).hadamard_size == hrr


@pytest.mark.parametrize(
    ("epsilon", "table"), [(0.5, 16.67), (1.0, 4.68), (2.0, 1.72), (4.0, 1.08)]
)
def test_per_user_variance_equals_binary_local_hashing(epsilon, table):
    # q* = 1/2 and p* = e/(e+1): n Var* = (e+1)^2/(e-1)^2, FO17 Table 2's BLH column
    e = math.exp(epsilon)
    for cls in (HadamardResponse, HRR):
        spec = cls(epsilon=epsilon, domain_size=100)
        assert spec.variance(1) == pytest.approx((e + 1) ** 2 / (e - 1) ** 2, rel=1e-12)
        assert round(spec.variance(1), 2) == table


def hr_law(d: int, epsilon: float) -> np.ndarray:
    """P[y | v] from HR's definition: uniform in C_v w.p. e/(e+1), else uniform outside."""
    size = 1 << d.bit_length()
    h = hadamard(size)
    inside = h[1 : d + 1] > 0
    e = math.exp(epsilon)
    return np.where(inside, e / (e + 1) / (size // 2), 1 / (e + 1) / (size // 2))


@pytest.mark.parametrize("epsilon", [0.4, 1.0, 3.0])
@pytest.mark.parametrize("d", [2, 3, 4, 6, 7, 8, 12])
def test_hr_exact_p_q_and_matrix(epsilon, d):
    spec = HadamardResponse(epsilon=epsilon, domain_size=d)
    law = hr_law(d, epsilon)
    np.testing.assert_allclose(spec.transition_matrix(), law, rtol=1e-12)
    inside = hadamard(spec.hadamard_size)[1 : d + 1] > 0
    support = law @ inside.T.astype(float)  # support[v, u] = P[y in C_u | v]
    np.testing.assert_allclose(np.diag(support), spec.p, rtol=1e-12)
    np.testing.assert_allclose(support[~np.eye(d, dtype=bool)], spec.q, rtol=1e-12)
    assert privacy_loss(law) == pytest.approx(epsilon, rel=1e-12)
    assert spec.privacy_loss() == pytest.approx(epsilon, rel=1e-12)


def hrr_law(d: int, epsilon: float) -> np.ndarray:
    """P[(j, s) | v] from HRR's definition, columns 2j + (s > 0)."""
    size = 1 << (d - 1).bit_length()
    h = hadamard(size)[:d]
    e = math.exp(epsilon)
    keep = e / (e + 1)
    law = np.empty((d, size, 2))
    law[:, :, 1] = np.where(h > 0, keep, 1 - keep) / size
    law[:, :, 0] = np.where(h < 0, keep, 1 - keep) / size
    return law.reshape(d, 2 * size)


@pytest.mark.parametrize("epsilon", [0.4, 1.0, 3.0])
@pytest.mark.parametrize("d", [2, 3, 4, 5, 8, 11])
def test_hrr_exact_p_q_and_matrix(epsilon, d):
    spec = HRR(epsilon=epsilon, domain_size=d)
    law = hrr_law(d, epsilon)
    np.testing.assert_allclose(spec.transition_matrix(), law, rtol=1e-12)
    size = spec.hadamard_size
    h = hadamard(size)[:d]
    # Support(j, s) = {u : H[u, j] = s}; membership[u, 2j + b] for s = 2b - 1
    membership = np.stack([h < 0, h > 0], axis=-1).reshape(d, 2 * size)
    support = law @ membership.T.astype(float)
    np.testing.assert_allclose(np.diag(support), spec.p, rtol=1e-12)
    np.testing.assert_allclose(support[~np.eye(d, dtype=bool)], spec.q, rtol=1e-12)
    assert privacy_loss(law) == pytest.approx(epsilon, rel=1e-12)
    assert spec.privacy_loss() == pytest.approx(epsilon, rel=1e-12)


def test_large_epsilon_and_matrix_limit():
    for cls in (HadamardResponse, HRR):
        spec = cls(epsilon=30.0, domain_size=16)
        assert spec.privacy_loss() == pytest.approx(30.0, rel=1e-12)
        assert np.isfinite(cls(epsilon=40.0, domain_size=4).variance(3))
        with pytest.raises(ValueError, match="<= 40"):
            cls(epsilon=800.0, domain_size=4)
        with pytest.raises(ValueError, match="transition_matrix must have at most"):
            cls(epsilon=1.0, domain_size=5000).transition_matrix()


# -- sampler laws ------------------------------------------------------------------------------
def _hist(spec, v: int, n: int, seed: int, columns: int) -> np.ndarray:
    return np.bincount(
        spec.output_index(spec.randomize(np.full(n, v), rng=seed)), minlength=columns
    )


@pytest.mark.parametrize(("cls", "law"), [(HadamardResponse, hr_law), (HRR, hrr_law)])
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 6), (0.5, 9), (2.0, 3)])
def test_sampler_matches_law_for_every_input(cls, law, epsilon, d):
    spec = cls(epsilon=epsilon, domain_size=d)
    matrix = law(d, epsilon)
    n = 40_000
    for v in range(d):
        p = chisquare_gof(_hist(spec, v, n, 50 + v, matrix.shape[1]), matrix[v])
        assert p > ALPHA, f"{cls.name} input {v}: chi-square p = {p:.2e}"


@pytest.mark.parametrize(("cls", "law"), [(HadamardResponse, hr_law), (HRR, hrr_law)])
def test_sampler_law_test_has_power(cls, law):
    d, n = 6, 40_000
    matrix = law(d, 1.0)
    louder = cls(epsilon=1.3, domain_size=d)
    assert chisquare_gof(_hist(louder, 2, n, 1, matrix.shape[1]), matrix[2]) < ALPHA
    # swapped: the kept side and the other side exchanged (epsilon -> -epsilon)
    spec = cls(epsilon=1.0, domain_size=d)
    assert chisquare_gof(_hist(spec, 2, n, 2, matrix.shape[1]), law(d, -1.0)[2]) < ALPHA


def test_hr_side_fixing_is_uniform_within_each_side():
    """Given the side, y is uniform over it (checked per side, every input), the side is
    Binomial(n, p); and the same test rejects a side-fixing rule that is not uniform."""
    d, eps, n = 12, 1.0, 60_000
    spec = HadamardResponse(epsilon=eps, domain_size=d)
    size = spec.hadamard_size
    h = hadamard(size)
    limit = bonferroni_z(ALPHA, d)
    for v in range(d):
        y = spec.randomize(np.full(n, v), rng=200 + v).values.astype(np.int64)
        inside = h[v + 1, y] > 0
        assert abs(binomial_z(int(inside.sum()), n, spec.p)) < limit
        for side, members in ((inside, h[v + 1] > 0), (~inside, h[v + 1] < 0)):
            hist = np.bincount(y[side], minlength=size)
            p = chisquare_gof(hist, members / members.sum())
            assert p > ALPHA, f"input {v}: not uniform within a side (p = {p:.2e})"
    # a wrong fix: move wrong-side draws to the *first* index of the wanted side
    v = 4
    gen = np.random.default_rng(3)
    y = gen.integers(0, size, n)
    want = gen.random(n) < spec.p
    row = h[v + 1]
    first_in, first_out = int(np.argmax(row > 0)), int(np.argmax(row < 0))
    wrong_side = (row[y] > 0) != want
    y = np.where(wrong_side, np.where(want, first_in, first_out), y)
    assert chisquare_gof(np.bincount(y, minlength=size), hr_law(d, eps)[v]) < ALPHA


def test_hrr_perturb_signs_law_and_validation():
    n = 200_000
    for eps in (0.5, 2.0):
        flip = 1 / (math.exp(eps) + 1)
        for sign in (1, -1):
            out = hrr_perturb_signs(np.full(n, sign, dtype=np.int8), eps, rng=4)
            assert out.dtype == np.int8 and set(np.unique(out)) <= {-1, 1}
            assert abs(binomial_z(int(np.sum(out != sign)), n, flip)) < 6
        louder = hrr_perturb_signs(np.ones(n, dtype=np.int64), eps * 1.3, rng=5)
        assert abs(binomial_z(int(np.sum(louder != 1)), n, flip)) > 6
    mixed = np.array([1, -1, 1, -1] * 10)
    a = hrr_perturb_signs(mixed, 1.0, rng=np.random.default_rng(8))
    assert np.array_equal(a, hrr_perturb_signs(mixed, 1.0, rng=8))
    with pytest.raises(ValueError, match="only -1 and \\+1"):
        hrr_perturb_signs([1, 0], 1.0, rng=0)
    with pytest.raises(TypeError, match="signs must be integers"):
        hrr_perturb_signs([1.0, -1.0], 1.0, rng=0)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        hrr_perturb_signs([1], 0.0, rng=0)


# -- aggregation against brute force -------------------------------------------------------------
def test_hr_support_counts_brute_force_and_validation():
    d = 10
    spec = HadamardResponse(epsilon=0.7, domain_size=d)
    reports = spec.randomize(np.random.default_rng(0).integers(0, d, 777), rng=1)
    h = hadamard(spec.hadamard_size)
    y = reports.values.astype(np.int64)
    brute = np.array([np.sum(h[v + 1, y] > 0) for v in range(d)])
    np.testing.assert_array_equal(spec.support_counts(reports), brute)
    with pytest.raises(ValueError, match=r"reports.values must be .* in \[0, 16\)"):
        spec.support_counts(Reports(spec, values=np.array([3, 16], dtype=np.uint8)))
    with pytest.raises(TypeError, match="values must be an array of integers"):
        spec.support_counts(Reports(spec, values=np.array([0.5, 1.0])))
    with pytest.raises(ValueError, match="reports.values"):
        spec.support_counts(Reports(spec, values=np.array([-1, 1], dtype=np.int8)))


def test_hrr_estimator_is_the_coefficient_average():
    d, n, eps = 11, 999, 1.2
    spec = HRR(epsilon=eps, domain_size=d)
    reports = spec.randomize(np.random.default_rng(2).integers(0, d, n), rng=3)
    j = reports.values.astype(np.int64)
    s = reports.signs.astype(np.int64)
    h = hadamard(spec.hadamard_size)
    direct = (h[:d, j] * s).sum(axis=1) / n / (2 * spec.p - 1)  # Cormode et al.'s estimator
    np.testing.assert_allclose(
        spec.run(np.random.default_rng(2).integers(0, d, n), rng=3).frequencies,
        direct,
        rtol=1e-10,
        atol=1e-12,
    )
    brute_counts = np.array([np.sum(h[v, j] == s) for v in range(d)])
    np.testing.assert_array_equal(spec.support_counts(reports), brute_counts)
    sums = hrr_signed_sums(j, s, spec.hadamard_size)
    np.testing.assert_array_equal(
        sums, np.bincount(j, weights=s, minlength=spec.hadamard_size).astype(np.int64)
    )
    with pytest.raises(ValueError, match="reports.signs must contain only"):
        spec.support_counts(
            Reports(
                spec, values=np.array([1, 2], dtype=np.uint8), signs=np.array([1, 0], dtype=np.int8)
            )
        )
    with pytest.raises(ValueError, match=r"reports.values must be .* in \[0, 16\)"):
        spec.support_counts(
            Reports(spec, values=np.array([1, 16]), signs=np.array([1, 1], dtype=np.int8))
        )


# -- estimation ---------------------------------------------------------------------------------
def _zipf(d: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    w = 1.0 / np.arange(1, d + 1)
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(d), counts)), counts / n


@pytest.mark.parametrize("cls", [HadamardResponse, HRR])
def test_unbiased_on_a_larger_domain(cls):
    d, n = 100, 300_000
    spec = cls(epsilon=1.5, domain_size=d)
    values, truth = _zipf(d, n, 4)
    est = spec.run(values, rng=5)
    z = (est.frequencies - truth) / np.sqrt(spec.variance(n, truth))
    assert np.max(np.abs(z)) < 6, f"max |z| = {np.max(np.abs(z)):.2f}"


@pytest.mark.parametrize("cls", [HadamardResponse, HRR])
def test_variance_matches_formula(cls):
    d, n, runs = 13, 2_000, 300
    spec = cls(epsilon=0.8, domain_size=d)
    values, truth = _zipf(d, n, 6)
    freqs = np.array(
        [spec.run(values, rng=g).frequencies for g in np.random.default_rng(7).spawn(runs)]
    )
    lo, hi = variance_ratio_bounds(runs - 1, ALPHA / d)
    ratio = freqs.var(axis=0, ddof=1) / spec.variance(n, truth)
    assert np.all((ratio > lo) & (ratio < hi)), f"variance ratios {np.round(ratio, 3)}"
    z = (freqs.mean(axis=0) - truth) / np.sqrt(spec.variance(n, truth) / runs)
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, d)
