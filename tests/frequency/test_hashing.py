"""Local hashing oracles (BLH, OLH): hash family, kernel, closed forms, sampler, estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import BLH, OLH
from ldpkit.frequency import ORACLES
from ldpkit.frequency._kernels_hashing import _bucket_window, support_counts_kernel
from ldpkit.frequency.hashing import (
    MAX_HASH_RANGE,
    LocalHashing,
    _support_counts_numpy,
    hash_parameters,
    local_hash,
    olh_variance,
    optimal_hash_range,
)
from ldpkit.privacy import privacy_loss
from ldpkit.testing import binomial_z, bonferroni_z, chisquare_gof, variance_ratio_bounds

ALPHA = 1e-6
U64 = np.iinfo(np.uint64).max


def random_seeds(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, U64, size=n, dtype=np.uint64, endpoint=True)


def splitmix64(seed: int, k: int) -> int:
    """k-th output of splitmix64 started at ``seed``, in plain Python integers."""
    z = (seed + k * 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


def test_seed_mixer_is_splitmix64():
    # the published splitmix64 outputs for state 0
    assert splitmix64(0, 1) == 0xE220A8397B1DCDAF and splitmix64(0, 2) == 0x6E789E6AA1B965F4
    a, b = hash_parameters(np.zeros(1, dtype=np.uint64))
    assert (int(a[0]), int(b[0])) == (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4)


# -- the hash family -----------------------------------------------------------------------


def test_hash_is_a_pure_function_of_seed_and_item():
    seeds = random_seeds(1000, 0)
    items = np.random.default_rng(1).integers(0, 2**32, size=1000)
    h = local_hash(seeds, items, 7)
    assert h.dtype == np.int64 and h.shape == (1000,)
    assert h.min() >= 0 and h.max() < 7
    np.testing.assert_array_equal(h, local_hash(seeds.copy(), items.copy(), 7))
    # broadcasting: every item under every seed equals the elementwise version
    grid = local_hash(seeds[:50, None], items[None, :20], 7)
    assert grid.shape == (50, 20)
    np.testing.assert_array_equal(grid[np.arange(20), np.arange(20)], h[:20])
    assert local_hash(seeds[0], 3, 7).shape == ()
    a, b = hash_parameters(seeds)
    assert np.all(a & np.uint64(1) == 1)  # the multiplier is odd
    for s in seeds[:20]:
        assert (int(a[seeds == s][0]), int(b[seeds == s][0])) == (
            splitmix64(int(s), 1) | 1,
            splitmix64(int(s), 2),
        )
    # the definition written out with Python integers (exact, no wrap-around tricks)
    for s, v in zip(seeds[:20], items[:20]):
        ai, bi = hash_parameters(np.array([s]))
        x = (int(ai[0]) * int(v) + int(bi[0])) % 2**64
        assert local_hash(np.array([s]), v, 7)[0] == ((x >> 32) * 7) >> 32


def test_hash_validation():
    seeds = random_seeds(3, 0)
    with pytest.raises(TypeError, match="seeds must be an array of uint64"):
        local_hash(np.arange(3), 1, 4)
    with pytest.raises(ValueError, match="hash_range must be an integer in"):
        local_hash(seeds, 1, 1)
    with pytest.raises(ValueError, match=r"items must be integers in \[0, 2\^32\)"):
        local_hash(seeds, 2**32, 4)
    with pytest.raises(ValueError, match=r"items must be integers in \[0, 2\^32\)"):
        local_hash(seeds, -1, 4)
    with pytest.raises(TypeError, match="items must be integers"):
        local_hash(seeds, 1.0, 4)


@pytest.mark.parametrize("g", [2, 3, 10, 1000])
@pytest.mark.parametrize("item", [0, 1, 12345, 2**32 - 1])
def test_hash_is_uniform_over_the_range(g, item):
    n = 200_000
    h = local_hash(random_seeds(n, g + item % 97), item, g)
    p = chisquare_gof(np.bincount(h, minlength=g), np.full(g, 1.0 / g))
    assert p > ALPHA, f"h({item}) not uniform over [{g}]: p = {p:.2e}"


def test_uniformity_test_has_power():
    """Multiply-shift without the additive term is universal but not uniform (h(0) = 0):
    the same test must reject it."""
    seeds = random_seeds(200_000, 3)
    a, _ = hash_parameters(seeds)
    h = (((a * np.uint64(0)) >> np.uint64(32)) * np.uint64(3)) >> np.uint64(32)
    assert chisquare_gof(np.bincount(h.astype(np.int64), minlength=3), np.full(3, 1 / 3)) < ALPHA
    # and a wrong range is rejected too
    h = local_hash(seeds, 5, 4)
    assert chisquare_gof(np.bincount(h, minlength=4), np.array([0.3, 0.2, 0.25, 0.25])) < ALPHA


PAIRS = [
    (0, 1),
    (1, 2),
    (100, 101),
    (5, 5 + 2**16),
    (0, 2**31),
    (7, 2**32 - 1),
    (2**32 - 2, 2**32 - 1),
]


@pytest.mark.parametrize("g", [2, 3, 5, 16])
def test_hash_is_pairwise_independent(g):
    """(h(v), h(v')) is uniform over [g]^2 for distinct items: joint chi-square and the
    collision rate 1/g (binomial z), Bonferroni over the pairs."""
    n = 100_000
    limit = bonferroni_z(ALPHA, len(PAIRS))
    for k, (v, w) in enumerate(PAIRS):
        seeds = random_seeds(n, 100 * g + k)
        hv, hw = local_hash(seeds, v, g), local_hash(seeds, w, g)
        joint = np.bincount(hv * g + hw, minlength=g * g)
        p = chisquare_gof(joint, np.full(g * g, 1.0 / g**2))
        assert p > ALPHA / len(PAIRS), f"pair ({v}, {w}), g = {g}: joint chi-square p = {p:.2e}"
        z = binomial_z(np.sum(hv == hw), n, 1.0 / g)
        assert abs(z) < limit, f"pair ({v}, {w}), g = {g}: collision z = {z:.2f}"


def test_pairwise_test_has_power():
    """Reducing with the *low* bits, (a v + b) mod g, is a classic mistake: with a odd and
    g = 2, h(v) and h(v + 1) always differ. The collision and joint tests must reject it."""
    n = 100_000
    a, b = hash_parameters(random_seeds(n, 4))
    h0 = ((a * np.uint64(0) + b) % np.uint64(2)).astype(np.int64)
    h1 = ((a * np.uint64(1) + b) % np.uint64(2)).astype(np.int64)
    assert abs(binomial_z(np.sum(h0 == h1), n, 0.5)) > bonferroni_z(ALPHA, 1)
    assert chisquare_gof(np.bincount(h0 * 2 + h1, minlength=4), np.full(4, 0.25)) < ALPHA


# -- support counting: kernel == reference ---------------------------------------------------


def hashed_reports(n: int, d: int, g: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeds and values where half the values equal the hash of a random item (so there
    are matches even when g is huge), the rest uniform over [g], including g - 1."""
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, U64, size=n, dtype=np.uint64, endpoint=True)
    values = rng.integers(0, g, size=n, dtype=np.int64)
    items = rng.integers(0, d, size=n)
    half = rng.random(n) < 0.5
    values[half] = local_hash(seeds[half], items[half], g)
    values[:3] = g - 1
    return seeds, values.astype(np.uint32)


@pytest.mark.parametrize("g", [2, 3, 5, 56, 1000, 2**31 - 1, 2**31 + 1, 2**32 - 1, 2**32])
def test_bucket_window_is_exact_at_the_edges(g):
    """The kernel replaces ``((x >> 32) * g) >> 32 == y`` by ``(x - first) < width``
    (unsigned). Random data almost never lands on a bucket edge (chance ~2^-32 per pair),
    so check the edges themselves: x with h32 at lo - 1, lo, hi - 1, hi and extreme low bits."""
    for y in sorted({0, 1, g // 3, g // 2, g - 2, g - 1}):
        first, width = (int(t) for t in _bucket_window(np.uint64(y), np.uint64(g)))
        lo = first >> 32
        hi = lo + (width >> 32)
        assert lo == -(-y * 2**32 // g) and hi == -(-(y + 1) * 2**32 // g)
        for h32 in {lo - 1, lo, lo + 1, hi - 2, hi - 1, hi}:
            if not 0 <= h32 < 2**32:
                continue
            for low in (0, 1, 2**31, 2**32 - 1):
                x = (h32 << 32) | low
                assert ((x - first) % 2**64 < width) == ((h32 * g) >> 32 == y), (y, h32, low)
    if g <= 2**16:
        # every bucket holds floor(2^32/g) or ceil(2^32/g) of the 2^32 values of h32, which
        # is what bounds the residual non-uniformity (module docstring)
        sizes = np.array(
            [int(_bucket_window(np.uint64(y), np.uint64(g))[1]) >> 32 for y in range(g)]
        )
        assert sizes.sum() == 2**32
        assert set(sizes.tolist()) <= {2**32 // g, -(-(2**32) // g)}
        excess = np.sum((sizes / 2**32 - 1 / g) ** 2)  # collision probability - 1/g
        r = 2**32 % g
        assert excess == pytest.approx(r * (g - r) / g / 2**64, rel=1e-6, abs=1e-30)
        assert excess <= g / 2**66


@pytest.mark.parametrize(
    ("n", "d", "g"),
    [
        (0, 5, 2),
        (1, 2, 2),
        (1000, 2, 3),
        (5000, 33, 4),
        (3001, 257, 7),
        (2000, 64, 1000),
        (2000, 100, 2**16),
        (2000, 100, 2**16 + 1),
        (2000, 100, 2**31 + 1),
        (2000, 100, 2**32 - 1),
        (2000, 100, 2**32),
        (700, 3000, 56),
    ],
)
def test_kernel_matches_numpy_reference(n, d, g):
    seeds, values = hashed_reports(n, d, g, seed=n + d)
    ref = _support_counts_numpy(seeds, values, g, d, block_elements=4096)
    assert ref.dtype == np.int64 and ref.shape == (d,)
    for blocks in (1, 2, 3, 8):
        if blocks > max(n, 1):
            continue
        got = support_counts_kernel(seeds, values, g, d, blocks)
        np.testing.assert_array_equal(got, ref)
    if n:
        # the reference itself against the definition, one report at a time
        for i in range(min(n, 5)):
            h = local_hash(seeds[i], np.arange(d), g)
            single = _support_counts_numpy(seeds[i : i + 1], values[i : i + 1], g, d)
            np.testing.assert_array_equal(single, (h == values[i]).astype(np.int64))


def test_support_counts_do_not_depend_on_thread_count():
    spec = OLH(epsilon=1.0, domain_size=300)
    reports = spec.randomize(np.random.default_rng(0).integers(0, 300, 20_000), rng=1)
    from ldpkit.frequency._kernels_hashing import support_counts_kernel

    one = support_counts_kernel(reports.seeds, reports.values, spec.range_size, 300, 1)
    many = support_counts_kernel(reports.seeds, reports.values, spec.range_size, 300, 3)
    np.testing.assert_array_equal(one, many)
    np.testing.assert_array_equal(
        one, _support_counts_numpy(reports.seeds, reports.values, spec.range_size, 300)
    )


def test_report_validation():
    spec = OLH(epsilon=1.0, domain_size=10, hash_range=5)
    good = spec.randomize(np.arange(10), rng=0)
    from ldpkit import Reports

    with pytest.raises(TypeError, match="values must be an array of integers"):
        Reports(spec, seeds=good.seeds, values=good.values.astype(np.float64))
    bad = [
        Reports(spec, seeds=good.seeds.astype(np.int64), values=good.values),
        Reports(spec, seeds=good.seeds, values=np.full(10, 5, dtype=np.uint8)),
        Reports(spec, seeds=good.seeds, values=np.full(10, -1, dtype=np.int64)),
        Reports(spec, seeds=good.seeds[:, None], values=good.values),
        Reports(spec, values=good.values),
    ]
    for reports in bad:
        with pytest.raises(ValueError, match=r"reports(\.seeds|\.values)? must"):
            spec.aggregate(reports)


# -- parameters and validation ---------------------------------------------------------------


def test_registered_and_reports_layout():
    assert ORACLES["BLH"] is BLH and ORACLES["OLH"] is OLH
    assert issubclass(BLH, LocalHashing) and issubclass(OLH, LocalHashing)
    blh = BLH(epsilon=1.0, domain_size=10)
    r = blh.randomize(np.arange(10), rng=0)
    assert r.fields == ("seeds", "values")
    assert r.seeds.dtype == np.uint64 and r.values.dtype == np.uint8
    assert (
        OLH(epsilon=1.0, domain_size=10, hash_range=300).randomize([1], rng=0).values.dtype
        == np.uint16
    )
    assert (
        OLH(epsilon=1.0, domain_size=10, hash_range=2**32).randomize([1], rng=0).values.dtype
        == np.uint32
    )


def test_hash_range_default_and_validation():
    assert [optimal_hash_range(e) for e in (0.01, 0.5, 1.0, 2.0, 4.0)] == [2, 3, 4, 8, 56]
    assert optimal_hash_range(22.0) == round(math.exp(22.0)) + 1
    assert optimal_hash_range(30.0) == optimal_hash_range(800.0) == MAX_HASH_RANGE
    spec = OLH(epsilon=2.0, domain_size=10)
    assert spec.hash_range is None and spec.range_size == 8
    assert spec.replace(epsilon=4.0).range_size == 56  # None re-optimizes
    assert OLH(epsilon=2.0, domain_size=10, hash_range=5).range_size == 5
    assert OLH(epsilon=2.0, domain_size=10, hash_range=np.int64(5)).hash_range == 5
    assert BLH(epsilon=2.0, domain_size=10).range_size == 2
    for bad in (1, 0, -3, 2**32 + 1):
        with pytest.raises(ValueError, match=r"hash_range must be an integer in \[2, 4294967296\]"):
            OLH(epsilon=1.0, domain_size=10, hash_range=bad)
    for bad in (2.0, 2.5, "4", True):
        with pytest.raises(TypeError, match="hash_range must be an integer"):
            OLH(epsilon=1.0, domain_size=10, hash_range=bad)
    with pytest.raises(ValueError, match=r"domain_size must be an integer in \[2, 4294967296\]"):
        OLH(epsilon=1.0, domain_size=2**32 + 1)
    with pytest.raises(TypeError, match="hash_range"):
        BLH(epsilon=1.0, domain_size=10, hash_range=4)


# -- closed forms (FO17 Table 2) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "blh", "olh_real", "olh_integer", "g"),
    [
        (0.5, 16.67, 15.67, 15.82, 3),
        (1.0, 4.68, 3.68, 3.69, 4),
        (2.0, 1.72, 0.72, 0.72, 8),
        (4.0, 1.08, 0.08, 0.08, 56),
    ],
)
def test_table_2(epsilon, blh, olh_real, olh_integer, g):
    e = math.exp(epsilon)
    spec_b = BLH(epsilon=epsilon, domain_size=1024)
    assert spec_b.variance(1) == pytest.approx((e + 1) ** 2 / (e - 1) ** 2, rel=1e-12)
    assert round(spec_b.variance(1), 2) == blh
    # FO17's OLH column: real-valued g = e + 1
    assert olh_variance(epsilon) == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)
    assert olh_variance(epsilon, e + 1) == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)
    assert round(olh_variance(epsilon), 2) == olh_real
    # the spec: integer g, eq. 10
    spec_o = OLH(epsilon=epsilon, domain_size=1024)
    assert spec_o.range_size == g
    assert spec_o.variance(1) == pytest.approx(
        (e - 1 + g) ** 2 / ((e - 1) ** 2 * (g - 1)), rel=1e-12
    )
    assert spec_o.variance(1) == pytest.approx(olh_variance(epsilon, g), rel=1e-12)
    assert round(spec_o.variance(1), 2) == olh_integer
    assert spec_o.variance(1000) == pytest.approx(spec_o.variance(1) / 1000, rel=1e-12)
    # p*, q* (FO17 4.4-4.5) and the GRR-over-[g] probabilities
    assert spec_o.p == pytest.approx(e / (e + g - 1), rel=1e-14)
    assert spec_o.q == 1 / g
    assert spec_o.other_probability == pytest.approx(1 / (e + g - 1), rel=1e-14)
    assert spec_b.p == pytest.approx(e / (e + 1), rel=1e-14) and spec_b.q == 0.5


def test_olh_variance_validation_and_extremes():
    assert math.isfinite(olh_variance(800.0)) and olh_variance(800.0) >= 0
    assert olh_variance(1.0, 2) == pytest.approx(BLH(epsilon=1.0, domain_size=4).variance(1))
    with pytest.raises(ValueError, match="hash_range must be a finite number > 1"):
        olh_variance(1.0, 1.0)
    with pytest.raises(ValueError, match="epsilon must be"):
        olh_variance(0.0)


# -- privacy -------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 3.0, 10.0, 25.0])
def test_privacy_loss_is_epsilon(epsilon):
    for spec in (
        BLH(epsilon=epsilon, domain_size=6),
        OLH(epsilon=epsilon, domain_size=6),
        OLH(epsilon=epsilon, domain_size=6, hash_range=5),
    ):
        assert spec.privacy_loss() == pytest.approx(epsilon, rel=1e-9)
        assert spec.p + (spec.range_size - 1) * spec.other_probability == pytest.approx(
            1.0, rel=1e-12
        )


@pytest.mark.parametrize(
    "spec",
    [
        BLH(epsilon=1.0, domain_size=5),
        OLH(epsilon=1.5, domain_size=5),
        OLH(epsilon=0.7, domain_size=3, hash_range=6),
    ],
)
def test_transition_matrix_given_a_seed(spec):
    """Given the seed, P[y | v] is GRR over [g] centred on h(v): rows sum to 1, loss is
    eps when the seed separates two items and 0 when it hashes them all together."""
    with pytest.raises(NotImplementedError, match="seed"):
        spec.transition_matrix()
    g, d = spec.range_size, spec.domain_size
    seen_separating = False
    for seed in range(40):
        m = spec.transition_matrix(seed=seed)
        assert m.shape == (d, g)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
        h = spec.hash_items(np.array([seed], dtype=np.uint64), np.arange(d))
        np.testing.assert_array_equal(np.argmax(m, axis=1), h)
        loss = privacy_loss(m)
        if len(np.unique(h)) > 1:
            seen_separating = True
            assert loss == pytest.approx(spec.epsilon, rel=1e-9)
        else:
            assert loss == 0.0
    assert seen_separating
    # the g x g GRR matrix behind every seed has exactly the spec's privacy loss
    grr = np.full((g, g), spec.other_probability)
    np.fill_diagonal(grr, spec.p)
    assert privacy_loss(grr) == pytest.approx(spec.privacy_loss(), rel=1e-12)
    with pytest.raises(ValueError, match="seed must be an integer"):
        spec.transition_matrix(seed=-1)


def _offset_histogram(spec: LocalHashing, values: np.ndarray, rng: int) -> np.ndarray:
    """Histogram of (y - h_seed(v)) mod g: the GRR-over-[g] noise around the hashed item."""
    g = spec.range_size
    reports = spec.randomize(values, rng=rng)
    offset = (reports.values.astype(np.int64) - spec.hash_items(reports.seeds, values)) % g
    return np.bincount(offset, minlength=g)


@pytest.mark.parametrize(
    "spec",
    [
        BLH(epsilon=1.0, domain_size=10),
        OLH(epsilon=1.0, domain_size=50),
        OLH(epsilon=0.5, domain_size=7, hash_range=5),
        OLH(epsilon=3.0, domain_size=1000),
    ],
    ids=repr,
)
def test_sampler_is_grr_over_the_hash_range(spec):
    """y given h_seed(v) keeps w.p. p' and moves to each other value w.p. q'; the same
    chi-square must reject epsilon * 1.3 and swapped p'/q'."""
    g, n = spec.range_size, 120_000
    values = np.random.default_rng(0).integers(0, spec.domain_size, n)
    probs = np.full(g, spec.other_probability)
    probs[0] = spec.p
    p = chisquare_gof(_offset_histogram(spec, values, rng=1), probs)
    assert p > ALPHA, f"offset distribution off: chi-square p = {p:.2e}"
    # same g, louder epsilon (OLH's default g would otherwise move with epsilon)
    fixed = {"hash_range": g} if isinstance(spec, OLH) else {}
    louder = spec.replace(epsilon=spec.epsilon * 1.3, **fixed)
    assert louder.range_size == g
    assert chisquare_gof(_offset_histogram(louder, values, rng=2), probs) < ALPHA
    swapped = np.full(g, spec.p)
    swapped[0] = spec.other_probability
    assert chisquare_gof(_offset_histogram(spec, values, rng=3), swapped) < ALPHA


# -- estimator -------------------------------------------------------------------------------


def zipf(d: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    w = 1.0 / np.arange(1, d + 1)
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(d), counts)
    np.random.default_rng(seed).shuffle(values)
    return values, counts / n


@pytest.mark.parametrize(
    "spec",
    [
        BLH(epsilon=1.0, domain_size=200),
        OLH(epsilon=1.0, domain_size=200),
        OLH(epsilon=2.0, domain_size=200, hash_range=3),
        OLH(epsilon=0.5, domain_size=200),
    ],
    ids=repr,
)
def test_unbiased_with_large_domain(spec):
    n = 1_000_000  # enough for the epsilon x 1.3 bias to show at epsilon = 0.5
    values, truth = zipf(spec.domain_size, n, seed=5)
    stats = spec.aggregate(spec.randomize(values, rng=6))
    est = spec.estimate(stats)
    z = (est.frequencies - truth) / np.sqrt(spec.variance(n, truth))
    limit = bonferroni_z(ALPHA, spec.domain_size)
    assert np.max(np.abs(z)) < limit, f"max |z| = {np.max(np.abs(z)):.2f}"
    # power: estimating with epsilon * 1.3's constants is detectably biased
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    freq = (stats.counts / n - wrong.q) / (wrong.p - wrong.q)
    assert np.max(np.abs((freq - truth) / np.sqrt(spec.variance(n, truth)))) > limit


@pytest.mark.parametrize(
    "spec",
    [OLH(epsilon=0.5, domain_size=10, hash_range=20), BLH(epsilon=2.0, domain_size=10)],
    ids=repr,
)
def test_variance_matches_formula(spec):
    d, n, runs = spec.domain_size, 2_000, 300
    values, truth = zipf(d, n, seed=8)
    gens = np.random.default_rng(9).spawn(runs)
    freqs = np.array([spec.run(values, rng=g).frequencies for g in gens])
    ratio = freqs.var(axis=0, ddof=1) / spec.variance(n, truth)
    lo, hi = variance_ratio_bounds(runs - 1, ALPHA / d)
    assert np.all((ratio > lo) & (ratio < hi)), (
        f"ratios {np.round(ratio, 3)} outside [{lo:.2f}, {hi:.2f}]"
    )
    # the test has power: OLH at its optimal g (a different variance) is rejected
    other = OLH(epsilon=spec.epsilon, domain_size=d)
    assert other.range_size != spec.range_size
    ratio_other = freqs.var(axis=0, ddof=1) / other.variance(n, truth)
    assert not np.all((ratio_other > lo) & (ratio_other < hi))


@pytest.mark.parametrize("eps", np.linspace(0.05, 8.0, 60))
def test_default_hash_range_is_the_best_integer(eps):
    from ldpkit.frequency.hashing import olh_variance, optimal_hash_range

    g = optimal_hash_range(eps)
    best = min(range(2, int(np.exp(eps)) + 4), key=lambda h: olh_variance(eps, h))
    assert olh_variance(eps, g) == pytest.approx(olh_variance(eps, best), rel=1e-12)


def test_aggregation_survives_fork():
    """Compiled aggregation in a parent must not break forked children (no OpenMP)."""
    import multiprocessing as mp

    spec = OLH(epsilon=1.0, domain_size=64)
    reports = spec.randomize(np.arange(64).repeat(2000), rng=0)
    expected = spec.aggregate(reports)
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map(spec.aggregate, [reports, reports])
    assert all(g == expected for g in got)
