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
from ._unary_layout import wide_layout, wide_threshold_lanes

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


@numba.njit(cache=True, inline="always")
def _lane(j: int) -> int:
    """Lane of a word that holds item j of its 64 (byte j // 8, bit 7 - j % 8 from the LSB)."""
    return (j & ~7) | (7 - (j & 7))


# Twin by design: _unary_sampler.sample_unary_bits_wide_numpy (same bytes, numpy). Kept
# apart from _sample_rows on purpose: the 64-bit loop is the clients' hot path and stays
# free of this loop's bit-sliced 128-bit thresholds and lanes shared by rows.
@numba.njit(cache=True, nogil=True)
def _sample_streams_wide(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    rows_per_word: int,
    rows_per_stream: int,
    other_lanes: np.ndarray,
    flip_lanes: np.ndarray,
    out: np.ndarray,
) -> None:
    """Fill ``out`` (uint8, shape (n, ceil(d/8))) at resolution 2^-128, lanes shared by rows.

    Row i's bit ``values[i]`` is 1 w.p. ``T_true / 2^128``, every other bit w.p. ``T_other /
    2^128``, all independent; padding bits are 0. Each 64-lane word carries
    ``rows_per_word`` whole rows (when ``8 ceil(d/8) <= 32``; else one row spans
    ``ceil(d/64)`` words) and every lane compares its own 128-bit U with its own threshold,
    bit-sliced from bit 127 down: ``other_lanes[k]`` is all ones where bit ``127 - k`` of
    ``T_other`` is 1, ``flip_lanes[k]`` where bit ``127 - k`` of ``T_true`` differs from it,
    so a word's thresholds are ``other_lanes[k] ^ (flip_lanes[k] & true_lanes)``. The words
    are drawn until every lane that carries an item is settled (padding lanes are never
    opened), so the true item's bit costs nothing extra. One xoshiro256** stream per
    ``rows_per_stream`` consecutive rows, seeded with ``seeds[s]``, its words in row order.
    """
    n, width = out.shape
    stride = 8 * width  # lanes per row when rows share a word
    words_per_row = (width + 7) // 8 if rows_per_word == 1 else 1
    # the item lanes of a word: word_used[w] for part w of a row (rows_per_word == 1), or
    # word_used[k] for a word that carries k rows
    word_used = np.zeros(max(words_per_row, rows_per_word) + 1, dtype=np.uint64)
    if rows_per_word == 1:
        for j in range(domain_size):
            word_used[j >> 6] |= _U64(1) << _U64(_lane(j & 63))
    else:
        row_used = _U64(0)
        for j in range(domain_size):
            row_used |= _U64(1) << _U64(_lane(j))
        for k in range(1, rows_per_word + 1):
            word_used[k] = word_used[k - 1] | (row_used << _U64(stride * (k - 1)))
    n_streams = (n + rows_per_stream - 1) // rows_per_stream
    for s in range(n_streams):
        s0, s1, s2, s3 = _seed_state(seeds[s])
        i = s * rows_per_stream
        stop = min(n, i + rows_per_stream)
        while i < stop:
            k = min(rows_per_word, stop - i)
            for w in range(words_per_row):
                if rows_per_word == 1:
                    used = word_used[w]
                    v = values[i] - 64 * w
                    true_lanes = _U64(1) << _U64(_lane(v)) if 0 <= v < 64 else _U64(0)
                else:
                    used = word_used[k]
                    true_lanes = _U64(0)
                    for r in range(k):
                        true_lanes |= _U64(1) << _U64(r * stride + _lane(values[i + r]))
                ones = _U64(0)
                open_lanes = used  # lanes whose U still equals their T on the bits drawn
                for b in range(128):
                    r_, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
                    t = other_lanes[b] ^ (flip_lanes[b] & true_lanes)
                    ones |= open_lanes & ~r_ & t  # U's bit 0 < T's bit 1: U < T
                    open_lanes &= ~(r_ ^ t)  # still equal where the bits agree
                    if open_lanes == _U64(0):
                        break
                if rows_per_word == 1:
                    base = 8 * w
                    for q in range(min(8, width - base)):
                        out[i, base + q] = np.uint8((ones >> _U64(8 * q)) & _U64(0xFF))
                else:
                    for r in range(k):
                        for q in range(width):
                            byte = (ones >> _U64(8 * (r * width + q))) & _U64(0xFF)
                            out[i + r, q] = np.uint8(byte)
            i += k


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
    """Fill ``out`` (uint8, shape (n, ceil(d/8))) with thresholds in units of 2^-128.

    Both thresholds must lie in [0, 2^128 - 1]; bit ``values[i]`` of row i is 1 w.p.
    ``true_threshold / 2^128``, every other bit w.p. ``other_threshold / 2^128``. Used for
    laws that are exact products of two 2^-64 laws (the longitudinal chained bits).
    ``seeds`` holds one seed per stream of rows
    (:func:`ldpkit.frequency._unary_layout.wide_layout`); row blocks on threads start at
    stream boundaries, so the output does not depend on ``workers``.
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    rows_per_word, rows_per_stream = wide_layout(domain_size)
    other_lanes, flip_lanes = wide_threshold_lanes(true_threshold, other_threshold)
    n_streams = -(-values.shape[0] // rows_per_stream)
    blocks = _parallel.row_blocks(
        n_streams, workers or _workers(), max(1, _parallel.MIN_BLOCK_ROWS // rows_per_stream)
    )

    def task(a: int, b: int) -> None:
        ra, rb = a * rows_per_stream, b * rows_per_stream
        _sample_streams_wide(
            values[ra:rb],
            seeds[a:b],
            domain_size,
            rows_per_word,
            rows_per_stream,
            other_lanes,
            flip_lanes,
            out[ra:rb],
        )

    _run_blocks(task, blocks)


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
