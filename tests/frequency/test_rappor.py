"""RAPPOR: closed forms, exact privacy, the sampler against its law, the public hash,
aggregation, the unbiased least-squares path and its variance, LASSO support recovery,
and the longitudinal client."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from ldpkit import RAPPOR, RAPPORClient, Reports, Stats
from ldpkit.frequency import bloom_positions
from ldpkit.frequency._bits import pack_bits, unpack_bits
from ldpkit.frequency.rappor import _bernoulli
from ldpkit.privacy import privacy_loss as matrix_privacy_loss
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof, variance_ratio_bounds

ALPHA = 1e-6
IRR = (0.5, 0.75)  # Erlingsson et al.'s defaults


def skewed(d: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    w = 1.0 / np.arange(1, d + 1)
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(d), counts)
    np.random.default_rng(seed).shuffle(values)
    return values, counts / n


def exact_population(freqs: dict[int, float], n: int, seed: int) -> np.ndarray:
    values = np.concatenate([np.full(round(f * n), v) for v, f in freqs.items()])
    np.random.default_rng(seed).shuffle(values)
    return values


# -- closed forms ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("epsilon", "h", "f"),
    [(math.log(81), 2, 0.5), (math.log(7**4), 2, 0.25), (math.log(9), 1, 0.5)],
)
def test_f_matches_fo17_examples(epsilon, h, f):
    """FO17 section 2.3: eps = 2h ln((1 - f/2)/(f/2)); ln 81 and ln 7^4 for f = 1/2, 1/4."""
    spec = RAPPOR(epsilon=epsilon, domain_size=10, num_hashes=h)
    assert spec.f == pytest.approx(f, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 3.0, 40.0])
@pytest.mark.parametrize("h", [1, 2, 4])
def test_f_inverts_the_privacy_formula(epsilon, h):
    spec = RAPPOR(epsilon=epsilon, domain_size=10, num_hashes=h)
    half = spec.f / 2
    assert 2 * h * (math.log1p(-half) - math.log(half)) == pytest.approx(epsilon, rel=1e-10)
    assert spec.p_star == pytest.approx(1 - half, rel=1e-14)
    assert spec.q_star == pytest.approx(half, rel=1e-14)


@pytest.mark.parametrize("irr", [(0.5, 0.75), (0.0, 1.0), (0.1, 0.3)])
def test_two_stage_channel_closed_form(irr):
    """Erlingsson et al. section 3: P[S=1|b=1] = f(p+q)/2 + (1-f) q, P[S=1|b=0] = f(p+q)/2 + (1-f) p."""
    spec = RAPPOR(epsilon=2.0, domain_size=10, instantaneous=irr)
    p, q = irr
    f = spec.f
    assert spec.p_star == pytest.approx(0.5 * f * (p + q) + (1 - f) * q, rel=1e-13)
    assert spec.q_star == pytest.approx(0.5 * f * (p + q) + (1 - f) * p, rel=1e-13)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 30.0])
@pytest.mark.parametrize(
    ("d", "kw"), [(2, {}), (1024, {}), (50, {"num_bits": 32, "num_hashes": 4, "num_cohorts": 16})]
)
def test_privacy_loss_equals_epsilon_without_irr(epsilon, d, kw):
    spec = RAPPOR(epsilon=epsilon, domain_size=d, **kw)
    assert spec.privacy_loss() == pytest.approx(epsilon, rel=1e-9)
    assert spec.longitudinal_privacy_loss() == pytest.approx(epsilon, rel=1e-12)


def test_privacy_loss_with_irr_matches_rappor_paper():
    """f = 1/2, p = 0.5, q = 0.75, h = 2: eps_1 = h ln(q*(1-p*)/(p*(1-q*))) = 1.0743,
    eps_inf = ln 81 (Erlingsson et al. section 3.1)."""
    spec = RAPPOR(epsilon=math.log(81), domain_size=64, instantaneous=IRR)
    q_star, p_star = 0.6875, 0.5625  # the paper's notation: q* for set bits
    assert spec.p_star == pytest.approx(q_star, rel=1e-13)
    assert spec.q_star == pytest.approx(p_star, rel=1e-13)
    expected = 2 * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    assert spec.privacy_loss() == pytest.approx(expected, rel=1e-12)
    assert spec.privacy_loss() == pytest.approx(1.0743, abs=1e-4)
    assert spec.longitudinal_privacy_loss() == pytest.approx(math.log(81), rel=1e-12)


TINY = [
    {"num_bits": 4, "num_hashes": 1, "num_cohorts": 2},
    {"num_bits": 4, "num_hashes": 2, "num_cohorts": 2},
    {"num_bits": 3, "num_hashes": 2, "num_cohorts": 3},
    {"num_bits": 1, "num_hashes": 1, "num_cohorts": 2},
]


def closed_form_matrix(spec: RAPPOR, p1: float, q1: float) -> np.ndarray:
    """P[(c, bits) | v] written directly: 1/m times a product over the k bits."""
    k, m, d = spec.num_bits, spec.num_cohorts, spec.domain_size
    out = np.zeros((d, m * 2**k))
    for v in range(d):
        for c in range(m):
            bloom = set(
                bloom_positions(v, c, num_bits=k, num_hashes=spec.num_hashes).ravel().tolist()
            )
            for pattern in range(2**k):
                prob = 1.0 / m
                for i in range(k):
                    bit = (pattern >> (k - 1 - i)) & 1
                    one = p1 if i in bloom else q1
                    prob *= one if bit else 1 - one
                out[v, c * 2**k + pattern] = prob
    return out


@pytest.mark.parametrize("kw", TINY)
@pytest.mark.parametrize("irr", [None, IRR])
def test_transition_matrix_and_exact_privacy(kw, irr):
    spec = RAPPOR(epsilon=1.3, domain_size=3, instantaneous=irr, **kw)
    matrix = spec.transition_matrix()
    np.testing.assert_allclose(
        matrix, closed_form_matrix(spec, spec.p_star, spec.q_star), rtol=1e-12
    )
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-12)
    assert spec.privacy_loss() == pytest.approx(matrix_privacy_loss(matrix), rel=1e-9, abs=1e-12)
    assert spec.privacy_loss() <= 1.3 + 1e-12


def test_collisions_lower_the_privacy_loss():
    """With one bit every item has the same filter: the report says nothing (loss 0)."""
    assert RAPPOR(epsilon=2.0, domain_size=3, num_bits=1, num_hashes=1).privacy_loss() == 0.0
    # Beyond max_epsilon f/2 is no longer a fine multiple of 2^-64: refused;
    # at the largest accepted epsilon the realized loss is finite, tight and <= epsilon.
    with pytest.raises(ValueError, match="epsilon must be .* <= 60"):
        RAPPOR(epsilon=800.0, domain_size=4)
    top = RAPPOR(epsilon=60.0, domain_size=4, num_hashes=1)
    assert 0 < top.q_star < 1e-12 and 60.0 - 1e-5 < top.privacy_loss() <= 60.0


def test_transition_matrix_only_for_tiny_configurations():
    with pytest.raises(NotImplementedError, match="tiny"):
        RAPPOR(epsilon=1.0, domain_size=4).transition_matrix()


# -- the sampler ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "irr", "epsilon"), [(TINY[0], None, 1.0), (TINY[1], IRR, 2.5), (TINY[2], None, 0.7)]
)
def test_sampler_matches_transition_matrix(kw, irr, epsilon):
    """Chi-square over all (cohort, bit pattern) outputs; the same test rejects the sampler
    of epsilon * 1.3 and the hypothesis with p* and q* swapped."""
    spec = RAPPOR(epsilon=epsilon, domain_size=3, instantaneous=irr, **kw)
    matrix = spec.transition_matrix()
    swapped = closed_form_matrix(spec, spec.q_star, spec.p_star)
    n = 60_000
    for u in range(3):
        hist = np.bincount(
            spec.output_index(spec.randomize(np.full(n, u), rng=u)), minlength=matrix.shape[1]
        )
        p = chisquare_gof(hist, matrix[u])
        assert p > ALPHA, f"input {u}: chi-square p = {p:.2e}"
        assert chisquare_gof(hist, swapped[u]) < ALPHA
    wrong = spec.replace(epsilon=epsilon * 1.3)
    hist = np.bincount(
        wrong.output_index(wrong.randomize(np.full(n, 0), rng=99)), minlength=matrix.shape[1]
    )
    assert chisquare_gof(hist, matrix[0]) < ALPHA


def bit_z(spec: RAPPOR, stats: Stats, value: int, p1: float, q1: float) -> np.ndarray:
    """z-scores of every (cohort, bit) count of users all holding ``value``."""
    m, k = spec.num_cohorts, spec.num_bits
    probs = np.full((m, k), q1)
    for c in range(m):
        probs[c, bloom_positions(value, c, num_bits=k, num_hashes=spec.num_hashes).ravel()] = p1
    n_c = stats.cohort_counts[:, None]
    return (stats.bit_counts - n_c * probs) / np.sqrt(n_c * probs * (1 - probs))


def bit_test(z: np.ndarray) -> float:
    """p-value of sum z^2 against chi-square with one degree of freedom per bit."""
    return float(sps.chi2.sf(np.sum(z**2), z.size))


@pytest.mark.parametrize(("epsilon", "irr"), [(1.0, None), (4.0, None), (2.0, (0.25, 0.75))])
def test_per_bit_probabilities_default_configuration(epsilon, irr):
    spec = RAPPOR(epsilon=epsilon, domain_size=300, instantaneous=irr)
    n, u = 120_000, 217
    stats = spec.aggregate(spec.randomize(np.full(n, u), rng=5))
    z = bit_z(spec, stats, u, spec.p_star, spec.q_star)
    assert bit_test(z) > ALPHA
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, z.size)
    assert chisquare_gof(stats.cohort_counts, np.full(8, 1 / 8)) > ALPHA
    assert bit_test(bit_z(spec, stats, u, spec.q_star, spec.p_star)) < ALPHA  # swapped
    louder = spec.replace(epsilon=epsilon * 1.3)
    z13 = bit_z(
        spec, louder.aggregate(louder.randomize(np.full(n, u), rng=6)), u, spec.p_star, spec.q_star
    )
    assert bit_test(z13) < ALPHA


def test_two_stages_have_their_laws():
    """PRR bits are 1 w.p. 1 - f/2 / f/2; IRR applied to them gives the composed p*, q*."""
    spec = RAPPOR(epsilon=2.0, domain_size=50, instantaneous=(0.2, 0.7))
    n, u = 80_000, 9
    cohorts = np.random.default_rng(1).integers(0, 8, size=n)
    prr = spec.permanent_response(np.full(n, u), cohorts, rng=2)
    keep, flip = 1 - spec.f / 2, spec.f / 2
    prr_stats = spec.aggregate(Reports(spec, bits=prr, cohorts=cohorts.astype(np.uint8)))
    assert bit_test(bit_z(spec, prr_stats, u, keep, flip)) > ALPHA
    assert bit_test(bit_z(spec, prr_stats, u, spec.p_star, spec.q_star)) < ALPHA
    final = spec.aggregate(spec.instantaneous_response(prr, cohorts, rng=3))
    assert bit_test(bit_z(spec, final, u, spec.p_star, spec.q_star)) > ALPHA
    assert bit_test(bit_z(spec, final, u, keep, flip)) < ALPHA


@pytest.mark.parametrize("prob", [0.0, 1.0, 0.3, 100 / 256, 100.5 / 256, 1e-5, 1 - 1e-9])
def test_bernoulli_bytes_are_exact(prob):
    """One byte per draw plus a 56-bit integer for the ties: exact at every threshold,
    including a tie resolved half the time (100.5/256, which ignoring ties would turn into
    100/256)."""
    n = 8_000_000
    threshold = round(prob * 2**64)
    count = int(_bernoulli(np.random.default_rng(4), (1000, n // 1000), threshold).sum())
    if prob in (0.0, 1.0):
        assert count == prob * n
        return
    assert abs(binomial_z(count, n, prob)) < 6
    if 0.1 < prob < 0.9:
        assert abs(binomial_z(count, n, prob * 1.01)) > 6
    if prob == 100.5 / 256:
        assert abs(binomial_z(count, n, 100 / 256)) > 6 and abs(binomial_z(count, n, 101 / 256)) > 6


def test_randomize_is_seeded_and_vectorized():
    spec = RAPPOR(epsilon=1.0, domain_size=40, instantaneous=IRR)
    values = np.arange(40).repeat(2000)  # more than one block of users
    a, b = spec.randomize(values, rng=3), spec.randomize(values, rng=3)
    assert a.equals(b) and a.bits.shape == (80_000, 16) and a.cohorts.dtype == np.uint8
    assert not spec.randomize(values, rng=4).equals(a)


# -- the public hash --------------------------------------------------------------------------
M64 = (1 << 64) - 1


def reference_hash(v: int, c: int, j: int, k: int) -> int:
    def mix(x: int) -> int:
        z = (x + 0x9E3779B97F4A7C15) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    return mix(mix(v) ^ ((((c << 16) + j) * 0xD1B54A32D192ED03) & M64)) % k


def test_hash_is_pinned_and_matches_scalar_reference():
    got = bloom_positions([0, 1, 2, 1000], [[0], [7]], num_bits=128, num_hashes=2)
    assert got.tolist() == [
        [[111, 114], [30, 88], [52, 50], [127, 32]],
        [[111, 12], [89, 111], [16, 122], [57, 28]],
    ]
    rng = np.random.default_rng(0)
    items, cohorts = rng.integers(0, 2**40, size=50), rng.integers(0, 300, size=50)
    pos = bloom_positions(items, cohorts, num_bits=97, num_hashes=3)
    for v, c, row in zip(items.tolist(), cohorts.tolist(), pos.tolist()):
        assert row == [reference_hash(v, c, j, 97) for j in range(3)]
    spec = RAPPOR(epsilon=1.0, domain_size=1000)
    np.testing.assert_array_equal(
        spec.hash_positions([5, 999], [3, 0]),
        bloom_positions([5, 999], [3, 0], num_bits=128, num_hashes=2),
    )


def test_hash_is_uniform_and_pairwise_independent():
    items = np.arange(200_000)
    pos = bloom_positions(items, 3, num_bits=16, num_hashes=2)
    assert chisquare_gof(np.bincount(pos[:, 0], minlength=16), np.full(16, 1 / 16)) > ALPHA
    joint = np.bincount(pos[:, 0] * 16 + pos[:, 1], minlength=256)
    assert chisquare_gof(joint, np.full(256, 1 / 256)) > ALPHA
    other = bloom_positions(items, 4, num_bits=16, num_hashes=1)[:, 0]
    assert (
        chisquare_gof(np.bincount(pos[:, 0] * 16 + other, minlength=256), np.full(256, 1 / 256))
        > ALPHA
    )


# -- aggregation ------------------------------------------------------------------------------
def test_aggregate_matches_naive_counts():
    spec = RAPPOR(epsilon=1.0, domain_size=30, num_bits=21, num_cohorts=5)
    values, _ = skewed(30, 7000)
    reports = spec.randomize(values, rng=8)
    stats = spec.aggregate(reports)
    bits = unpack_bits(reports.bits, 21).astype(np.int64)
    for c in range(5):
        rows = reports.cohorts == c
        np.testing.assert_array_equal(stats.bit_counts[c], bits[rows].sum(axis=0))
        assert stats.cohort_counts[c] == rows.sum()
    assert stats.n == 7000 and stats.bit_counts.dtype == np.int64


def test_report_validation():
    spec = RAPPOR(epsilon=1.0, domain_size=30, num_bits=21, num_cohorts=5)
    good = spec.randomize(np.arange(30), rng=0)
    with pytest.raises(ValueError, match="reports.bits must be a uint8 array of shape"):
        spec.aggregate(Reports(spec, bits=good.bits[:, :2], cohorts=good.cohorts))
    padded = np.array(good.bits)
    padded[0, -1] |= 1
    with pytest.raises(ValueError, match="zero padding"):
        spec.aggregate(Reports(spec, bits=padded, cohorts=good.cohorts))
    with pytest.raises(ValueError, match=r"reports.cohorts must be cohorts in \[0, 5\)"):
        spec.aggregate(Reports(spec, bits=good.bits, cohorts=np.full(30, 5)))
    with pytest.raises(TypeError, match="cohorts must be an array of integers"):
        spec.aggregate(Reports(spec, bits=good.bits, cohorts=np.zeros(30)))
    with pytest.raises(ValueError, match="cohorts must be a 1-D integer array of 2"):
        spec.permanent_response([1, 2], [0], rng=0)
    with pytest.raises(ValueError, match="permanent_bits must be a uint8 array"):
        spec.instantaneous_response(np.zeros((2, 2), dtype=np.uint8), [0, 1], rng=0)


@pytest.mark.parametrize(
    ("kw", "exc", "message"),
    [
        ({"num_bits": 0}, ValueError, r"num_bits must be an integer in \[1, 65536\]"),
        ({"num_bits": 8.0}, TypeError, "num_bits must be an integer"),
        (
            {"num_bits": 8, "num_hashes": 9},
            ValueError,
            r"num_hashes must be an integer in \[1, 8\]",
        ),
        ({"num_cohorts": 0}, ValueError, r"num_cohorts must be an integer in \[1, 65536\]"),
        (
            {"instantaneous": (0.75, 0.5)},
            ValueError,
            r"instantaneous must be None or a pair \(p, q\) with 0 <= p < q <= 1",
        ),
        ({"instantaneous": (0.5, 0.5)}, ValueError, "instantaneous must be None or a pair"),
        (
            {"instantaneous": (0.5, 1.5)},
            ValueError,
            r"instantaneous\[1\] \(q\) must be a finite number >= 0 and <= 1",
        ),
        ({"instantaneous": (0.5,)}, TypeError, "instantaneous must be None or a pair"),
        ({"instantaneous": "ab"}, TypeError, "instantaneous must be None or a pair"),
        (
            {"instantaneous": (math.nan, 0.5)},
            ValueError,
            r"instantaneous\[0\] \(p\) must be a finite number",
        ),
    ],
)
def test_spec_validation(kw, exc, message):
    with pytest.raises(exc, match=message):
        RAPPOR(epsilon=1.0, domain_size=10, **kw)


def test_irr_spec_round_trips_through_json():
    spec = RAPPOR(epsilon=1.0, domain_size=12, num_cohorts=3, instantaneous=[0.5, 0.75])
    assert spec.instantaneous == (0.5, 0.75) and hash(spec) == hash(spec.replace())
    stats = spec.aggregate(spec.randomize(np.arange(12).repeat(30), rng=0))
    back = Stats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert back == stats and back.spec == spec
    assert spec.aggregate(spec.randomize(np.arange(12), rng=1)).merge(stats).n == 372


# -- estimation: the unbiased least-squares path ----------------------------------------------
COLLIDING = {"num_bits": 16, "num_hashes": 2, "num_cohorts": 4}  # 64 rows for 24 candidates


@pytest.mark.parametrize(("epsilon", "irr"), [(2.0, None), (4.0, (0.25, 0.75))])
def test_least_squares_is_unbiased_under_collisions(epsilon, irr):
    d, n = 24, 200_000
    spec = RAPPOR(epsilon=epsilon, domain_size=d, instantaneous=irr, **COLLIDING)
    values, truth = skewed(d, n, seed=2)
    stats = spec.aggregate(spec.randomize(values, rng=3))
    est = spec.estimate(stats)  # the default: RAPPOR's plain estimate is the unbiased one
    assert est.unbiased and est.postprocessing == ()
    sd = np.sqrt(spec.variance(n, truth))
    z = (est.frequencies - truth) / sd
    assert np.max(np.abs(z)) < 6, f"max |z| = {np.max(np.abs(z)):.2f}"
    # Power: the same counts decoded as if epsilon were 1.3x larger are rejected.
    wrong = spec.replace(epsilon=1.3 * epsilon)
    z_wrong = (wrong.estimate(Stats(wrong, stats.n, **stats.arrays)).frequencies - truth) / sd
    assert np.max(np.abs(z_wrong)) > 6


@pytest.mark.slow
@pytest.mark.parametrize(
    ("epsilon", "kw"),
    [(2.0, COLLIDING), (20.0, {"num_bits": 8, "num_hashes": 2, "num_cohorts": 8})],
)
def test_variance_matches_repeated_runs(epsilon, kw):
    """At epsilon = 20 almost all the variance comes from the random cohort assignment
    (leaving that term out understates it ~20x); at epsilon = 2 from the bit noise."""
    d, n, runs = 12, 4000, 300
    spec = RAPPOR(epsilon=epsilon, domain_size=d, **kw)
    values, truth = skewed(d, n, seed=3)
    ests = [
        spec.estimate(spec.aggregate(spec.randomize(values, rng=g)))
        for g in np.random.default_rng(9).spawn(runs)
    ]
    freqs = np.array([e.frequencies for e in ests])
    theory = spec.variance(n, truth)
    lo, hi = variance_ratio_bounds(runs - 1, ALPHA / d)
    ratio = freqs.var(axis=0, ddof=1) / theory
    assert np.all((ratio > lo) & (ratio < hi)), (
        f"ratios {np.round(ratio, 3)} outside [{lo:.2f}, {hi:.2f}]"
    )
    z = (freqs.mean(axis=0) - truth) / np.sqrt(theory / runs)
    assert np.max(np.abs(z)) < 6
    plug_in = np.mean([e.variance for e in ests], axis=0) / theory
    np.testing.assert_allclose(plug_in, 1.0, atol=0.1)
    lo95, hi95 = zip(*(e.confidence_interval(0.05) for e in ests))
    covered = np.mean((np.array(lo95) <= truth) & (truth <= np.array(hi95)))
    assert 0.93 <= covered <= 0.97, f"coverage {covered:.3f}"


def test_least_squares_needs_full_rank():
    spec = RAPPOR(epsilon=1.0, domain_size=1100)  # more candidates than 8 * 128 rows
    stats = spec.aggregate(spec.randomize(np.arange(1100), rng=0))
    with pytest.raises(ValueError, match="full column rank for the 1100 candidates"):
        spec.estimate(stats)
    assert spec.variance(1000) == math.inf
    assert np.all(np.isinf(spec.variance(1000, np.zeros(1100))))


def test_variance_shapes_and_null():
    spec = RAPPOR(epsilon=1.0, domain_size=8)
    per_item = spec.variance(500, np.zeros(8))
    assert per_item.shape == (8,) and spec.variance(500) == pytest.approx(
        per_item.mean(), rel=1e-12
    )
    assert spec.variance(500, 0.125).shape == (8,)
    # At f = 0 every row has variance (n/m) sigma0^2, so n Var = m sigma0^2 [(A^T A)^{-1}]_vv.
    a = spec.design_matrix().toarray()
    sigma2 = spec.q_star * (1 - spec.q_star) / (spec.p_star - spec.q_star) ** 2
    np.testing.assert_allclose(
        per_item * 500, 8 * sigma2 * np.diag(np.linalg.inv(a.T @ a)), rtol=1e-10
    )


# -- estimation: LASSO selection ----------------------------------------------------------------
HEAVY = {
    3: 0.3,
    17: 0.2,
    50: 0.12,
    64: 0.1,
    77: 0.08,
    90: 0.06,
    101: 0.05,
    123: 0.04,
    140: 0.03,
    199: 0.02,
}


@pytest.mark.parametrize(
    ("d", "epsilon", "n"), [(200, 2.0, 200_000), (160, 1.0, 1_000_000), (3000, 4.0, 300_000)]
)
def test_lasso_recovers_sparse_support(d, epsilon, n):
    """All heavy items found, at most one false positive, refit estimates within 6 sd; the
    last case has more candidates (3000) than regression rows (1024)."""
    heavy = {v % d: f for v, f in HEAVY.items()}
    spec = RAPPOR(epsilon=epsilon, domain_size=d)
    # (the population's shuffle and the randomizer use different seeds: the cohorts must
    # be independent of the values)
    est = spec.estimate(
        spec.aggregate(spec.randomize(exact_population(heavy, n, seed=d), rng=d + 7)),
        postprocess="lasso_selection",
    )
    assert est.postprocessing == ("lasso_selection",) and not est.unbiased
    selected = set(np.flatnonzero(est.frequencies != 0).tolist())
    assert set(heavy) <= selected, f"missed {set(heavy) - selected}"
    assert len(selected - set(heavy)) <= 1, f"false positives {selected - set(heavy)}"
    truth = np.zeros(d)
    truth[list(heavy)] = list(heavy.values())
    z = (est.frequencies - truth) / est.std_error
    assert np.max(np.abs(z[list(heavy)])) < 6
    assert np.all(np.isfinite(est.variance)) and np.all(est.variance > 0)


def test_lasso_scales_to_a_long_candidate_list():
    """20 items of 5% each among 100,000 candidates (100x the regression rows)."""
    spec = RAPPOR(epsilon=1.0, domain_size=100_000)
    items = np.arange(20) * 4999 + 17
    values = items[np.random.default_rng(0).integers(0, 20, size=1_000_000)]
    est = spec.estimate(
        spec.aggregate(spec.randomize(values, rng=1)), postprocess="lasso_selection"
    )
    selected = set(np.flatnonzero(est.frequencies != 0).tolist())
    assert set(items.tolist()) <= selected and len(selected) <= 21
    truth = np.bincount(values, minlength=100_000) / 1_000_000
    assert np.max(np.abs((est.frequencies - truth)[items] / est.std_error[items])) < 6


def test_lasso_false_positives_are_rare_under_a_point_mass():
    """Everyone holds item 0: over 20 runs the LASSO selects another candidate in few runs
    (alpha = 0.05 bounds it under the pure null; a heavy item adds leakage)."""
    spec = RAPPOR(epsilon=2.0, domain_size=300)
    spurious = 0
    for seed in range(20):
        est = spec.estimate(
            spec.aggregate(spec.randomize(np.zeros(20_000, dtype=np.int64), rng=seed)),
            postprocess="lasso_selection",
        )
        selected = np.flatnonzero(est.frequencies != 0)
        assert 0 in selected
        spurious += selected.size > 1
    assert spurious <= 4


def test_estimate_arguments():
    spec = RAPPOR(epsilon=1.0, domain_size=8)
    stats = spec.aggregate(spec.randomize(np.arange(8), rng=0))
    with pytest.raises(ValueError, match="postprocess must be None or 'lasso_selection'"):
        spec.estimate(stats, postprocess="ridge")
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        spec.estimate(stats, alpha=0.0)
    with pytest.raises(ValueError, match="at least one report"):
        spec.estimate(Stats.empty(spec))


# -- the longitudinal client --------------------------------------------------------------------
def test_client_memoizes_the_permanent_response():
    spec = RAPPOR(epsilon=2.0, domain_size=20, instantaneous=(0.25, 0.75))
    client = RAPPORClient(spec, rng=0)
    cohort = client.cohort
    prr = client.permanent_bits(7)
    assert np.array_equal(client.permanent_bits(7), prr) and client.cohort == cohort
    reports = client.report(7).concat(*(client.report(7) for _ in range(5999)))
    assert np.all(reports.cohorts == cohort) and len(np.unique(reports.bits, axis=0)) > 1
    # Averaging the reports recovers the memoized PRR bits (q for 1s, p for 0s), not the
    # Bloom filter: that is what the memoization protects.
    stats = spec.aggregate(reports)
    expected = np.where(unpack_bits(prr, spec.num_bits)[0] == 1, 0.75, 0.25)
    z = binomial_z(stats.bit_counts[cohort], 6000, expected)
    assert np.max(np.abs(z)) < bonferroni_z(ALPHA, spec.num_bits)
    plain = RAPPORClient(spec.replace(instantaneous=None), cohort=2, rng=1)
    assert plain.report(4).equals(plain.report(4)) and plain.cohort == 2


def test_client_validation():
    spec = RAPPOR(epsilon=1.0, domain_size=5)
    with pytest.raises(ValueError, match=r"cohort must be an integer in \[0, 7\]"):
        RAPPORClient(spec, cohort=8)
    with pytest.raises(TypeError, match="spec must be a RAPPOR spec"):
        RAPPORClient(object())
    with pytest.raises(ValueError, match=r"values must be integers in \[0, 5\)"):
        RAPPORClient(spec, rng=0).report(5)


def test_packed_layout_is_big_endian():
    spec = RAPPOR(epsilon=50.0, domain_size=4, num_bits=10, num_cohorts=1)
    reports = spec.randomize([2], rng=0)
    bloom = bloom_positions(2, 0, num_bits=10, num_hashes=2).ravel()
    expected = np.zeros((1, 10), dtype=bool)
    expected[0, bloom] = True  # epsilon = 50: the PRR keeps every bit (f/2 ~ 4e-6)
    np.testing.assert_array_equal(reports.bits, pack_bits(expected))
