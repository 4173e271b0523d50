"""Open-domain oracles: CMS, HCMS (Apple 2017) and FLH (Cormode et al. 2021).

Item keys are pinned to their documented format; the samplers are checked exactly against
their transition matrices; the estimators are z-tested for unbiasedness and their spread
against the papers' variance (each with a companion that fails at a wrong epsilon).
"""

from __future__ import annotations

import functools
import hashlib
import math

import numpy as np
import pytest

from ldpkit import CMS, FLH, HCMS, Stats
from ldpkit.frequency._items import ITEM_KEY_FORMAT, item_key, item_keys, row_hash
from ldpkit.privacy import privacy_loss
from ldpkit.testing import check_mechanism, chisquare_gof, variance_ratio_bounds

ALPHA = 1e-6


def reference_key(item: object) -> int:
    """The documented format ldpkit.item/1, written out independently."""
    if isinstance(item, str):
        data = b"s" + item.encode("utf-8")
    else:
        x = int(item)  # type: ignore[call-overload]
        n = (x.bit_length() + 8) // 8
        data = b"i" + x.to_bytes(n, "big", signed=True)
    digest = hashlib.blake2b(data, digest_size=8, person=b"ldpkit.item.v1").digest()
    return int.from_bytes(digest, "little")


# --- item keys and row hashes ------------------------------------------------------------------


def test_item_keys_follow_the_documented_format():
    items = ["", "a", "zoë", "🙂", 0, 1, -1, 255, -256, 2**63, 2**200, -(2**100)]
    assert ITEM_KEY_FORMAT == "ldpkit.item/1"
    assert [item_key(x) for x in items] == [reference_key(x) for x in items]
    keys = item_keys(np.array(items, dtype=object))
    assert keys.dtype == np.uint64 and keys.tolist() == [reference_key(x) for x in items]
    # pinned values: a change of format must be a new version, never a silent change
    assert item_key("hello") == reference_key("hello")
    assert f"{item_key(0):016x}" == f"{reference_key(0):016x}"
    assert item_key(1) != item_key("1") and item_key(np.int64(7)) == item_key(7)
    assert item_key(1 << 64) != item_key(0)  # no wrap-around of big integers


def test_pinned_vectors():
    """Literal values (for the JS client's shared vectors): a change is a new format version."""
    pinned = {
        "hello": 0x0F0DE17E8E2F078C,
        "zoë": 0x74EF6E0EBCCFE6E8,
        0: 0xE00D2C10CF66E5B2,
        -1: 0xD1746FA69908CF57,
        2**70: 0xCA4A41143B0FBD99,
    }
    assert {x: item_key(x) for x in pinned} == pinned
    assert row_hash(np.arange(3), np.uint64(pinned["hello"]), 1024).tolist() == [154, 649, 211]


def test_candidate_estimates_feed_heavy_hitters():
    from ldpkit import heavy_hitters

    spec = CMS(epsilon=4.0, width=256, depth=16)
    values = ["a"] * 3000 + ["b"] * 1000 + [f"x{i}" for i in range(6000)]
    est = spec.run(values, rng=0, candidates=["a", "b", "c", "x1"])
    assert list(heavy_hitters(est, 0.05)) == ["a", "b"]


def test_item_keys_agree_across_input_kinds():
    strings = ["b", "a", "b", "c"]
    expect = [reference_key(s) for s in strings]
    assert item_keys(strings).tolist() == expect
    assert item_keys(np.array(strings)).tolist() == expect
    assert item_keys(tuple(strings)).tolist() == expect
    ints = [5, 3, 5, 2**70]
    assert item_keys(ints).tolist() == [reference_key(x) for x in ints]
    assert item_keys(np.array([5, 3, 5])).tolist() == [reference_key(x) for x in (5, 3, 5)]
    assert item_keys("solo").tolist() == [reference_key("solo")]
    assert item_keys([]).shape == (0,)
    mixed = ["1", 1, "x", 1]
    assert item_keys(mixed).tolist() == [reference_key(x) for x in mixed]


@pytest.mark.parametrize(
    "arr",
    [
        np.array([5, -3, 5, 0, -3, 7], dtype=np.int64),  # dense table
        np.array([1, 200, 1], dtype=np.uint8),
        np.array([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64),  # dense, near the top
        np.array([-(2**63), 2**63 - 1, 0, 0], dtype=np.int64),  # sparse: the sort
        np.random.default_rng(6).integers(-50, 50, 5000),
    ],
)
def test_integer_array_keys_are_exact(arr):
    assert item_keys(arr).tolist() == [reference_key(int(x)) for x in arr]
    assert item_keys(arr, domain_size=None).tolist() == item_keys(arr.tolist()).tolist()


def test_large_string_inputs_are_exact():
    """Large inputs (lists, numpy strings, NUL-ended strings): the same keys item by item."""
    gen = np.random.default_rng(4)
    words = ["", "a", "a\x00", "\x00", "zoë", "🙂x", "longer word here"] + [
        f"w{i}" for i in range(3000)
    ]
    users = [words[i] for i in gen.integers(0, len(words), 20_000)]
    expect = [reference_key(w) for w in users]
    assert item_keys(users).tolist() == expect  # a list (NUL-ended strings: dict path)
    plain = [w for w in users if not w.endswith("\x00")]
    assert item_keys(np.array(plain)).tolist() == [reference_key(w) for w in plain]
    assert item_keys(plain).tolist() == [reference_key(w) for w in plain]


@pytest.mark.parametrize(
    "bad, exc",
    [
        ([1.5, 2.0], TypeError),
        ([True, "a"], TypeError),
        ([1, True], TypeError),
        ([None], TypeError),
        ([b"x"], TypeError),
        (np.array([1.0]), TypeError),
        (np.array([b"x"]), TypeError),
        (np.array([[1, 2]]), ValueError),
        (["\ud800"], ValueError),
        (np.ma.masked_array([1, 2], mask=[0, 1]), TypeError),
    ],
)
def test_item_keys_refuse_what_is_not_an_item(bad, exc):
    with pytest.raises(exc, match="values must be"):
        item_keys(bad)


def test_row_hash_is_uniform_and_rows_differ():
    keys = item_keys([f"w{i}" for i in range(40_000)])
    for width in (16, 56):  # a power of two and OLH's range at eps = 4
        h = row_hash(3, keys, width)
        assert h.min() >= 0 and h.max() < width
        p = chisquare_gof(np.bincount(h, minlength=width), np.full(width, 1.0 / width))
        assert p > ALPHA
    # two rows are (empirically) independent: the joint histogram is uniform on 16 x 16
    joint = row_hash(0, keys, 16) * 16 + row_hash(1, keys, 16)
    assert chisquare_gof(np.bincount(joint, minlength=256), np.full(256, 1 / 256)) > ALPHA
    # broadcasting rows against keys, as the estimators use it
    table = row_hash(np.arange(4)[:, None], keys[None, :8], 16)
    assert table.shape == (4, 8) and np.array_equal(table[2], row_hash(2, keys[:8], 16))


# --- specs, validation, contract on open domains ------------------------------------------------

SPECS = {
    "CMS": lambda eps, **kw: CMS(epsilon=eps, **{"width": 64, "depth": 32, **kw}),
    "HCMS": lambda eps, **kw: HCMS(epsilon=eps, **{"width": 64, "depth": 32, **kw}),
    "FLH": lambda eps, **kw: FLH(epsilon=eps, **{"num_hashes": 32, "hash_range": 8, **kw}),
}


@pytest.mark.parametrize("name", SPECS)
def test_contract_on_an_open_domain(name):
    spec = SPECS[name](1.0)
    check_mechanism(spec, rng=5, checks=["validation", "merge", "loop", "privacy"])


@pytest.mark.parametrize("name", SPECS)
def test_open_domain_flow(name):
    import json
    import pickle

    spec = SPECS[name](2.0)
    values = ["x", "y", 10**30, "x", -3] * 4
    a, b = spec.randomize(values, rng=1), spec.randomize(values, rng=1)
    assert a.equals(b) and not a.equals(spec.randomize(values, rng=2))
    secure = spec.randomize(values)  # rng=None: the secure generator
    stats = spec.aggregate(a).merge(spec.aggregate(secure))
    assert stats.n == 40
    back = Stats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert back == stats and pickle.loads(pickle.dumps(stats)) == stats
    est = spec.estimate(back, candidates=["x", 10**30, "never"])
    assert est.labels == ["x", 10**30, "never"] and est.spec == spec and est.n == 40
    assert np.array_equal(est.frequencies, spec.estimate(stats, ["x", 10**30, "never"]).frequencies)
    assert np.all(np.isfinite(est.frequencies)) and np.all(est.variance > 0)
    assert spec.run(values, rng=0, candidates=["x"]).frequencies.shape == (1,)
    with pytest.raises(ValueError, match="candidates must be given"):
        spec.estimate(stats)
    with pytest.raises(ValueError, match="candidates must be distinct"):
        spec.estimate(stats, candidates=["x", "x"])
    with pytest.raises(ValueError, match="candidates must hold"):
        spec.estimate(stats, candidates=[])
    with pytest.raises(TypeError, match="candidates must be"):
        spec.estimate(stats, candidates=[1.5])
    with pytest.raises(TypeError, match="candidates must be"):
        spec.estimate(stats, candidates="x")
    with pytest.raises(ValueError, match="stats must summarize"):
        spec.estimate(Stats.empty(spec), candidates=["x"])


def test_closed_domain_estimates_its_items_by_default():
    spec = CMS(epsilon=2.0, width=32, depth=4, domain_size=5)
    stats = spec.aggregate(spec.randomize([0, 1, 4, 4], rng=0))
    est = spec.estimate(stats)
    assert est.frequencies.shape == (5,) and est.labels is None and est.spec == spec
    sub = spec.estimate(stats, candidates=[4, 0])
    assert np.array_equal(sub.frequencies, est.frequencies[[4, 0]]) and sub.spec is None
    with pytest.raises(ValueError, match="values must be integers in"):
        spec.randomize([5])
    with pytest.raises(TypeError, match="values must be integers in"):
        spec.randomize(["a"])


@pytest.mark.parametrize(
    "make, field, bad",
    [
        (CMS, "width", 1),
        (CMS, "depth", 0),
        (CMS, "width", 2**21),
        (HCMS, "width", 48),
        (HCMS, "depth", 2.5),
        (FLH, "num_hashes", 0),
        (FLH, "hash_range", 1),
        (CMS, "domain_size", 1),
    ],
)
def test_sizes_are_validated(make, field, bad):
    with pytest.raises((ValueError, TypeError), match=f"{field} must be"):
        make(epsilon=1.0, **{field: bad})


@pytest.mark.parametrize("name", SPECS)
def test_corrupt_reports_are_refused(name):
    from ldpkit import Reports

    spec = SPECS[name](1.0)
    reports = spec.randomize(["a", "b"], rng=0)
    arrays = {k: np.array(v) for k, v in reports.arrays.items()}
    arrays["rows"] = np.array([0, 10**6])
    with pytest.raises(ValueError, match="reports.rows must be"):
        spec.aggregate(Reports(spec, **arrays))


# --- exact laws ------------------------------------------------------------------------------------


def _output_index(spec, reports):
    if isinstance(spec, CMS):
        return (reports.bits[:, 0] >> (8 - spec.width)).astype(np.int64)
    if isinstance(spec, HCMS):
        return 2 * reports.index.astype(np.int64) + reports.bits
    return reports.values.astype(np.int64)


@pytest.mark.parametrize(
    "spec",
    [
        CMS(epsilon=1.5, width=4, depth=3, domain_size=5),
        HCMS(epsilon=1.5, width=4, depth=3, domain_size=5),
        FLH(epsilon=1.5, num_hashes=3, hash_range=6, domain_size=5),
    ],
    ids=["CMS", "HCMS", "FLH"],
)
def test_sampler_matches_the_transition_matrix(spec):
    n = 60_000
    for item in (0, 3):
        reports = spec.randomize(np.full(n, item), rng=item + 11)
        rows = reports.rows.astype(np.int64)
        # the row is uniform and independent of the item
        assert chisquare_gof(np.bincount(rows, minlength=3), np.full(3, 1 / 3)) > ALPHA
        for row in range(3):
            matrix = spec.transition_matrix(row=row)
            assert np.allclose(matrix.sum(axis=1), 1.0, rtol=0, atol=1e-12)
            assert privacy_loss(matrix) <= spec.privacy_loss() * (1 + 1e-12)
            out = _output_index(spec, reports)[rows == row]
            observed = np.bincount(out, minlength=matrix.shape[1])
            assert chisquare_gof(observed, matrix[item]) > ALPHA
    # the same check rejects the law of epsilon x 1.3
    wrong = spec.replace(epsilon=spec.epsilon * 1.3).randomize(np.full(n, 3), rng=5)
    rows = wrong.rows.astype(np.int64)
    out = _output_index(spec, wrong)[rows == 0]
    matrix = spec.transition_matrix(row=0)
    assert chisquare_gof(np.bincount(out, minlength=matrix.shape[1]), matrix[3]) < ALPHA
    # some row hashes two items apart: there the loss is exactly privacy_loss()
    losses = [privacy_loss(spec.transition_matrix(row=r)) for r in range(3)]
    assert max(losses) == pytest.approx(spec.privacy_loss(), rel=1e-9)
    assert spec.privacy_loss() <= spec.epsilon and spec.privacy_loss() > spec.epsilon * (1 - 1e-7)
    with pytest.raises(NotImplementedError):
        spec.transition_matrix()


def test_cms_kernel_matches_numpy():
    from ldpkit.frequency._kernels_sketch import row_bit_counts

    spec = CMS(epsilon=1.0, width=75, depth=9)  # a width that pads its last byte
    reports = spec.randomize([f"w{i % 300}" for i in range(9000)], rng=2)
    rows = reports.rows.astype(np.int64)
    expect = spec._row_counts_numpy(rows, reports.bits)
    assert np.array_equal(row_bit_counts(rows, reports.bits, 9, 75), expect)
    assert np.array_equal(spec.aggregate(reports).ones, expect)  # 9000 reports: the kernel
    assert np.array_equal(
        spec.aggregate(reports[:100]).ones, spec._row_counts_numpy(rows[:100], reports.bits[:100])
    )


@pytest.mark.parametrize("width", [64, 192])
def test_cms_bit_sliced_kernel_matches_numpy(width):
    from ldpkit.frequency._kernels_sketch import row_bit_counts

    # whole 64-bit words: the carry-save adders (16 reports of a row per step, the last
    # < 16 one by one); ~2,000 reports per row
    spec = CMS(epsilon=0.5, width=width, depth=5)
    reports = spec.randomize([f"w{i % 300}" for i in range(10_000)], rng=3)
    rows = reports.rows.astype(np.int64)
    expect = spec._row_counts_numpy(rows, reports.bits)
    assert np.bincount(rows).min() > 3 * 16
    assert np.array_equal(row_bit_counts(rows, reports.bits, 5, width), expect)
    few = spec._row_counts_numpy(rows[:7], reports.bits[:7])  # no row reaches 16
    assert np.array_equal(row_bit_counts(rows[:7], reports.bits[:7], 5, width), few)


def test_cms_bits_are_the_paper_law():
    """CMS's per-bit flip probability is 1 / (1 + e^(eps/2)) (Apple 2017, Algorithm 2)."""
    spec = CMS(epsilon=3.0, width=16, depth=2)
    assert spec.q == pytest.approx(1.0 / (1.0 + math.exp(1.5)), rel=1e-12)
    assert spec.p == pytest.approx(1.0 - spec.q, rel=1e-12)
    n = 50_000
    reports = spec.randomize(["k"] * n, rng=3)
    bits = np.unpackbits(reports.bits, axis=1)
    hashed = row_hash(reports.rows.astype(np.int64), item_keys(["k"] * n), 16)
    own = bits[np.arange(n), hashed]
    assert abs(own.mean() - spec.p) < 6 * math.sqrt(spec.p * (1 - spec.p) / n)
    others = (bits.sum() - own.sum()) / (n * 15)
    assert abs(others - spec.q) < 6 * math.sqrt(spec.q * (1 - spec.q) / (n * 15))


def test_hcms_flip_is_the_paper_law():
    spec = HCMS(epsilon=2.0, width=8, depth=2)
    assert 1.0 - spec.p == pytest.approx(1.0 / (1.0 + math.exp(2.0)), rel=1e-12)
    assert spec.c == pytest.approx((math.exp(2.0) + 1) / (math.exp(2.0) - 1), rel=1e-12)


# --- unbiasedness and the papers' variance --------------------------------------------------------
#
# n users per batch: 20 % hold "target", 10 % "second", the rest distinct strings (so their
# hash collisions are independent, as the papers' variance assumes). Conditionally on the
# fixed public family the mean of an estimate is computable exactly from the data and the
# hash tables (the collision rates rho_u); over the draw of the family it is the truth.

N, BATCHES = 4_000, 120
DISTINCT = 50_000  # others: about N * 0.7 / DISTINCT < 0.06 users per item and batch


@functools.cache
def _data(seed: int) -> np.ndarray:
    # exactly 20 % and 10 % in every batch: the spread across batches is the mechanism's
    gen = np.random.default_rng(seed)
    batch = np.arange(N)
    kind = np.where(batch < 0.2 * N, 0, np.where(batch < 0.3 * N, 1, 2))
    kind = np.tile(kind, BATCHES)
    others = np.char.add("u", gen.integers(0, DISTINCT, N * BATCHES).astype(str))
    return np.where(kind == 0, "target", np.where(kind == 1, "second", others))


def _offset_sd(spec, data: np.ndarray, candidate: str) -> float:
    """Standard deviation (over families) of the fixed family's collision offset."""
    items, counts = np.unique(data, return_counts=True)
    f = (counts / counts.sum())[items != candidate]
    rows, width = spec._rows, spec._width
    if isinstance(spec, FLH):
        scale = (spec.p - (1.0 - spec.p) / (width - 1)) / (spec.p - 1.0 / width)
    else:
        scale = width / (width - 1.0)
    return scale * math.sqrt(float(np.sum(f**2)) / (rows * width))


def _conditional_mean(spec, data: np.ndarray, candidate: str) -> float:
    """E[f~(candidate) | public family] from the data's collision rates."""
    items, counts = np.unique(data, return_counts=True)
    f = counts / counts.sum()
    keys = item_keys(items)
    table = spec.candidate_buckets(keys)  # (rows, items)
    mine = spec.candidate_buckets(item_keys([candidate]))  # (rows, 1)
    rho = (table == mine).mean(axis=0)  # share of rows where each item collides
    support = float(np.sum(f * rho))
    if isinstance(spec, FLH):
        g, p = spec.range_size, spec.p
        other = (1.0 - p) / (g - 1)
        return (support * p + (1.0 - support) * other - 1.0 / g) / (p - 1.0 / g)
    m = spec.width
    return m / (m - 1.0) * (support - 1.0 / m)


def _batch_estimates(spec, data: np.ndarray, seed: int, wrong=None):
    reports = spec.randomize(data, rng=seed)
    est = []
    for b in range(BATCHES):
        stats = spec.aggregate(reports[b * N : (b + 1) * N])
        if wrong is not None:  # the same counts, debiased with another spec's constants
            stats = Stats(wrong, stats.n, **stats.arrays)
        use = wrong if wrong is not None else spec
        est.append(use.estimate(stats, candidates=["target", "second", "absent"]).frequencies)
    return np.array(est)


def _z_scores(spec, data, estimates):
    truth = np.array([_conditional_mean(spec, data, c) for c in ("target", "second", "absent")])
    f = np.array([0.2, 0.1, 0.0])
    var = np.array([spec.variance(N, x) for x in f])
    z = (estimates.mean(axis=0) - truth) / np.sqrt(var / BATCHES)
    ratio = estimates.var(axis=0, ddof=1) / var
    return z, ratio, truth


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_unbiased_with_the_papers_variance(name, eps):
    spec = SPECS[name](eps)
    data = _data(7)
    z, ratio, truth = _z_scores(spec, data, _batch_estimates(spec, data, seed=8))
    assert np.all(np.abs(z) < 5), z
    low, high = variance_ratio_bounds(BATCHES - 1, ALPHA)
    assert np.all((ratio > low) & (ratio < high)), ratio
    # the conditional mean is the truth up to the fixed family's collision offset
    sd = [_offset_sd(spec, data, c) for c in ("target", "second", "absent")]
    assert np.all(np.abs(truth - [0.2, 0.1, 0.0]) < 5 * np.array(sd)), (truth, sd)


@pytest.mark.parametrize("name", SPECS)
def test_the_check_fails_at_a_wrong_epsilon(name):
    spec = SPECS[name](2.0)
    data = _data(7)
    wrong = spec.replace(epsilon=2.6)
    z, ratio, _ = _z_scores(spec, data, _batch_estimates(spec, data, seed=8, wrong=wrong))
    low, high = variance_ratio_bounds(BATCHES - 1, ALPHA)
    assert np.max(np.abs(z)) > 6 or np.any((ratio < low) | (ratio > high)), (z, ratio)
    assert np.max(np.abs(z)) > 6, z


def test_unbiased_over_families():
    """Over independent families (here: disjoint rows of one big family), the collision
    offsets of heavy items average out: the mean over rows is the truth."""
    big = CMS(epsilon=8.0, width=16, depth=4096)
    data = np.array(["target"] * 200 + ["second"] * 300 + ["third"] * 500)
    items, counts = np.unique(data, return_counts=True)
    f = counts / counts.sum()
    keys = item_keys(items)
    table = big.candidate_buckets(keys)
    mine = big.candidate_buckets(item_keys(["target"]))
    rho = (table == mine).astype(float)  # (rows, items)
    per_row_mean = 16 / 15 * (rho @ f - 1 / 16)  # E[f~ | one-row family]
    sd = per_row_mean.std(ddof=1) / math.sqrt(per_row_mean.size)
    assert abs(per_row_mean.mean() - 0.2) < 5 * sd


@pytest.mark.parametrize("cls", [CMS, HCMS, FLH])
def test_closed_domain_is_bounded_by_the_work_budget_and_int64(cls):
    """The closed domain's estimate hashes every item under every row: a domain whose
    estimate would run for minutes is refused at construction, naming domain_size; so is
    one beyond int64 (its items would be an open-domain spec's)."""
    with pytest.raises(ValueError, match=r"domain_size=1048576 at \d+ hash rows must keep"):
        cls(epsilon=1.0, domain_size=2**20)
    with pytest.raises(
        ValueError, match=r"domain_size must be an integer in \[2, 4611686018427387904\]"
    ):
        cls(epsilon=1.0, domain_size=10**20)
    assert cls(epsilon=1.0, domain_size=2**14).domain_size == 2**14
