"""Compiled round of the secure unary sampler: one threshold bit over every open word.

:func:`._unary_sampler.sample_unary_bits_secure` (``rng=None``: every coin read from the
AES-CTR generator) decides each report bit ``[U < T]`` bit-sliced, 64 lanes per word, one
threshold bit per round, most significant first. Each round reads one raw word of the
secure stream for every (row, word) pair whose lanes are not all settled, in the pairs'
order, and then drops the settled pairs. numpy spends about ten passes over the pair arrays
per round (gathers, scatters, a mask, two compactions); :func:`settle_round` does the same
update and the stable compaction in one pass, so the secure stream is read in the same
order and the bytes are those of the numpy rounds (``_unary_sampler._settle_round_numpy``),
whichever runs.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["settle_round"]


@numba.njit(cache=True, nogil=True)
def settle_round(
    words: np.ndarray,
    bit: int,
    ones: np.ndarray,
    active: np.ndarray,
    open_lanes: np.ndarray,
    count: int,
) -> int:  # pragma: no cover - compiled
    """Apply one threshold bit to the ``count`` open pairs; return how many stay open.

    ``words[i]`` (fresh uniform bits) supplies this round's bit of the U of every lane of
    pair ``active[i]``, whose unsettled lanes are ``open_lanes[i]``. Threshold bit 1: a lane
    whose U bit is 0 is settled at 1 (U < T); bit 0: a lane whose U bit is 1 is settled at
    0. ``ones[active[i]]`` collects the lanes settled at 1. The pairs still open are moved,
    in order, to the front of ``active`` and ``open_lanes``.
    """
    kept = 0
    if bit:
        for i in range(count):
            lanes = open_lanes[i]
            r = words[i]
            pair = active[i]
            ones[pair] |= lanes & ~r
            lanes &= r
            if lanes != 0:
                active[kept] = pair
                open_lanes[kept] = lanes
                kept += 1
    else:
        for i in range(count):
            lanes = open_lanes[i] & ~words[i]
            if lanes != 0:
                active[kept] = active[i]
                open_lanes[kept] = lanes
                kept += 1
    return kept
