"""Compiled kernels for unary-encoding oracles: bit sampling and column counts.

Randomness: every row (user) gets its own uint64 seed, drawn by the caller from its numpy
Generator (:func:`ldpkit._rng.derive_seeds`). The seed initializes a private xoshiro256**
state through splitmix64 (the seeding procedure recommended by xoshiro's authors). Rows
never share a stream, so the output depends only on the seeds, never on the number of
threads or on how rows are scheduled.

Bernoulli bits: a bit that must be 1 with probability T / 2^64 (T an integer threshold)
is ``[U < T]`` for a uniform 64-bit integer U, so the realized probability is exactly
T / 2^64. The bulk sampler evaluates this comparison for 64 bits at a time, "bit-sliced":
random word k supplies bit 63 - k of the 64 lanes' U's, most significant bit first, and a
lane's comparison is settled at the first bit where its U differs from T. Lanes are
independent (each uses its own bit of every word), and words are drawn only until all 64
comparisons are settled (about 7.3 words on average, whatever the resolution, instead of
the 64 that one draw per bit would need). Stopping early does not change the law: each
lane's result is a function of its own U, and the bits of U not drawn do not affect it. A
lane still unsettled after 64 words has U == T, hence U < T is false. (The resolution was
2^-32 in an earlier version: it capped OUE's realized loss at 22.2 whatever epsilon said.)

Parallelism: the kernels are serial and release the GIL (``nogil=True``); large batches
are split into row blocks run on a few Python threads. We do not use numba's
``parallel=True``: its OpenMP threading layer (the one available here) kills any fork()ed
child that calls a parallel kernel again ("fork() called from a process already using
GNU OpenMP"), which would break multiprocessing pools, and its workqueue layer is not
safe under concurrent calls from several threads. Plain threads are both fork- and
thread-safe, and since rows are seeded individually the result does not depend on how
rows are split.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import _parallel

__all__ = [
    "sample_unary_bits",
    "sample_unary_bits_wide",
    "packed_column_counts",
    "xoshiro_uint64",
    "WORKERS",
]

# Kept as module attributes so tests and benchmarks can pin the thread count.
WORKERS: int | None = None


def _workers() -> int:
    return _parallel.workers() if WORKERS is None else max(1, int(WORKERS))


def _row_blocks(n: int, workers: int | None = None) -> list[tuple[int, int]]:
    return _parallel.row_blocks(n, workers or _workers())


_run_blocks = _parallel.run_blocks

_U64 = np.uint64
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, inline="always")
def _splitmix64(x: np.uint64) -> tuple[np.uint64, np.uint64]:
    """One splitmix64 step: (new state, output)."""
    x = x + _GOLDEN
    z = x
    z = (z ^ (z >> _U64(30))) * _MIX1
    z = (z ^ (z >> _U64(27))) * _MIX2
    return x, z ^ (z >> _U64(31))


@numba.njit(cache=True, inline="always")
def _rotl(x: np.uint64, k: int) -> np.uint64:
    return (x << _U64(k)) | (x >> _U64(64 - k))


@numba.njit(cache=True, inline="always")
def _seed_state(seed: np.uint64) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    x, s0 = _splitmix64(seed)
    x, s1 = _splitmix64(x)
    x, s2 = _splitmix64(x)
    x, s3 = _splitmix64(x)
    return s0, s1, s2, s3


@numba.njit(cache=True, inline="always")
def _xoshiro_next(
    s0: np.uint64, s1: np.uint64, s2: np.uint64, s3: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64, np.uint64]:
    """xoshiro256**: returns the next 64-bit output and the advanced state."""
    result = _rotl(s1 * _U64(5), 7) * _U64(9)
    t = s1 << _U64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@numba.njit(cache=True)
def xoshiro_uint64(seed: np.uint64, count: int) -> np.ndarray:
    """Return the first ``count`` outputs of the per-row generator seeded with ``seed``."""
    s0, s1, s2, s3 = _seed_state(seed)
    out = np.empty(count, dtype=np.uint64)
    for k in range(count):
        r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
        out[k] = r
    return out


# Twin by design: _unary_sampler.sample_unary_bits_numpy draws the same bytes in numpy (a
# device without numba, small batches); tests/frequency/test_numpy_twins.py pins them equal.
@numba.njit(cache=True, nogil=True)
def _sample_rows(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: np.uint64,
    other_threshold: np.uint64,
    out: np.ndarray,
) -> None:
    """Fill ``out`` (uint8, shape (n, ceil(d/8))) with packed unary-encoding reports.

    Row i: bit ``values[i]`` is 1 w.p. ``true_threshold / 2^64``, every other bit of the
    d is 1 w.p. ``other_threshold / 2^64``, all independent; padding bits are 0. Both
    thresholds must lie in [0, 2^64 - 1]. Byte layout matches ``np.packbits(axis=1)``.
    """
    n, width = out.shape
    n_words = (width + 7) // 8
    pad = 8 * width - domain_size
    pad_mask = np.uint8((0xFF << pad) & 0xFF)
    t = np.uint64(other_threshold)
    for i in range(n):
        s0, s1, s2, s3 = _seed_state(seeds[i])
        for w in range(n_words):
            ones = _U64(0)
            open_lanes = _ALL  # lanes whose U still equals T on the bits drawn so far
            for b in range(63, -1, -1):
                r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
                if (t >> _U64(b)) & _U64(1):
                    ones |= open_lanes & ~r  # U's bit 0 < T's bit 1: U < T
                    open_lanes &= r
                else:
                    open_lanes &= ~r  # U's bit 1 > T's bit 0: U > T
                if open_lanes == _U64(0):
                    break
            base = 8 * w
            for k in range(min(8, width - base)):
                out[i, base + k] = np.uint8((ones >> _U64(8 * k)) & _U64(0xFF))
        # The true item's bit: a separate 64-bit comparison against its own threshold.
        r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
        v = values[i]
        byte = v >> 3
        mask = 0x80 >> (v & 7)
        if r < true_threshold:
            out[i, byte] = np.uint8(out[i, byte] | mask)
        else:
            out[i, byte] = np.uint8(out[i, byte] & (0xFF ^ mask))
        if pad:
            out[i, width - 1] = np.uint8(out[i, width - 1] & pad_mask)


def sample_unary_bits(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
    *,
    workers: int | None = None,
) -> None:
    """Fill ``out`` (uint8, shape (n, ceil(d/8))) with packed unary-encoding reports.

    Row i: bit ``values[i]`` (which must lie in [0, d)) is 1 w.p. ``true_threshold / 2^64``,
    every other bit of the d is 1 w.p. ``other_threshold / 2^64``, all independent, from
    the generator seeded with ``seeds[i]``; padding bits are 0. Both thresholds must lie in
    [0, 2^64 - 1]. Byte layout matches ``np.packbits(axis=1)``. The output does not
    depend on ``workers``.
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    big, small = np.uint64(true_threshold), np.uint64(other_threshold)

    def task(a: int, b: int) -> None:
        _sample_rows(values[a:b], seeds[a:b], domain_size, big, small, out[a:b])

    _run_blocks(task, _row_blocks(values.shape[0], workers))


# Twin by design: _unary_sampler.sample_unary_bits_wide_numpy (same bytes, numpy). Kept
# apart from _sample_rows on purpose: the 64-bit loop is the clients' hot path and stays
# free of this loop's per-bit hi/lo choice and second true-bit word.
@numba.njit(cache=True, nogil=True)
def _sample_rows_wide(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_hi: np.uint64,
    true_lo: np.uint64,
    other_hi: np.uint64,
    other_lo: np.uint64,
    out: np.ndarray,
) -> None:
    """Fill ``out`` as :func:`_sample_rows` does, at resolution 2^-128.

    Thresholds are 128-bit integers ``hi 2^64 + lo``: each lane's U has 128 bits, compared
    bit-sliced from bit 127 down (the same early stop: about 7.3 words per 64 lanes); the
    true item's bit is two more words, ``(r_hi, r_lo) < (true_hi, true_lo)``
    lexicographically. A lane still open after 128 words has U == T, hence 0.
    """
    n, width = out.shape
    n_words = (width + 7) // 8
    pad = 8 * width - domain_size
    pad_mask = np.uint8((0xFF << pad) & 0xFF)
    for i in range(n):
        s0, s1, s2, s3 = _seed_state(seeds[i])
        for w in range(n_words):
            ones = _U64(0)
            open_lanes = _ALL
            for b in range(127, -1, -1):
                r, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
                if b >= 64:
                    bit = (other_hi >> _U64(b - 64)) & _U64(1)
                else:
                    bit = (other_lo >> _U64(b)) & _U64(1)
                if bit:
                    ones |= open_lanes & ~r
                    open_lanes &= r
                else:
                    open_lanes &= ~r
                if open_lanes == _U64(0):
                    break
            base = 8 * w
            for k in range(min(8, width - base)):
                out[i, base + k] = np.uint8((ones >> _U64(8 * k)) & _U64(0xFF))
        r_hi, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
        r_lo, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
        v = values[i]
        byte = v >> 3
        mask = 0x80 >> (v & 7)
        if r_hi < true_hi or (r_hi == true_hi and r_lo < true_lo):
            out[i, byte] = np.uint8(out[i, byte] | mask)
        else:
            out[i, byte] = np.uint8(out[i, byte] & (0xFF ^ mask))
        if pad:
            out[i, width - 1] = np.uint8(out[i, width - 1] & pad_mask)


def sample_unary_bits_wide(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
    *,
    workers: int | None = None,
) -> None:
    """Fill ``out`` as :func:`sample_unary_bits` does, with thresholds in units of 2^-128.

    Both thresholds must lie in [0, 2^128 - 1]; bit ``values[i]`` of row i is 1 w.p.
    ``true_threshold / 2^128``, every other bit w.p. ``other_threshold / 2^128``. Used for
    laws that are exact products of two 2^-64 laws (the longitudinal chained bits).
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    mask = (1 << 64) - 1
    big = (np.uint64(true_threshold >> 64), np.uint64(true_threshold & mask))
    small = (np.uint64(other_threshold >> 64), np.uint64(other_threshold & mask))

    def task(a: int, b: int) -> None:
        _sample_rows_wide(values[a:b], seeds[a:b], domain_size, *big, *small, out[a:b])

    _run_blocks(task, _row_blocks(values.shape[0], workers))


#: Byte columns per tile of :func:`_tile_bit_counts`: its (tile, 256) histogram (128 KiB)
#: stays in the core's cache. One histogram of all the columns (``width x 256`` int64) was
#: 268 MB for 2^20 bits, every increment a cache miss: 14 s for 1,000 rows.
_TILE = 64


@numba.njit(cache=True, nogil=True)
def _tile_bit_counts(packed: np.ndarray) -> np.ndarray:
    """counts[8 j + b] = number of rows whose byte j has bit b (from the top) set.

    Per tile of byte columns: a histogram of the 256 byte values over the rows, then its
    nonzero entries spread to the 8 bits (exact integers).
    """
    n, width = packed.shape
    counts = np.zeros(8 * width, dtype=np.int64)
    hist = np.zeros((_TILE, 256), dtype=np.int64)
    for j0 in range(0, width, _TILE):
        j1 = min(j0 + _TILE, width)
        hist[:, :] = 0
        for i in range(n):
            for j in range(j0, j1):
                hist[j - j0, packed[i, j]] += 1
        for j in range(j0, j1):
            for x in range(1, 256):
                c = hist[j - j0, x]
                if c:
                    for b in range(8):
                        if (x >> (7 - b)) & 1:
                            counts[8 * j + b] += c
    return counts


def packed_column_counts(
    packed: np.ndarray, domain_size: int, *, workers: int | None = None
) -> np.ndarray:
    """Return the number of 1 bits in each of the first ``domain_size`` columns (int64, shape (d,)).

    Per tile of byte columns, a histogram of the 256 byte values over the rows (row blocks
    on a few threads, counts added), spread to bit counts. Integer arithmetic, so the
    result is exact and independent of ``workers``.
    """
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    counts = np.zeros(8 * packed.shape[1], dtype=np.int64)
    for part in _run_blocks(
        lambda a, b: _tile_bit_counts(packed[a:b]), _row_blocks(packed.shape[0], workers)
    ):
        counts += part
    return counts[:domain_size]
