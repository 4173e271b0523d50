"""The secure unary sampler (``rng=None``): exact integer law, one stream order, any path.

:func:`ldpkit.frequency._unary_sampler.sample_unary_bits_secure` decides every bit as
``[U < T]`` bit-sliced over the AES-CTR generator's raw words. Checked here:

* the coins are exactly the comparisons of the words read (a single pair replayed from a
  twin generator), at CMS's thresholds and at extreme ones;
* the compiled chunks (words read through the bit generator's C function, on threads) and
  the numpy rounds (``random_raw``) read the same words in the same order: same bytes and
  the same final generator state, whatever the chunk size and the thread count;
* CMS's and OUE's secure reports have per-bit frequencies at the realized p and q
  (|z| <= 5), and the same check rejects a wrong epsilon and swapped probabilities.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ldpkit import CMS, OUE, _parallel
from ldpkit._rng import is_secure, secure_generator
from ldpkit.frequency import _unary_sampler
from ldpkit.frequency._unary_sampler import _chunk_streams, sample_unary_bits_secure
from ldpkit.frequency.sketch import _cms_thresholds
from ldpkit.frequency.unary import unary_privacy_loss

randomgen = pytest.importorskip("randomgen")

MAX_Z = 5.0


def _aes(seed: int) -> np.random.Generator:
    """An AES-CTR Generator as ``rng=None`` builds, keyed from a fixed seed."""
    from randomgen.aes import AESCounter

    gen = np.random.Generator(AESCounter(seed))
    assert is_secure(gen)
    return gen


def _force(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    if compiled:
        pytest.importorskip("numba")
    monkeypatch.setattr(_parallel, "use_compiled", lambda work, min_work: compiled)


def _sample(gen, values, width, big, small):
    out = np.empty((len(values), (width + 7) // 8), dtype=np.uint8)
    sample_unary_bits_secure(np.asarray(values), gen, width, big, small, out)
    return out


def _replay(words: np.ndarray, width: int, value: int, big: int, small: int) -> np.ndarray:
    """One report (width <= 64: one pair) from its words, comparing each lane's U with T.

    Round k's word gives bit 63 - k of every lane's U; a lane is settled at the first bit
    where U and T differ (U < T iff T's bit is the 1 there); the pair's rounds stop once
    all 64 lanes are settled (at most 64), and the next word decides the item's bit.
    """
    bits = np.zeros(64, dtype=np.uint8)  # by lane (bit position in the little-endian word)
    rounds = 0
    for lane in range(64):
        for k in range(64):
            u, t = (int(words[k]) >> lane) & 1, (small >> (63 - k)) & 1
            if u != t:
                bits[lane] = t
                rounds = max(rounds, k + 1)
                break
        else:  # U == T: not below it
            rounds = 64
    held = int(words[rounds])
    report = np.array([bits[8 * (j >> 3) + 7 - (j & 7)] for j in range(width)])
    report[value] = held < big
    return report


THRESHOLDS = {
    "cms eps 4": _cms_thresholds(4.0),
    "cms eps 0.5": _cms_thresholds(0.5),
    "extremes": ((1 << 64) - 1, 0),  # the item's bit 1 unless U is the maximum, others 0
    "all ones": ((1 << 63) + 1, (1 << 64) - 1),  # other bits 1 unless U is the maximum
}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", list(THRESHOLDS))
@pytest.mark.parametrize("width", [64, 13])
def test_coins_are_exact_comparisons_of_the_words_read(monkeypatch, compiled, name, width):
    _force(monkeypatch, compiled)
    big, small = THRESHOLDS[name]
    for seed in range(60):
        value = seed % width
        report = _sample(_aes(seed), [value], width, big, small)
        words = _aes(seed).bit_generator.random_raw(65)
        expected = _replay(words, width, value, big, small)
        got = np.unpackbits(report[0], count=width)
        np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}")
        assert not np.unpackbits(report[0])[width:].any()  # padding stays 0


@pytest.mark.parametrize("width", [1, 13, 64, 200, 1024])
@pytest.mark.parametrize("chunk_words", [1 << 6, 1 << 18])
def test_compiled_chunks_and_numpy_rounds_read_the_same_words(monkeypatch, width, chunk_words):
    """Same bytes and final generator state: numpy rounds, compiled on 1 or 2 threads."""
    pytest.importorskip("numba")
    monkeypatch.setattr(_unary_sampler, "_SECURE_CHUNK_WORDS", chunk_words)
    big, small = _cms_thresholds(2.0)
    values = np.random.default_rng(width).integers(0, width, size=700)
    results = []
    for compiled, workers in [(False, 1), (True, 1), (True, 2)]:
        monkeypatch.setattr(_parallel, "WORKERS", workers)
        _force(monkeypatch, compiled)
        gen = _aes(width)
        out = _sample(gen, values, width, big, small)
        results.append((out, int(gen.bit_generator.random_raw())))
    for out, state in results[1:]:
        np.testing.assert_array_equal(out, results[0][0])
        assert state == results[0][1]


def test_a_generator_that_cannot_spawn_serves_its_chunks_in_turn():
    class Unspawnable:
        def spawn(self, n):
            raise TypeError("no SeedSequence")

    gen = Unspawnable()
    assert _chunk_streams(gen, 3) == [gen, gen, gen]
    assert _chunk_streams(gen, 1) == [gen]


def _z_scores(bits: np.ndarray, hashed: np.ndarray, p: float, q: float) -> tuple[float, float]:
    """z of the item's bits' frequency against p, and the largest per-position z of the
    other bits' frequency against q."""
    n, width = bits.shape
    own = bits[np.arange(n), hashed]
    z_own = (own.mean() - p) / np.sqrt(p * (1 - p) / n)
    ones = bits.sum(axis=0) - np.bincount(hashed, weights=own, minlength=width)
    others = n - np.bincount(hashed, minlength=width)
    z_other = (ones - others * q) / np.sqrt(others * q * (1 - q))
    return float(z_own), float(np.abs(z_other).max())


def _secure_cms_bits(spec: CMS, seed: int, n: int):
    values = np.random.default_rng(seed).integers(0, 10**9, size=n)
    reports = spec.randomize(values, rng=_aes(seed))
    hashed = spec._hash_users(reports.rows.astype(np.int64), spec.item_keys(values))
    return np.unpackbits(reports.bits, axis=1, count=spec.width), hashed


def test_cms_secure_bits_have_the_realized_probabilities():
    """20,000 reports of 1024 bits (the compiled chunks, on threads where there are two)."""
    spec = CMS(epsilon=4.0, width=1024, depth=8)
    big, small = _cms_thresholds(4.0)
    assert (spec.p, spec.q) == (big / 2.0**64, small / 2.0**64)
    assert spec.privacy_loss() == unary_privacy_loss(big, small) <= spec.epsilon
    bits, hashed = _secure_cms_bits(spec, 3, 20_000)
    z_own, z_other = _z_scores(bits, hashed, spec.p, spec.q)
    assert abs(z_own) <= MAX_Z and z_other <= MAX_Z, (z_own, z_other)
    # the same check rejects a wrong epsilon and swapped probabilities
    wrong = CMS(epsilon=4.5, width=1024, depth=8)
    z_own, z_other = _z_scores(bits, hashed, wrong.p, wrong.q)
    assert abs(z_own) > MAX_Z and z_other > MAX_Z, (z_own, z_other)
    z_own, z_other = _z_scores(bits, hashed, spec.q, spec.p)
    assert abs(z_own) > MAX_Z and z_other > MAX_Z, (z_own, z_other)


def test_oue_secure_bits_have_the_realized_probabilities():
    spec = OUE(epsilon=2.0, domain_size=1024)
    values = np.random.default_rng(4).integers(0, 1024, size=20_000)
    bits = np.unpackbits(spec.randomize(values, rng=_aes(4)).bits, axis=1, count=1024)
    z_own, z_other = _z_scores(bits, values, spec.p, spec.q)
    assert abs(z_own) <= MAX_Z and z_other <= MAX_Z, (z_own, z_other)
    wrong = OUE(epsilon=2.3, domain_size=1024)
    for p, q in [(wrong.p, wrong.q), (spec.q, spec.p)]:
        z_own, z_other = _z_scores(bits, values, p, q)
        assert abs(z_own) > MAX_Z or z_other > MAX_Z, (p, q, z_own, z_other)


def test_cms_secure_default_is_a_fresh_secure_stream():
    spec = CMS(epsilon=4.0, width=64, depth=4)
    a = spec.randomize(np.arange(40_000), rng=None).bits
    b = spec.randomize(np.arange(40_000), rng=None).bits
    assert a.shape == b.shape and not np.array_equal(a, b)
    assert is_secure(secure_generator())


def test_refused_items_end_the_secure_threads(monkeypatch):
    """From 2^15 users the secure coins are drawn while the items are hashed: an item
    refused there raises once the chunks' threads are done."""
    monkeypatch.setattr(_parallel, "WORKERS", 2)
    spec = CMS(epsilon=4.0, width=1024, depth=4, domain_size=100)
    before = threading.active_count()
    values = np.full(1 << 16, 5)
    values[-1] = 100  # outside the closed domain
    with pytest.raises(ValueError, match="values"):
        spec.randomize(values, rng=_aes(1))
    assert threading.active_count() == before
