"""Unary-encoding bit sampler: the compiled kernel or its bit-exact numpy twin.

:func:`sample_unary_bits` fills packed reports with the law documented in
:mod:`._kernels_unary` (per-row xoshiro256** streams seeded through splitmix64, bit-sliced
threshold comparisons). Two implementations produce the *same bytes* for the same
seeds: the numba kernel (fast on large batches, but importing numba and loading its compiled
code costs a few hundred milliseconds) and :func:`sample_unary_bits_numpy`, the same
arithmetic vectorized over rows in numpy (uint64 arrays wrap modulo 2^64 like the kernel's
words). Small batches, and every batch when numba is not installed, use numpy; so a device
that randomizes a few values never loads numba, and reports never depend on what is
installed. ``tests/frequency/test_unary_sampler.py`` checks the two byte for byte.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import _parallel
from ._unary_layout import (
    wide_layout,
    wide_seed_count,
    wide_threshold_lanes,
)

__all__ = [
    "sample_unary_bits",
    "sample_unary_bits_numpy",
    "sample_unary_bits_secure",
    "start_unary_bits_secure",
    "PendingSecureBits",
    "sample_unary_bits_wide",
    "sample_unary_bits_wide_numpy",
    "wide_layout",
    "wide_seed_count",
    "wide_threshold_lanes",
    "COMPILED_MIN_BITS",
]

#: Sampling resolution: every realized bit probability is a multiple of 2^-64 (the kernels
#: compare 64-bit uniforms with integer thresholds); ``unary`` re-exports it.
PROBABILITY_SCALE = 1 << 64

#: Batches of at least this many bits (rows x domain size) use the compiled kernel when numba
#: is installed; smaller ones stay in numpy (same output, no numba import).
COMPILED_MIN_BITS = 1 << 24

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_S = {k: np.uint64(k) for k in (5, 9, 17, 27, 30, 31)}

# Rows per chunk: bounds the temporaries (a few uint64 vectors per row) for huge batches.
_CHUNK_ROWS = 1 << 16

#: (row, word) pairs per chunk of the secure sampler: its three pair arrays (2 MiB each)
#: stay in the outer caches while a chunk's rounds run.
_SECURE_CHUNK_WORDS = 1 << 18


def _splitmix64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x + _GOLDEN
    z = (x ^ (x >> _S[30])) * _MIX1
    z = (z ^ (z >> _S[27])) * _MIX2
    return x, z ^ (z >> _S[31])


def _rotl(x: np.ndarray, k: int) -> np.ndarray:
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


def _seed_state(seeds: np.ndarray) -> list[np.ndarray]:
    x, s0 = _splitmix64(seeds)
    x, s1 = _splitmix64(x)
    x, s2 = _splitmix64(x)
    _, s3 = _splitmix64(x)
    return [s0, s1, s2, s3]


def _next(s: list[np.ndarray]) -> np.ndarray:
    """xoshiro256** on every row's state ``s`` (advanced in place); the outputs."""
    s0, s1, s2, s3 = s
    result = _rotl(s1 * _S[5], 7) * _S[9]
    t = s1 << _S[17]
    s2 = s2 ^ s0
    s3 = s3 ^ s1
    s1 = s1 ^ s2
    s0 = s0 ^ s3
    s2 = s2 ^ t
    s[:] = [s0, s1, s2, _rotl(s3, 45)]
    return result


def _sample_chunk(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
    resolution: int,
) -> None:
    n, width = out.shape
    state = _seed_state(seeds)
    t_bits = [(other_threshold >> b) & 1 for b in range(resolution - 1, -1, -1)]
    for w in range((width + 7) // 8):
        ones = np.zeros(n, dtype=np.uint64)
        # Rows still drawing for this word, with their state and undecided lanes; a row
        # leaves (and its state is written back) once its 64 comparisons are settled,
        # exactly where the kernel's loop breaks.
        rows = np.arange(n)
        local = list(state)
        open_lanes = np.full(n, _ALL, dtype=np.uint64)
        for bit in t_bits:
            r = _next(local)
            if bit:
                ones[rows] |= open_lanes & ~r
                open_lanes &= r
            else:
                open_lanes &= ~r
            done = open_lanes == 0
            if done.any():
                for k in range(4):
                    state[k][rows[done]] = local[k][done]
                keep = ~done
                rows, open_lanes = rows[keep], open_lanes[keep]
                local = [part[keep] for part in local]
                if rows.size == 0:
                    break
        for k in range(4):  # rows whose U equals T on every bit
            state[k][rows] = local[k]
        base = 8 * w
        for k in range(min(8, width - base)):
            out[:, base + k] = ((ones >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)
    # The true item's bit: one more draw, its top `resolution` bits against the threshold.
    r = _next(state)
    hit = (r >> np.uint64(64 - resolution)) < np.uint64(true_threshold)
    byte = values >> 3
    mask = (0x80 >> (values & 7)).astype(np.uint8)
    idx = np.arange(n)
    out[idx, byte] = np.where(hit, out[idx, byte] | mask, out[idx, byte] & ~mask)
    pad = 8 * width - domain_size
    if pad:
        out[:, width - 1] &= np.uint8((0xFF << pad) & 0xFF)


def sample_unary_bits_numpy(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Sample the compiled kernel's law and bytes in numpy (``_kernels_unary._sample_rows``).

    Fills ``out`` (uint8, shape (n, ceil(d/8))): row i's bit ``values[i]`` is 1 w.p.
    ``true_threshold / S``, every other bit w.p. ``other_threshold / S``, from the
    xoshiro256** stream seeded with ``seeds[i]``; padding bits are 0. ``S`` is
    ``PROBABILITY_SCALE``, the kernel's resolution: the bit-sliced comparison walks the
    threshold's bits from bit ``log2(S) - 1`` down, as the kernel does.
    """
    resolution = PROBABILITY_SCALE.bit_length() - 1
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    big, small = int(true_threshold), int(other_threshold)
    for start in range(0, values.shape[0], _CHUNK_ROWS):
        stop = start + _CHUNK_ROWS
        _sample_chunk(
            values[start:stop],
            seeds[start:stop],
            domain_size,
            big,
            small,
            out[start:stop],
            resolution,
        )


def sample_unary_bits(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Fill ``out`` with packed unary-encoding reports; identical bytes whichever path runs.

    Uses the numba kernel (:func:`._kernels_unary.sample_unary_bits`) for batches of at least
    :data:`COMPILED_MIN_BITS` bits when numba is installed, numpy otherwise.
    """
    if _parallel.use_compiled(values.shape[0] * domain_size, COMPILED_MIN_BITS):
        from ._kernels_unary import sample_unary_bits as kernel  # numba: loaded on first use

        kernel(values, seeds, domain_size, true_threshold, other_threshold, out)
    else:
        sample_unary_bits_numpy(values, seeds, domain_size, true_threshold, other_threshold, out)


def _lane(j: np.ndarray) -> np.ndarray:
    # lane of item j in its word: byte j // 8, bit 7 - j % 8 from the LSB (packbits order)
    return (j & ~7) | (7 - (j & 7))


def _wide_chunk(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    other_lanes: np.ndarray,
    flip_lanes: np.ndarray,
    out: np.ndarray,
) -> None:
    m, width = out.shape
    rows_per_word, rows_per_stream = wide_layout(domain_size)
    words_per_row = (width + 7) // 8 if rows_per_word == 1 else 1
    n_streams = seeds.shape[0]
    rows = n_streams * rows_per_stream
    v = np.zeros(rows, dtype=np.int64)
    v[:m] = values
    one = np.uint64(1)
    j = np.arange(domain_size, dtype=np.int64)
    if rows_per_word == 1:
        # word w of a stream: part w % words_per_row of row w // words_per_row
        n_words = rows_per_stream * words_per_row
        used_part = np.zeros(words_per_row, dtype=np.uint64)
        np.bitwise_or.at(used_part, j >> 6, one << _lane(j & 63).astype(np.uint64))
        part = np.arange(n_words) % words_per_row
        row = np.arange(n_streams)[:, None] * rows_per_stream + np.arange(n_words) // words_per_row
        used = np.broadcast_to(used_part[part], row.shape)
        local = v[row] - 64 * part
        inside = (local >= 0) & (local < 64)
        true_lanes = np.where(inside, one << _lane(np.clip(local, 0, 63)).astype(np.uint64), 0)
        true_lanes = true_lanes.astype(np.uint64)
        exists = row < m
    else:
        # word w of a stream: rows w * rows_per_word + r, r < rows_per_word (those < m)
        stride = 8 * width
        n_words = rows_per_stream // rows_per_word
        row_used = np.bitwise_or.reduce(one << _lane(j).astype(np.uint64))
        first = np.arange(n_streams)[:, None] * rows_per_stream + np.arange(n_words) * rows_per_word
        used = np.zeros(first.shape, dtype=np.uint64)
        true_lanes = np.zeros(first.shape, dtype=np.uint64)
        for r in range(rows_per_word):
            here = first + r < m
            shift = np.uint64(r * stride)
            used |= np.where(here, row_used << shift, 0).astype(np.uint64)
            lane = (r * stride + _lane(v[first + r])).astype(np.uint64)
            true_lanes |= np.where(here, one << lane, 0).astype(np.uint64)
        exists = first < m
    state = _seed_state(seeds)
    ones = np.zeros(used.shape, dtype=np.uint64)
    for w in range(n_words):
        # streams that draw word w (all but the tail of the last one), each until its lanes
        # are settled; its state is written back where it stops, as the kernel's loop breaks
        active = np.flatnonzero(exists[:, w])
        if active.size == 0:  # past the last row: no stream draws this word
            continue
        local_state = [part_[active] for part_ in state]
        open_lanes = used[active, w].copy()
        tl = true_lanes[active, w]
        acc = np.zeros(active.size, dtype=np.uint64)
        for b in range(128):
            r_ = _next(local_state)
            t = other_lanes[b] ^ (flip_lanes[b] & tl)
            acc |= open_lanes & ~r_ & t
            open_lanes &= ~(r_ ^ t)
            done = open_lanes == 0
            if done.any():
                for k in range(4):
                    state[k][active[done]] = local_state[k][done]
                ones[active[done], w] = acc[done]
                keep = ~done
                active, open_lanes, tl, acc = active[keep], open_lanes[keep], tl[keep], acc[keep]
                local_state = [part_[keep] for part_ in local_state]
                if active.size == 0:
                    break
        for k in range(4):  # lanes whose U equals T on all 128 bits: 0
            state[k][active] = local_state[k]
        ones[active, w] = acc
    block = ones.astype("<u8").view(np.uint8)  # word w's bytes, little-endian, in order
    if rows_per_word == 1:
        rows_bytes = block.reshape(n_streams * rows_per_stream, 8 * words_per_row)
    else:
        words = block.reshape(n_streams, n_words, 8)[:, :, : rows_per_word * width]
        rows_bytes = words.reshape(n_streams * rows_per_stream, width)
    out[:] = rows_bytes[:m, :width]


def sample_unary_bits_wide_numpy(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Sample :func:`._kernels_unary.sample_unary_bits_wide`'s law and bytes in numpy.

    Thresholds in units of 2^-128; one seed per stream of rows (:func:`wide_layout`). The
    same lanes, words and streams as the kernel, vectorized over streams (a stream's words
    one after another).
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    lanes = wide_threshold_lanes(true_threshold, other_threshold)
    rows_per_stream = wide_layout(domain_size)[1]
    step = max(1, _CHUNK_ROWS // rows_per_stream)  # streams per chunk
    for s in range(0, seeds.shape[0], step):
        a, b = s * rows_per_stream, (s + step) * rows_per_stream
        _wide_chunk(values[a:b], seeds[s : s + step], domain_size, *lanes, out[a:b])


def sample_unary_bits_wide(
    values: np.ndarray,
    seeds: np.ndarray,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Fill ``out`` with packed bits at resolution 2^-128; identical bytes whichever path runs.

    Bit ``values[i]`` of row i is 1 w.p. ``true_threshold / 2^128``, every other bit w.p.
    ``other_threshold / 2^128`` (thresholds in [0, 2^128 - 1]): the exact law of a bit
    drawn through two chained 2^-64 rounds, sampled in one. ``seeds``: one per stream
    (:func:`wide_seed_count`). The numba kernel for large batches (as
    :func:`sample_unary_bits` decides), its numpy twin otherwise.
    """
    if _parallel.use_compiled(values.shape[0] * domain_size, COMPILED_MIN_BITS):
        from ._kernels_unary import sample_unary_bits_wide as kernel  # numba: on first use

        kernel(values, seeds, domain_size, true_threshold, other_threshold, out)
    else:
        sample_unary_bits_wide_numpy(
            values, seeds, domain_size, true_threshold, other_threshold, out
        )


def _settle_round_numpy(
    words: np.ndarray,
    bit: int,
    ones: np.ndarray,
    active: np.ndarray,
    open_lanes: np.ndarray,
    count: int,
) -> int:
    """Apply one threshold bit to the ``count`` open pairs; return how many stay open.

    The numpy twin of :func:`._kernels_secure.settle_round` (same arrays, same result).
    """
    pairs, lanes = active[:count], open_lanes[:count]
    if bit:
        ones[pairs] |= lanes & ~words
        lanes &= words
    else:
        lanes &= ~words
    keep = lanes != 0
    kept = int(np.count_nonzero(keep))
    if kept < count:  # stable compaction: the pairs still open, in order
        active[:kept] = pairs[keep]
        open_lanes[:kept] = lanes[keep]
    return kept


def sample_unary_bits_secure(
    values: np.ndarray,
    gen: np.random.Generator,
    domain_size: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Sample the law of :func:`sample_unary_bits`, every random bit read from ``gen``.

    For deployment (``rng=None``): the seeded path expands 64 bits per report
    into all of its d bits with xoshiro256**, which is not a cryptographic generator, so
    a report's bits would be only as unpredictable as 64 bits of seed through a
    non-cryptographic map. Here the bit-sliced comparison ``U < T`` (64 lanes per word,
    threshold bits from the top) takes each round's word straight from ``gen``'s bit
    generator (AES-CTR for :func:`ldpkit._rng.secure_generator`). Rows go in chunks of
    about :data:`_SECURE_CHUNK_WORDS` (row, word) pairs; each round reads one raw word for
    every pair of the chunk still undecided, in the pairs' order, and then one more word
    per row decides the true item's bit against ``true_threshold``. Same probabilities
    ``T / 2^64`` as the seeded path, other bytes.

    With several chunks, chunk k reads from child k of ``gen`` (:meth:`Generator.spawn`:
    for a secure generator, AES-CTR keyed from its secret entropy), so chunks are
    independent of each other and of the order they run in. For batches of at least
    :data:`COMPILED_MIN_BITS` bits, when numba is installed, a chunk's rounds run in one
    compiled call that reads the words from the bit generator's C function
    (:func:`._kernels_secure.settle_pairs`) and releases the GIL, so chunks run on
    threads; otherwise the rounds run in numpy on ``random_raw``. Both read the same words
    in the same order: the bytes, and the generators' final states, do not depend on which
    ran or on the threads.
    """
    pending = start_unary_bits_secure(gen, domain_size, other_threshold, out)
    pending.finish(values, true_threshold)


class PendingSecureBits:
    """Secure unary reports whose other bits are being drawn (:func:`start_unary_bits_secure`).

    :meth:`finish` waits for the chunks and sets each row's true-item bit from the word
    its chunk drew for it, so the caller can compute the items meanwhile.
    """

    def __init__(self, out: np.ndarray, held: np.ndarray, domain_size: int, tasks: Any) -> None:
        self._out, self._held, self._domain_size, self._tasks = out, held, domain_size, tasks

    def cancel(self) -> None:
        """Wait for the draws to end without finishing the reports (an error path)."""
        if self._tasks is not None:
            pool, futures = self._tasks
            self._tasks = None
            try:
                for future in futures:
                    future.result()
            finally:
                pool.shutdown(wait=True)

    def finish(self, values: np.ndarray, true_threshold: int) -> None:
        """Wait, then set bit ``values[i]`` of row i (1 w.p. ``true_threshold / 2^64``)."""
        self.cancel()
        out, width = self._out, self._out.shape[1]
        values = np.ascontiguousarray(values, dtype=np.int64)
        hit = self._held < np.uint64(true_threshold)
        idx = np.arange(out.shape[0])
        byte = values >> 3
        mask = (0x80 >> (values & 7)).astype(np.uint8)
        out[idx, byte] = np.where(hit, out[idx, byte] | mask, out[idx, byte] & ~mask)
        pad = 8 * width - self._domain_size
        if pad:
            out[:, width - 1] &= np.uint8((0xFF << pad) & 0xFF)


def start_unary_bits_secure(
    gen: np.random.Generator, domain_size: int, other_threshold: int, out: np.ndarray
) -> PendingSecureBits:
    """Start :func:`sample_unary_bits_secure`'s draws before the items are known.

    Every word is drawn here (a row's true-item bit is decided by a word drawn after its
    chunk's rounds, whatever the item); compiled chunks run on threads and this returns
    once they are submitted. :meth:`PendingSecureBits.finish` sets the items' bits.
    """
    resolution = PROBABILITY_SCALE.bit_length() - 1
    n, width = out.shape
    n_words = (width + 7) // 8
    small = int(other_threshold)
    t_bits = np.array([(small >> b) & 1 for b in range(resolution - 1, -1, -1)], dtype=np.uint8)
    compiled = _parallel.use_compiled(n * domain_size, COMPILED_MIN_BITS)
    step = max(1, _SECURE_CHUNK_WORDS // n_words)  # rows per chunk
    starts = list(range(0, n, step))
    streams = _chunk_streams(gen, len(starts))
    held = np.empty(n, dtype=np.uint64)

    def chunk(k: int) -> None:
        a = starts[k]
        b = min(n, a + step)
        _secure_chunk(streams[k], t_bits, out[a:b], held[a:b], compiled)

    threads = min(_parallel.workers(), len(starts)) if compiled else 1
    if threads > 1 and len({id(s) for s in streams}) == len(streams):
        from concurrent.futures import ThreadPoolExecutor  # chunks of their own streams

        pool = ThreadPoolExecutor(max_workers=threads)
        futures = [pool.submit(chunk, k) for k in range(len(starts))]
        return PendingSecureBits(out, held, domain_size, (pool, futures))
    for k in range(len(starts)):
        chunk(k)
    return PendingSecureBits(out, held, domain_size, None)


def _chunk_streams(gen: np.random.Generator, count: int) -> list[np.random.Generator]:
    """Return the stream of each chunk: ``gen`` for one chunk, else one child per chunk.

    A generator that cannot spawn serves every chunk itself, one after another.
    """
    if count <= 1:
        return [gen]
    try:
        return list(gen.spawn(count))
    except (TypeError, AttributeError, NotImplementedError):
        return [gen] * count


def _secure_chunk(
    gen: np.random.Generator,
    t_bits: np.ndarray,
    part: np.ndarray,
    held: np.ndarray,
    compiled: bool,
) -> None:
    """Fill ``part`` (rows of packed reports) from ``gen``'s rounds.

    ``held`` receives the next words, one per row: they decide the true items' bits.
    """
    rows, width = part.shape
    n_words = (width + 7) // 8
    in_place = sys.byteorder == "little" and width == 8 * n_words and part.flags.c_contiguous
    ones = part.view(np.uint64).reshape(-1) if in_place else np.empty(rows * n_words, np.uint64)
    bit_gen = gen.bit_generator
    if compiled:
        from ._kernels_secure import settle_pairs  # numba: loaded on first use

        interface = bit_gen.ctypes
        with bit_gen.lock:  # as random_raw: no other thread draws from it meanwhile
            settle_pairs(interface.next_uint64, interface.state_address, t_bits, ones, held)
    else:
        raw = bit_gen.random_raw
        ones[:] = 0
        active = np.arange(ones.size)
        open_lanes = np.full(ones.size, _ALL, dtype=np.uint64)
        count = ones.size
        for bit in t_bits.tolist():
            words = np.asarray(raw(count), dtype=np.uint64)
            count = _settle_round_numpy(words, bit, ones, active, open_lanes, count)
            if count == 0:
                break
        held[:] = np.asarray(raw(rows), dtype=np.uint64)
    if not in_place:
        # word w's little-endian bytes are output bytes 8w .. 8w + 7 (as the kernel writes)
        part[:] = ones.astype("<u8").view(np.uint8).reshape(rows, 8 * n_words)[:, :width]
