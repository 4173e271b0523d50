"""The count-mean sketch's client coins: the compiled kernel or its bit-exact numpy twin.

:func:`sample_cms_bits` fills packed CMS reports with the law and bytes documented in
:mod:`._kernels_cms` (two xoshiro256** streams per report, two output words settled at
once). As for the unary oracles (:mod:`._unary_sampler`), small batches and every batch
without numba run :func:`sample_cms_words_numpy`, the same arithmetic vectorized over rows,
so a device that randomizes a few values never loads numba and reports never depend on
what is installed (``tests/frequency/test_cms_sampler.py`` checks the two byte for byte).
:func:`start_cms_bits` starts the compiled draws before the items are known (a report's
coins do not depend on its item; its hashed item's bit is set last from one more draw).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from .. import _parallel
from ._unary_sampler import _ALL, _CHUNK_ROWS, COMPILED_MIN_BITS, _next, _splitmix64

if TYPE_CHECKING:  # numba is loaded on first use only
    from ._kernels_cms import PendingWords

__all__ = ["PendingCMSBits", "sample_cms_bits", "sample_cms_words_numpy", "start_cms_bits"]


def _last_word_mask(last: int) -> np.uint64:
    """Return the bits of a last word that hold report bits 0 .. last - 1 (packbits order)."""
    return np.uint64(sum(1 << (8 * (p >> 3) + 7 - (p & 7)) for p in range(last)))


def _seed_two(seeds: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    x = seeds
    parts = []
    for _ in range(8):  # eight splitmix64 steps: stream A's state, then stream B's
        x, z = _splitmix64(x)
        parts.append(z)
    return parts[:4], parts[4:]


def _sample_chunk(
    values: np.ndarray, seeds: np.ndarray, width: int, big: int, small: int, words: np.ndarray
) -> None:
    n, n_words = words.shape
    state_a, state_b = _seed_two(seeds)
    t_bits = [(small >> b) & 1 for b in range(63, -1, -1)]
    for w in range(0, n_words, 2):
        pair = w + 1 < n_words
        ones_a = np.zeros(n, dtype=np.uint64)
        ones_b = np.zeros(n, dtype=np.uint64)
        # rows still drawing for this pair of words; a row leaves (its states written
        # back) once its 128 lanes are settled, exactly where the kernel's loop breaks
        rows = np.arange(n)
        local_a, local_b = list(state_a), list(state_b)
        open_a = np.full(n, _ALL, dtype=np.uint64)
        open_b = np.full(n, _ALL if pair else 0, dtype=np.uint64)
        for bit in t_bits:
            r_a, r_b = _next(local_a), _next(local_b)
            if bit:
                ones_a[rows] |= open_a & ~r_a
                open_a &= r_a
                ones_b[rows] |= open_b & ~r_b
                open_b &= r_b
            else:
                open_a &= ~r_a
                open_b &= ~r_b
            done = (open_a | open_b) == 0
            if done.any():
                for k in range(4):
                    state_a[k][rows[done]] = local_a[k][done]
                    state_b[k][rows[done]] = local_b[k][done]
                keep = ~done
                rows, open_a, open_b = rows[keep], open_a[keep], open_b[keep]
                local_a = [part[keep] for part in local_a]
                local_b = [part[keep] for part in local_b]
                if rows.size == 0:
                    break
        for k in range(4):  # rows whose U equals T on every bit
            state_a[k][rows] = local_a[k]
            state_b[k][rows] = local_b[k]
        words[:, w] = ones_a
        if pair:
            words[:, w + 1] = ones_b
    hit = _next(state_a) < np.uint64(big)
    byte = values >> 3
    shift = (8 * (byte & 7) + 7 - (values & 7)).astype(np.uint64)
    flag = np.uint64(1) << shift
    idx, col = np.arange(n), byte >> 3
    words[idx, col] = np.where(hit, words[idx, col] | flag, words[idx, col] & ~flag)
    last = width - 64 * (n_words - 1)
    if last < 64:
        words[:, n_words - 1] &= _last_word_mask(last)


def sample_cms_words_numpy(
    values: np.ndarray,
    seeds: np.ndarray,
    width: int,
    true_threshold: int,
    other_threshold: int,
    words: np.ndarray,
) -> None:
    """Sample :func:`._kernels_cms.sample_cms_words`'s law and words in numpy."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    big, small = int(true_threshold), int(other_threshold)
    for start in range(0, values.shape[0], _CHUNK_ROWS):
        stop = start + _CHUNK_ROWS
        _sample_chunk(values[start:stop], seeds[start:stop], width, big, small, words[start:stop])


def sample_cms_bits(
    values: np.ndarray,
    seeds: np.ndarray,
    width: int,
    true_threshold: int,
    other_threshold: int,
    out: np.ndarray,
) -> None:
    """Fill ``out`` (uint8, shape (n, ceil(width / 8))) with packed CMS reports.

    Bit ``values[i]`` of row i is 1 w.p. ``true_threshold / 2^64``, every other bit w.p.
    ``other_threshold / 2^64``; padding bits are 0 (``np.packbits`` layout). The compiled
    kernel for batches of at least :data:`COMPILED_MIN_BITS` bits when numba is installed,
    its numpy twin otherwise: the same bytes either way.
    """
    words, in_place = _words_of(out, width)
    if _parallel.use_compiled(values.shape[0] * width, COMPILED_MIN_BITS):
        from ._kernels_cms import sample_cms_words  # numba: loaded on first use

        sample_cms_words(values, seeds, width, true_threshold, other_threshold, words)
    else:
        sample_cms_words_numpy(values, seeds, width, true_threshold, other_threshold, words)
    if not in_place:
        _copy_words(words, out)


def _copy_words(words: np.ndarray, out: np.ndarray) -> None:
    # word w's little-endian bytes are report bytes 8w .. 8w + 7
    n, n_words = words.shape
    out[:] = words.astype("<u8").view(np.uint8).reshape(n, 8 * n_words)[:, : out.shape[1]]


def _words_of(out: np.ndarray, width: int) -> tuple[np.ndarray, bool]:
    """Return uint64 words over ``out``'s memory when its layout allows, else a new array."""
    n_words = -(-width // 64)
    in_place = sys.byteorder == "little" and out.shape[1] == 8 * n_words and out.flags.c_contiguous
    if in_place:
        return out.view(np.uint64), True
    return np.empty((out.shape[0], n_words), dtype=np.uint64), False


class PendingCMSBits:
    """CMS reports whose coins are drawn on threads while the caller hashes the items.

    The compiled kernel only (:func:`start_cms_bits` decides); :meth:`finish` gives
    ``out`` the bytes :func:`sample_cms_bits` writes for the same seeds and items.
    """

    def __init__(
        self, seeds: np.ndarray, width: int, other_threshold: int, out: np.ndarray
    ) -> None:
        from ._kernels_cms import start_cms_words  # numba: loaded on first use

        self._out = out
        self._words, self._in_place = _words_of(out, width)
        self._pending: PendingWords = start_cms_words(seeds, width, other_threshold, self._words)

    def cancel(self) -> None:
        """Wait for the draws to end without finishing the reports (an error path)."""
        self._pending.wait()

    def finish(self, values: np.ndarray, true_threshold: int) -> None:
        """Wait for the draws, then set each report's bit ``values[i]`` against its threshold."""
        self._pending.finish(values, true_threshold)
        if not self._in_place:
            _copy_words(self._words, self._out)


def start_cms_bits(
    seeds: np.ndarray, width: int, other_threshold: int, out: np.ndarray
) -> PendingCMSBits | None:
    """Start filling ``out`` as :func:`sample_cms_bits` would, before the items are known.

    Returns the pending reports when the compiled kernel runs this batch, else None (the
    caller then samples once the items are known: numpy's twin has nothing to overlap).
    """
    if not _parallel.use_compiled(seeds.shape[0] * width, COMPILED_MIN_BITS):
        return None
    return PendingCMSBits(seeds, width, other_threshold, out)
