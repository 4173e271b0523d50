"""Compiled Floyd bookkeeping for subset selection (numba; loaded on first large batch).

``subset._floyd_numpy`` is its numpy twin: the same bits from the same draws.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["floyd_kernel"]


@numba.njit(cache=True, nogil=True)
def floyd_kernel(
    values: np.ndarray, full: np.ndarray, draws: np.ndarray, others: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled; tested against subset._floyd_numpy
    """Floyd steps over users, setting bits in packed rows (step-major for locality).

    ``draws[s, i]`` is uniform in [0, others - steps + s]; users with ``full[i]`` False
    skip step 0. Item positions skip ``values[i]`` (others space -> item space).
    """
    steps, c = draws.shape
    for s in range(steps):
        j = others - steps + s
        for i in range(c):
            if s == 0 and not full[i]:
                continue
            v = values[i]
            t = np.int64(draws[s, i])
            if t >= v:
                t += 1
            if out[i, t >> 3] & (128 >> (t & 7)):
                t = j + 1 if j >= v else j
            out[i, t >> 3] |= np.uint8(128 >> (t & 7))
