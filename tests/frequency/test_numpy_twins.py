"""Numpy twins of the compiled client-side kernels give the same bytes for the same seeds.

The client path runs them for small batches and whenever numba is absent, so reports must
not depend on which one ran.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import _parallel
from ldpkit.frequency import OUE, SUE, SubsetSelection, _unary_sampler, subset
from ldpkit.frequency._kernels_subset import floyd_kernel
from ldpkit.frequency._kernels_unary import sample_unary_bits as kernel
from ldpkit.frequency._kernels_unary import xoshiro_uint64
from ldpkit.frequency.unary import PROBABILITY_SCALE, unary_integer_probabilities

S = PROBABILITY_SCALE  # the sampler's resolution: probabilities are multiples of 1 / S


def _both(values, seeds, d, big, small):
    width = (d + 7) // 8
    a = np.full((values.shape[0], width), 0xAA, dtype=np.uint8)  # garbage: all bytes rewritten
    b = np.full((values.shape[0], width), 0x55, dtype=np.uint8)
    kernel(values, seeds, d, big, small, a)
    _unary_sampler.sample_unary_bits_numpy(values, seeds, d, big, small, b)
    return a, b


def _t(x: float) -> int:
    return min(max(round(x * S), 1), S - 1)


@pytest.mark.parametrize(
    ("d", "n", "big", "small"),
    [
        (2, 500, _t(0.5), _t(1 / (math.e + 1))),  # OUE, one byte with 6 padding bits
        (8, 300, _t(0.5), _t(0.25)),  # exactly one byte
        (9, 300, _t(0.7), _t(0.3)),  # 7 padding bits in the second byte
        (64, 200, _t(0.5), _t(0.1)),  # exactly one 64-bit word
        (65, 200, _t(0.6), _t(0.4)),  # one bit into the second word
        (1000, 300, _t(0.5), _t(1 / (math.exp(4) + 1))),
        (130, 100, S - 1, 1),  # extreme thresholds
        (130, 100, S // 2, S // 2 - 1),  # a 0 then all ones: lanes stay open long
        (130, 100, S // 3 * 2, S // 3),  # alternating bits
    ],
)
def test_numpy_twin_matches_kernel_bytes(d, n, big, small):
    rng = np.random.default_rng(d * 1000 + n + small % 1000)
    values = rng.integers(0, d, n)
    seeds = rng.integers(0, 2**64, n, dtype=np.uint64)
    a, b = _both(values, seeds, d, big, small)
    np.testing.assert_array_equal(a, b)
    if small > S >> 12:  # the comparison can fail: other seeds give other bytes
        c, _ = _both(values, seeds + np.uint64(1), d, big, small)
        assert not np.array_equal(a, c)


def test_numpy_twin_matches_kernel_across_chunks(monkeypatch):
    monkeypatch.setattr(_unary_sampler, "_CHUNK_ROWS", 7)  # many chunks, a ragged last one
    rng = np.random.default_rng(5)
    values = rng.integers(0, 100, 50)
    seeds = rng.integers(0, 2**64, 50, dtype=np.uint64)
    big, small = unary_integer_probabilities(0.5, 1 / (math.exp(1) + 1), 1.0)
    a, b = _both(values, seeds, 100, big, small)
    np.testing.assert_array_equal(a, b)


def test_numpy_xoshiro_matches_kernel_stream():
    seeds = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    state = _unary_sampler._seed_state(seeds)
    draws = np.stack([_unary_sampler._next(state) for _ in range(40)], axis=1)
    for i, seed in enumerate(seeds):
        np.testing.assert_array_equal(draws[i], xoshiro_uint64(seed, 40))


@pytest.mark.parametrize("cls", [OUE, SUE])
def test_randomize_is_the_same_on_both_paths(cls, monkeypatch):
    spec = cls(epsilon=1.5, domain_size=300)
    values = np.arange(2000) % 300
    monkeypatch.setattr(_unary_sampler, "COMPILED_MIN_BITS", 0)  # force the kernel
    monkeypatch.setattr(_parallel, "numba_available", lambda: True)
    compiled = spec.randomize(values, rng=11).bits
    monkeypatch.setattr(_parallel, "numba_available", lambda: False)  # as without numba
    plain = spec.randomize(values, rng=11).bits
    np.testing.assert_array_equal(compiled, plain)


S2 = S * S  # the wide sampler's resolution


@pytest.mark.parametrize(
    ("d", "n", "big", "small"),
    [
        (2, 400, S2 // 2, S2 // 5),  # 8 rows share a word
        (9, 300, S2 // 3 * 2, S2 // 3),  # alternating bits across both words; 4 rows a word
        (20, 77, S2 // 2, S2 // 3),  # 2 rows of 24 lanes a word, 8 padding lanes unused
        (32, 1001, S2 // 2, S2 // 4),  # 2 rows a word; the last stream is partial
        (33, 50, S2 // 3, S2 // 5),  # one row a word, 8 rows a stream
        (64, 200, S2 - 1, 1),  # extreme thresholds: lanes stay open into the low word
        (65, 200, S2 // 2, S2 // 2 - 1),  # a 0 then 127 ones
        (130, 100, 3 * S2 // 4 + 12345, S * 77 + 5),  # high word small: the low word decides
        (8, 3, S2 - 1, 0),  # fewer rows than a word holds
    ],
)
def test_wide_numpy_twin_matches_kernel_bytes(d, n, big, small):
    from ldpkit.frequency._kernels_unary import sample_unary_bits_wide as wide_kernel

    rng = np.random.default_rng(d * 7 + n)
    values = rng.integers(0, d, n)
    seeds = rng.integers(0, 2**64, _unary_sampler.wide_seed_count(n, d), dtype=np.uint64)
    width = (d + 7) // 8
    a = np.full((n, width), 0xAA, dtype=np.uint8)
    b = np.full((n, width), 0x55, dtype=np.uint8)
    wide_kernel(values, seeds, d, big, small, a)
    _unary_sampler.sample_unary_bits_wide_numpy(values, seeds, d, big, small, b)
    np.testing.assert_array_equal(a, b)
    bits = np.unpackbits(a, axis=1)
    assert not bits[:, d:].any()  # padding bits are 0
    if small > S2 >> 12:  # the comparison can fail: other seeds give other bytes
        c = np.zeros_like(a)
        _unary_sampler.sample_unary_bits_wide_numpy(values, seeds + np.uint64(1), d, big, small, c)
        assert not np.array_equal(a, c)


@pytest.mark.parametrize("d", [4, 32, 70])
def test_wide_kernel_bytes_do_not_depend_on_threads_or_chunks(d, monkeypatch):
    from ldpkit.frequency._kernels_unary import sample_unary_bits_wide as wide_kernel

    n = 40_000 + 3  # several row blocks and numpy chunks, a partial last stream
    rng = np.random.default_rng(d)
    values = rng.integers(0, d, n)
    seeds = rng.integers(0, 2**64, _unary_sampler.wide_seed_count(n, d), dtype=np.uint64)
    out = [np.zeros((n, (d + 7) // 8), dtype=np.uint8) for _ in range(3)]
    wide_kernel(values, seeds, d, S2 // 2, S2 // 3, out[0], workers=1)
    wide_kernel(values, seeds, d, S2 // 2, S2 // 3, out[1], workers=3)
    monkeypatch.setattr(_unary_sampler, "_CHUNK_ROWS", 1000)
    _unary_sampler.sample_unary_bits_wide_numpy(values, seeds, d, S2 // 2, S2 // 3, out[2])
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])


def test_longitudinal_unary_randomize_is_the_same_on_both_paths(monkeypatch):
    from ldpkit.longitudinal import LOSUE

    spec = LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=70)
    values = np.arange(3000) % 70
    monkeypatch.setattr(_unary_sampler, "COMPILED_MIN_BITS", 0)
    monkeypatch.setattr(_parallel, "numba_available", lambda: True)
    compiled = spec.randomize(values, rng=8).bits
    monkeypatch.setattr(_parallel, "numba_available", lambda: False)
    plain = spec.randomize(values, rng=8).bits
    np.testing.assert_array_equal(compiled, plain)


def test_use_compiled_policy(monkeypatch):
    monkeypatch.setattr(_parallel, "numba_available", lambda: False)
    assert not _parallel.use_compiled(10**9, 10)
    monkeypatch.setattr(_parallel, "numba_available", lambda: True)
    assert _parallel.use_compiled(10, 10)
    import numba  # noqa: F401 - loaded: even small batches may use the kernel

    assert _parallel.use_compiled(1, 10)


@pytest.mark.parametrize(("d", "k"), [(2, 1), (10, 3), (10, 7), (37, 18), (64, 40), (300, 5)])
def test_floyd_numpy_twin_matches_kernel(d, k):
    rng = np.random.default_rng(d + k)
    c, others = 400, d - 1
    steps = min(k, others)
    values = rng.integers(0, d, c)
    full = rng.random(c) < 0.5
    draws = np.stack(
        [rng.integers(0, others - steps + s + 1, c, dtype=np.int32) for s in range(steps)]
    )
    width = (d + 7) // 8
    a = np.zeros((c, width), dtype=np.uint8)
    b = np.zeros((c, width), dtype=np.uint8)
    floyd_kernel(values, full, draws, others, a)
    subset._floyd_numpy(values, full, draws, others, b)
    np.testing.assert_array_equal(a, b)
    # Every row holds its step count of distinct members (never the user's own item).
    members = np.unpackbits(b, axis=1, count=d).sum(axis=1)
    np.testing.assert_array_equal(members, np.where(full, steps, steps - 1))


@pytest.mark.parametrize(("d", "epsilon"), [(16, 1.0), (50, 0.5), (200, 3.0)])
def test_subset_randomize_is_the_same_on_both_paths(d, epsilon, monkeypatch):
    spec = SubsetSelection(epsilon=epsilon, domain_size=d)
    values = np.arange(3000) % d
    monkeypatch.setattr(subset, "_COMPILED_MIN_STEPS", 0)
    monkeypatch.setattr(_parallel, "numba_available", lambda: True)
    compiled = spec.randomize(values, rng=4).bits
    monkeypatch.setattr(_parallel, "numba_available", lambda: False)
    plain = spec.randomize(values, rng=4).bits
    np.testing.assert_array_equal(compiled, plain)


@pytest.mark.parametrize("name", ["CMS", "HCMS", "FLH", "GRR"])
def test_sketch_hashes_and_grr_map_are_the_same_on_both_paths(name, monkeypatch):
    """The compiled row hash and GRR map against their numpy versions, byte for byte."""
    pytest.importorskip("numba")
    import ldpkit

    if name == "GRR":
        spec = ldpkit.GRR(epsilon=1.5, domain_size=300)
        values = np.random.default_rng(4).integers(0, 300, 5000)
    else:
        kw = {"num_hashes": 50} if name == "FLH" else {"width": 256, "depth": 30}
        spec = getattr(ldpkit, name)(epsilon=3.0, **kw)
        rng = np.random.default_rng(5)
        values = [*rng.integers(0, 10**6, 2500).tolist(), *map(str, range(2500))]
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
    compiled = spec.randomize(values, rng=9).arrays
    monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)
    plain = spec.randomize(values, rng=9).arrays
    assert compiled.keys() == plain.keys()
    assert all(np.array_equal(compiled[k], plain[k]) for k in compiled)
    assert all(compiled[k].dtype == plain[k].dtype for k in compiled)


@pytest.mark.parametrize("name", ["PEM", "TreeHist", "SFP"])
def test_discovery_reports_are_the_same_on_both_paths(name, monkeypatch):
    """The discovery clients' compiled passes (grouping, keys, hashes) change no byte."""
    pytest.importorskip("numba")
    from ldpkit import discovery

    spec = getattr(discovery, name)(epsilon=3.0, max_length=6)
    rng = np.random.default_rng(6)
    words = ["", "a", "ab", "abc", "hello", "xyz", "zx", "abcdefgh"]
    if name != "SFP":  # (SFP's default alphabet is lowercase ASCII letters)
        words += ["héllo", "中文字", "😀x"]
    values = [words[i] for i in rng.integers(0, len(words), 6000)]
    for column in (values, np.array(values)):
        monkeypatch.setattr(_parallel, "use_compiled", lambda *_: True)
        compiled = spec.randomize(column, rng=3).arrays
        monkeypatch.setattr(_parallel, "use_compiled", lambda *_: False)
        plain = spec.randomize(column, rng=3).arrays
        assert compiled.keys() == plain.keys()
        assert all(np.array_equal(compiled[k], plain[k]) for k in compiled)
