"""Layout of the 2^-128 unary sampler: rows per word and per stream, threshold lane masks.

Shared by the numba kernel (``_kernels_unary.sample_unary_bits_wide``) and its numpy twin
(``_unary_sampler.sample_unary_bits_wide_numpy``), which must agree on it byte for byte;
it lives apart from both so that neither imports the other.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "WIDE_WORDS_PER_STREAM",
    "threshold_lanes",
    "wide_layout",
    "wide_seed_count",
    "wide_threshold_lanes",
]

_LOW = (1 << 64) - 1


#: 64-lane words per stream of the 2^-128 sampler: a stream's seeding (four splitmix64 steps)
#: is shared by ~8 x 7.3 draws, and the numpy twin walks only 8 words one after another.
WIDE_WORDS_PER_STREAM = 8


def wide_layout(domain_size: int) -> tuple[int, int]:
    """Return ``(rows_per_word, rows_per_stream)`` of the 2^-128 sampler for ``domain_size``.

    A row takes ``8 ceil(d/8)`` lanes (its packed bytes); when that is at most 32, whole
    rows share one 64-lane word (2 rows at d = 32, 8 at d <= 8), so one bit-sliced
    comparison settles several users' bits; otherwise a row spans ``ceil(d/64)`` words
    of its own (``rows_per_word`` = 1). A stream covers about
    :data:`WIDE_WORDS_PER_STREAM` words: its number of rows is a power of two.
    """
    width = (int(domain_size) + 7) // 8
    rows_per_word = max(1, 64 // (8 * width))
    if rows_per_word > 1:
        return rows_per_word, rows_per_word * WIDE_WORDS_PER_STREAM
    return 1, max(1, WIDE_WORDS_PER_STREAM // ((width + 7) // 8))


def wide_seed_count(n: int, domain_size: int) -> int:
    """Return the number of seeds (streams) the 2^-128 sampler reads for ``n`` rows."""
    return -(-int(n) // wide_layout(domain_size)[1])


def wide_threshold_lanes(
    true_threshold: int, other_threshold: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the per-bit lane masks of two 128-bit thresholds (:func:`threshold_lanes`)."""
    return threshold_lanes(true_threshold, other_threshold, 128)


def threshold_lanes(
    true_threshold: int, other_threshold: int, bits: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the per-bit lane masks of two ``bits``-bit thresholds, from the top bit down.

    ``other[k]`` is all ones where bit ``bits - 1 - k`` of ``other_threshold`` is 1,
    ``flip[k]`` where that bit of ``true_threshold`` differs from it (uint64 arrays of
    ``bits``; built once per pair of thresholds, since a spec samples with the same pair
    every time). A bit-sliced comparison of a word's lanes against their thresholds reads
    ``other[k] ^ (flip[k] & true_lanes)``.
    """
    other, flip = _threshold_lanes(int(true_threshold), int(other_threshold), int(bits))
    return other.copy(), flip.copy()


@functools.lru_cache(maxsize=64)
def _threshold_lanes(big: int, small: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    other = [_LOW if (small >> b) & 1 else 0 for b in range(bits - 1, -1, -1)]
    flip = [_LOW if ((big ^ small) >> b) & 1 else 0 for b in range(bits - 1, -1, -1)]
    return np.asarray(other, dtype=np.uint64), np.asarray(flip, dtype=np.uint64)
