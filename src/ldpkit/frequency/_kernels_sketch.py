"""Compiled kernel of the count-mean sketch's server (CMS): per-row bit counts.

Each report adds its ``width`` bits to one row of the sketch. In numpy that takes sorting the
reports by row and one column-count pass per row (~4 s for 1e6 reports of 1024 bits); here
one pass over the packed bytes adds a 256 x 8 table row per byte to the report's sketch row
(8 adds the compiler vectorizes), on a few threads with a private sketch each.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .. import _parallel

# _BIT_TABLE[v, t] = bit t (big-endian, as np.packbits) of byte value v.
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


@nb.njit(cache=True, nogil=True)
def _row_bits_block(
    rows: np.ndarray, packed: np.ndarray, depth: int, table: np.ndarray, start: int, stop: int
) -> np.ndarray:  # pragma: no cover - compiled
    width_bytes = packed.shape[1]
    ones = np.zeros((depth, 8 * width_bytes), dtype=np.int64)
    for i in range(start, stop):
        r = rows[i]
        for b in range(width_bytes):
            v = packed[i, b]
            if v:
                base = 8 * b
                for t in range(8):
                    ones[r, base + t] += table[v, t]
    return ones


def row_bit_counts(rows: np.ndarray, packed: np.ndarray, depth: int, width: int) -> np.ndarray:
    """``ones[j, b]``: reports with ``rows == j`` and bit b set (int64, shape (depth, width)).

    ``rows`` must be checked indices in ``[0, depth)`` and ``packed`` a checked
    ``(n, ceil(width / 8))`` uint8 array with zero padding bits.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    parts = _parallel.run_blocks(
        lambda a, b: _row_bits_block(rows, packed, depth, _BIT_TABLE, a, b),
        _parallel.row_blocks(rows.shape[0]),
    )
    ones = parts[0]
    for part in parts[1:]:
        ones += part
    return ones[:, :width]
