"""Compiled kernel for the discovery server's hot loop: one cell per hash function, summed.

For each candidate key ``c`` and each of the H public functions ``j`` of a group, the
server reads the cell ``j g + h_j(c)`` of a flattened ``(H, g)`` table, with
``h_j(c) = ((mix64(c xor seed_j) >> 32) g) >> 32`` (:mod:`ldpkit.discovery._strings`), and
sums over ``j``. With numpy this materializes an ``(H, C)`` block of 64-bit cells
(~80 MB per level for a beam of 160 survivors and 256 symbols), several passes over memory
per pair; compiled, each pair is a mix, a multiply and one read of a table that fits in
cache. The numpy version lives in :func:`ldpkit.discovery._search._level_raw` and the
tests check that both agree.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ..frequency._kernels_hashing import _mix64

_S32 = np.uint64(32)


@nb.njit(cache=True, nogil=True)
def _cell_sums(
    table: np.ndarray, keys: np.ndarray, seeds: np.ndarray, hash_range: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    g = np.uint64(hash_range)
    for c in range(keys.shape[0]):
        key = keys[c]
        total = table[0] * 0  # the table's dtype: exact integer sums for counts
        for j in range(seeds.shape[0]):
            cell = ((_mix64(key ^ seeds[j]) >> _S32) * g) >> _S32
            total += table[j * hash_range + np.int64(cell)]
        out[c] = total


def cell_sums(table: np.ndarray, keys: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Return ``sum_j table[j, h_j(keys[c])]`` per candidate ``c`` for an ``(H, g)`` table.

    Parameters
    ----------
    table : numpy.ndarray
        ``(H, g)`` int64 counts or float64 weights (the sum keeps its dtype).
    keys : numpy.ndarray
        Candidate prefix keys (uint64, 1-D).
    seeds : numpy.ndarray
        The group's H public seeds (uint64).

    Returns
    -------
    numpy.ndarray
        One sum per candidate, of the table's dtype, summed in the order ``j = 0 .. H-1``.
    """
    h, g = table.shape
    flat = np.ascontiguousarray(table).reshape(-1)
    out = np.empty(keys.shape[0], dtype=flat.dtype)
    _cell_sums(
        flat,
        np.ascontiguousarray(keys, dtype=np.uint64),
        np.ascontiguousarray(seeds[:h], dtype=np.uint64),
        int(g),
        out,
    )
    return out
