"""OLH over mixed item keys: honest error bars for sums of cells (FullDomain, CALM).

ldpkit's hash family is pairwise but not 3-wise independent: the estimates of items in
arithmetic progression around a user's item correlate, so the summed variances understate
the variance of a range or of a marginal cell of a product domain. ``mix_items=True``
hashes a fixed bijective mix of each item (``fmix32``); these tests check that sums then
vary as their reported variances say (and did not before), the wire identities of the
earlier specs, and the marginals' z-tests and coverage.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Reports, Stats
from ldpkit.frequency.hashing import OLH, _support_counts_numpy, mix_item_keys
from ldpkit.multidim import CALM, FullDomain
from ldpkit.spec import Mechanism, spec_from_dict

SIZES = (2, 2, 2, 2, 2)


def skewed_population(n: int, seed: int = 5) -> np.ndarray:
    """Tuples over SIZES from a skewed distribution (a few heavy product cells)."""
    f = np.random.default_rng(seed).dirichlet(np.full(math.prod(SIZES), 0.3))
    counts = np.round(f * n).astype(np.int64)
    counts[np.argmax(counts)] += n - counts.sum()
    return np.array(np.unravel_index(np.repeat(np.arange(f.size), counts), SIZES)).T


def marginal_truth(x: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    bins = [np.arange(SIZES[a] + 1) for a in attrs]
    return np.histogramdd(x[:, list(attrs)], bins=bins)[0] / x.shape[0]


def test_mixed_keys_are_distinct_32_bit_words() -> None:
    items = np.concatenate([np.arange(1 << 16), [(1 << 32) - 1, 1 << 31, 123456789]])
    keys = mix_item_keys(items)
    assert keys.dtype == np.uint64 and int(keys.max()) < 1 << 32
    assert np.unique(keys).size == items.size  # a bijection: no two items share a key
    # fmix32 of 1 (MurmurHash3's finalizer, computed by hand from its definition)
    h = 1
    h ^= h >> 16
    h = (h * 0x85EBCA6B) % (1 << 32)
    h ^= h >> 13
    h = (h * 0xC2B2AE35) % (1 << 32)
    h ^= h >> 16
    assert int(keys[1]) == h


@pytest.mark.parametrize("g", [None, 70_000])  # the tabulated and the divided bucket windows
def test_keyed_support_counts_match_the_numpy_definition(g: int | None) -> None:
    spec = OLH(epsilon=2.0, domain_size=300, mix_items=True, hash_range=g)
    values = np.random.default_rng(0).integers(0, 300, 3000)
    r = spec.randomize(values, rng=1)
    counts = spec.support_counts(r)
    ref = _support_counts_numpy(r.seeds, r.values, spec.range_size, 300, mix_items=True)
    assert np.array_equal(counts, ref)
    # the client hashed the mixed key: each report supports its own item w.p. p
    kept = spec.hash_items(r.seeds, values) == r.values
    p = spec.p
    assert abs(kept.mean() - p) < 5 * math.sqrt(p * (1 - p) / values.size)


def test_earlier_specs_keep_their_wire_identity() -> None:
    # fingerprints of the releases before mix_items (computed there)
    old = {
        "c18b7bb07a6e7561": CALM(epsilon=1.0, domain_sizes=(2, 3, 4), ell=3, mix_items=False),
        "f16672771f24fec6": CALM(epsilon=1.0, domain_sizes=(2, 3, 4), oracle="grr"),
        "8729cae459995dbe": FullDomain(epsilon=1.0, domain_sizes=(2, 3)),
        "af83659bb6303e18": FullDomain(
            epsilon=1.0, domain_sizes=(2, 3), oracle="olh", mix_items=False
        ),
        "9ea6601debbe4b22": OLH(epsilon=1.0, domain_size=10, mix_items=False),
    }
    for fingerprint, spec in old.items():
        assert spec.fingerprint == fingerprint, spec
        assert "mix_items" not in spec.params()
        loaded = spec_from_dict(spec.to_dict())
        assert loaded == spec and not loaded.mix_items
    # the new default with OLH mixes, says so on the wire, and loads back as such
    for spec in (
        CALM(epsilon=1.0, domain_sizes=(2, 3, 4)),
        FullDomain(epsilon=1.0, domain_sizes=(2, 3), oracle="olh"),
        OLH(epsilon=1.0, domain_size=10, mix_items=True),
        OLH(epsilon=1.0, domain_size=10),  # plain OLH built now mixes too
    ):
        assert spec.mix_items is True and spec.params()["mix_items"] is True
        assert spec_from_dict(spec.to_dict()) == spec
        assert spec.fingerprint not in old


def test_mix_items_is_refused_without_olh() -> None:
    with pytest.raises(ValueError, match="mix_items must be False or None unless oracle is 'olh'"):
        CALM(epsilon=1.0, domain_sizes=(2, 3), oracle="grr", mix_items=True)
    with pytest.raises(ValueError, match="mix_items must be False or None unless oracle is 'olh'"):
        FullDomain(epsilon=1.0, domain_sizes=(2, 3), mix_items=True)
    with pytest.raises(TypeError, match="mix_items must be"):
        OLH(epsilon=1.0, domain_size=10, mix_items="yes")
    assert FullDomain(epsilon=1.0, domain_sizes=(2, 3)).mix_items is False


def range_sum_ratio(mix: bool, runs: int = 3000, n: int = 300) -> float:
    """Spread over runs of OLH's estimate of f(0..15) / its summed variances.

    Every user holds item 8 of 32 (the worst case: the range holds arithmetic
    progressions around it). The range's estimate is linear in each user's number of
    supported items of the range, so the runs are slices of one batch of reports.
    """
    spec = OLH(epsilon=2.0, domain_size=32, mix_items=mix)
    r = spec.randomize(np.full(runs * n, 8), rng=3)
    hits = spec.hash_items(r.seeds[:, None], np.arange(16)[None, :]) == r.values[:, None]
    supported = hits.sum(axis=1).reshape(runs, n).sum(axis=1)
    sums = (supported / n - 16 * spec.q) / (spec.p - spec.q)
    f = np.zeros(32)
    f[8] = 1.0
    return float(sums.var() / spec.variance(n, f)[:16].sum())


def test_a_range_sum_has_the_summed_variance_with_mixed_keys() -> None:
    # relative s.e. of the spread's ratio: sqrt(2 / 3000) = 0.026; 10 % is 3.9 s.e.
    assert abs(range_sum_ratio(True) - 1.0) < 0.10
    # the plain index: the range's estimate spreads ~1.6x its summed variances
    assert range_sum_ratio(False) > 1.3


def fulldomain_runs(
    spec: FullDomain, x: np.ndarray, runs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the estimates, reported and summed cell variances of marginal (4,) per run.

    A 1-way marginal of 5 binary attributes sums 16 product cells of stride 2 (an
    arithmetic progression); one batch of reports, a slice per run.
    """
    n = x.shape[0]
    r = spec.randomize(np.tile(x, (runs, 1)), rng=7)
    est, var, summed = np.empty((runs, 2)), np.empty((runs, 2)), np.empty((runs, 2))
    for i in range(runs):  # a loop over runs (each aggregates its n users at once)
        part = {k: a[i * n : (i + 1) * n] for k, a in r.arrays.items()}
        full = spec.estimate(spec.aggregate(Reports(spec, **part)))
        m = full.marginal((4,))
        est[i], var[i] = m.table, m.variance
        summed[i] = full.tables[0].variance.sum(axis=(0, 1, 2, 3))
    return est, var, summed


@pytest.mark.parametrize("mix", [True, False])
def test_fulldomain_marginal_variance_matches_the_spread(mix: bool) -> None:
    x = skewed_population(1000)
    spec = FullDomain(epsilon=2.0, domain_sizes=SIZES, oracle="olh", mix_items=mix)
    est, var, summed = fulldomain_runs(spec, x, 3000)
    ratio = est.var(axis=0) / var.mean(axis=0)
    # s.e. sqrt(2 / 3000) = 0.026 per cell: 10 % is 3.9 s.e.; plain cell indices report the
    # hash family's triple term (docs/design/METHODS.md, "Sums of plain local-hashing
    # estimates")
    assert np.all(np.abs(ratio - 1.0) < 0.10), ratio
    if not mix:  # the summed cell variances (the earlier report) fail on this marginal
        assert np.all(est.var(axis=0) / summed.mean(axis=0) > 1.15), ratio


def test_fulldomain_olh_z_test_and_wrong_epsilon() -> None:
    x = skewed_population(60_000, seed=2)
    spec = FullDomain(epsilon=1.0, domain_sizes=SIZES, oracle="olh")
    stats = spec.aggregate(spec.randomize(x, rng=4))

    def worst_z(decoder: FullDomain) -> float:
        est = decoder.estimate(Stats(decoder, stats.n, **stats.arrays))
        zs = []
        for attrs in [(0,), (1, 3), (4, 2, 0)]:
            m = est.marginal(attrs)
            zs.append(np.abs(m.table - marginal_truth(x, attrs)) / m.std_error)
        return float(np.max(np.concatenate([z.ravel() for z in zs])))

    assert worst_z(spec) < 5.0
    assert worst_z(spec.replace(epsilon=1.3)) > 6.0


def coverage_of(
    spec: Mechanism, x: np.ndarray, runs: int, scales: tuple[float, ...]
) -> list[float]:
    """Share of 95 % intervals (half-widths x each scale) of some 2-way cells holding the truth."""
    pairs = [(0, 1), (2, 4), (3, 1)]
    truth = [marginal_truth(x, p) for p in pairs]
    hits, total = np.zeros(len(scales)), 0
    gen = np.random.default_rng(9)
    for _ in range(runs):
        est = spec.estimate(spec.aggregate(spec.randomize(x, rng=gen)))
        for p, t in zip(pairs, truth, strict=True):
            m = est.marginal(p)
            z = np.abs(m.table - t) / (1.959964 * m.std_error)
            hits += [np.sum(z <= c) for c in scales]
            total += t.size
    return (hits / total).tolist()


@pytest.mark.parametrize(
    "spec",
    [
        FullDomain(epsilon=2.0, domain_sizes=SIZES, oracle="olh"),
        CALM(epsilon=2.0, domain_sizes=SIZES, ell=4),  # requested tables are projections
    ],
    ids=["FullDomain", "CALM-ell4"],
)
def test_marginal_coverage_and_its_power(spec: Mechanism) -> None:
    x = skewed_population(2000, seed=3)
    # 12 cells a run: 1800 intervals, s.e. of a 95 % coverage 0.005 (the cells of one run
    # are dependent, so a little more)
    plain, narrow, wide = coverage_of(spec, x, 150, (1.0, 0.7, 1.4))
    assert 0.92 <= plain <= 0.98
    assert narrow < 0.92  # 0.7x widths: ~0.83
    assert wide > 0.98  # 1.4x widths: ~0.994


def test_poisoning_hashes_the_mixed_keys() -> None:
    from ldpkit.poisoning import mga_reports, support_size_outliers

    spec = OLH(epsilon=2.0, domain_size=64, mix_items=True)
    targets = np.array([3, 17, 40])
    for evasive in (False, True):
        fake = mga_reports(spec, 200, targets, evasive=evasive, rng=0)
        # every fake report supports every target under the spec's own (mixed) hash
        support = spec.hash_items(fake.seeds[:, None], targets[None, :]) == fake.values[:, None]
        assert support.all()
    honest = spec.randomize(np.random.default_rng(1).integers(0, 64, 2000), rng=2)
    assert support_size_outliers(spec, honest).mean() < 0.01
