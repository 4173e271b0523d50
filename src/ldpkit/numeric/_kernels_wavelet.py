"""Compiled aggregation kernel for Haar-wavelet reports (see :mod:`ldpkit.numeric.wavelet`).

Kept apart so that a client that only randomizes never compiles it; the server imports
this module on first use.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import _parallel

__all__ = ["level_bit_counts"]

# Error codes returned by the kernel (0 = all rows valid).
OK, BAD_SIGN, BAD_COUNT, BAD_PADDING = 0, 1, 2, 3

_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _histograms(
    level,
    support,
    negative,
    has_support,
    widths,
    col_offset,
    last_mask,
    sizes,
    popcount,
    bits_support,
    bits_negative,
):  # pragma: no cover - compiled; tested through HaarWavelet.aggregate
    """One pass over rows: per (level, bit column) counts of the set bits (big-endian).

    Bit counts (8 int64 per byte column) rather than histograms of the 256 byte values:
    those were 2 KiB per byte column, 512 MiB at max_level 20, and took seconds to
    allocate and sum even for a few rows.

    Validates every row on the way: negative bits only where the support has bits, the
    support holds exactly ``sizes[level]`` bits, and every bit past the level's ``2^level``
    coordinates is zero. Returns (error code, row) of the first invalid row, or (0, -1).
    """
    n, width = negative.shape
    for i in range(n):
        j = level[i]
        w = widths[j]
        base = col_offset[j]
        mask = np.int64(last_mask[j])
        bits = 0
        for b in range(width):
            g = np.int64(negative[i, b])
            s = np.int64(support[i, b]) if has_support else np.int64(255)
            if b >= w:
                if g != 0 or (has_support and s != 0):
                    return BAD_PADDING, i
                continue
            if b == w - 1:
                if (g & (255 ^ mask)) != 0 or (has_support and (s & (255 ^ mask)) != 0):
                    return BAD_PADDING, i
                s = s & mask
            if (g & (255 ^ s)) != 0:
                return BAD_SIGN, i
            bits += popcount[s]
            first = 8 * (base + b)
            if g:
                for k in range(8):
                    bits_negative[first + k] += (g >> (7 - k)) & 1
            if has_support and s:
                for k in range(8):
                    bits_support[first + k] += (s >> (7 - k)) & 1
        if has_support and bits != sizes[j]:
            return BAD_COUNT, i
    return OK, -1


def level_bit_counts(
    level: np.ndarray,
    support: np.ndarray | None,
    negative: np.ndarray,
    widths: np.ndarray,
    col_offset: np.ndarray,
    last_mask: np.ndarray,
    sizes: np.ndarray,
    total_cols: int,
) -> tuple[np.ndarray | None, np.ndarray, int, int]:
    """Count the set bits of the support and negative bitmaps, per level and bit column.

    ``8 * total_cols`` each, big-endian within a byte as ``np.packbits``.

    Rows are split into blocks run on a few threads (integer counts: the result does not
    depend on the split). Returns ``(bits_support or None, bits_negative, error, row)``.
    """
    has_support = support is not None
    sup = support if has_support else np.zeros((1, 1), dtype=np.uint8)
    blocks = _parallel.row_blocks(negative.shape[0])
    parts = _parallel.run_blocks(
        lambda a, b: _block(
            level,
            sup,
            negative,
            has_support,
            widths,
            col_offset,
            last_mask,
            sizes,
            total_cols,
            a,
            b,
        ),
        blocks,
    )
    hs = np.zeros(8 * total_cols, dtype=np.int64)
    hn = np.zeros(8 * total_cols, dtype=np.int64)
    for (start, _), (ps, pn, err, row) in zip(blocks, parts):
        if err:
            return None, hn, err, start + row
        if has_support:
            hs += ps
        hn += pn
    return (hs if has_support else None), hn, OK, -1


def _block(
    level, sup, negative, has_support, widths, col_offset, last_mask, sizes, total_cols, a, b
):
    hs = np.zeros(8 * total_cols if has_support else 1, dtype=np.int64)
    hn = np.zeros(8 * total_cols, dtype=np.int64)
    err, row = _histograms(
        level[a:b],
        sup[a:b] if has_support else sup,
        negative[a:b],
        has_support,
        widths,
        col_offset,
        last_mask,
        sizes,
        _POPCOUNT,
        hs,
        hn,
    )
    return hs, hn, err, row
