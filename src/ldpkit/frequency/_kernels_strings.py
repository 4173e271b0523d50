"""Compiled kernel: the item keys of rows of code points (a numpy ``U`` array's strings).

A numpy ``U`` array holds each string as UTF-32 code points in a fixed-width row (trailing
zeros are padding). The open-domain clients group the users' rows
(:func:`ldpkit.frequency._items.distinct_rows`) and key each distinct string once
(BLAKE2b, format ``ldpkit.item/1``). :func:`code_point_keys` computes those keys from the
rows directly: each code point is encoded as UTF-8 on the fly into the BLAKE2b message
(the bytes ``str.encode("utf-8")`` gives), so no ``str`` object is built, joined and
encoded per distinct item, and the rows are split over threads (:mod:`ldpkit._parallel`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .. import _parallel
from ._kernels_blake import _IV, _SIGMA, _compress, _state

__all__ = ["code_point_keys"]

_U64 = np.uint64
#: Rows per thread below which one thread keys them all.
_MIN_BLOCK = 1024


@nb.njit(cache=True, nogil=True)
def _code_point_keys_block(
    codes: np.ndarray,
    rows: np.ndarray,
    init: np.ndarray,
    iv: np.ndarray,
    sigma: np.ndarray,
    out: np.ndarray,
    start: int,
    stop: int,
) -> np.uint32:  # pragma: no cover - compiled
    """Keys of ``codes[rows[start:stop]]``; returns the largest code point seen (or a surrogate)."""
    width = codes.shape[1]
    data = np.zeros(4 * width + 1, dtype=np.uint8)
    h = np.empty(8, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    worst = np.uint32(0)
    for t in range(start, stop):
        i = rows[t]
        end = width  # trailing zero code points are the array's padding
        while end > 0 and codes[i, end - 1] == 0:
            end -= 1
        data[0] = np.uint8(ord("s"))
        size = 1
        for c in range(end):
            x = codes[i, c]
            if x < 0x80:
                data[size] = np.uint8(x)
                size += 1
            elif x < 0x800:
                data[size] = np.uint8(0xC0 | (x >> 6))
                data[size + 1] = np.uint8(0x80 | (x & 0x3F))
                size += 2
            elif x < 0x10000:
                if 0xD800 <= x < 0xE000:  # a surrogate has no UTF-8: refused as past U+10FFFF
                    worst = np.uint32(0xFFFFFFFF)
                data[size] = np.uint8(0xE0 | (x >> 12))
                data[size + 1] = np.uint8(0x80 | ((x >> 6) & 0x3F))
                data[size + 2] = np.uint8(0x80 | (x & 0x3F))
                size += 3
            else:
                if x > worst:
                    worst = x
                data[size] = np.uint8(0xF0 | ((x >> 18) & 0x07))
                data[size + 1] = np.uint8(0x80 | ((x >> 12) & 0x3F))
                data[size + 2] = np.uint8(0x80 | ((x >> 6) & 0x3F))
                data[size + 3] = np.uint8(0x80 | (x & 0x3F))
                size += 4
        h[:] = init
        done = 0
        while True:
            m[:] = 0
            take = min(128, size - done)
            for j in range(take):  # little-endian words of this block
                m[j >> 3] |= _U64(data[done + j]) << _U64(8 * (j & 7))
            done += take
            final = done == size
            _compress(h, m, done, final, iv, sigma)
            if final:
                break
        out[t] = h[0]
    return worst


def code_point_keys(codes: np.ndarray, rows: np.ndarray, person: bytes) -> np.ndarray | None:
    """BLAKE2b item keys of the strings ``codes[rows]`` (rows of UTF-32 code points).

    Each key is ``_items.item_key`` of the row's string (trailing zero code points are
    the ``U`` array's padding); the UTF-8 bytes are made on the fly. None when a row
    holds a surrogate or a code point past U+10FFFF (the caller's reference path names
    it).
    """
    codes = np.ascontiguousarray(codes, dtype=np.uint32)
    rows = np.ascontiguousarray(rows, dtype=np.intp)
    out = np.empty(rows.shape[0], dtype=np.uint64)
    init = _state(person)
    worst = _parallel.run_blocks(
        lambda a, b: _code_point_keys_block(codes, rows, init, _IV, _SIGMA, out, a, b),
        _parallel.row_blocks(rows.shape[0], min_rows=_MIN_BLOCK),
    )
    if worst and max(int(w) for w in worst) > 0x10FFFF:
        return None
    return out
