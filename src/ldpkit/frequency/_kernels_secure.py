"""Compiled secure unary sampler: every round of a chunk, the words read from AES-CTR.

:func:`._unary_sampler.sample_unary_bits_secure` (``rng=None``: every coin read from the
AES-CTR generator) decides each report bit ``[U < T]`` bit-sliced, 64 lanes per word, one
threshold bit per round, most significant first. Each round reads one raw word of the
secure stream for every (row, word) pair whose lanes are not all settled, in the pairs'
order, and then drops the settled pairs; then one more word per row decides the true
item's bit. numpy spends about ten passes over the pair arrays per round (gathers,
scatters, a mask, two compactions) and a Python call per round; :func:`settle_pairs` runs
all the rounds of a chunk in one compiled call, reading each word from the bit generator's
own C function (``bit_generator.ctypes.next_uint64``, the interface numpy documents for
compiled code) in the order in which ``random_raw`` would return it. So the words, the
bytes and the generator's final state are those of the numpy rounds
(``_unary_sampler._settle_round_numpy``), and the call releases the GIL (AES included):
chunks with their own streams run on threads.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["settle_pairs"]


@numba.njit(cache=True, nogil=True)
def settle_pairs(
    next_uint64: Any, state: int, t_bits: np.ndarray, ones: np.ndarray, held: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Run every round of a chunk, each word read from a bit generator's C function.

    ``next_uint64(state)`` is the generator's own C function (``bit_generator.ctypes``),
    called once per open pair per round, pairs in order, as the numpy rounds read
    ``random_raw``'s words. ``t_bits``: the threshold's bits, most significant first;
    ``ones`` (one word per pair, overwritten) receives the lanes settled at 1; ``held``
    (one per row) the next words, which decide the true items' bits. The caller holds
    the bit generator's lock.
    """
    count = ones.shape[0]
    if t_bits.shape[0] == 0:
        ones[:] = 0
    active = np.empty(count, dtype=np.int64)
    open_lanes = np.empty(count, dtype=np.uint64)
    # the first round: every pair open, no arrays to read
    kept = 0
    if t_bits.shape[0] > 0:
        bit0 = t_bits[0]
        for i in range(count):
            r = np.uint64(next_uint64(state))
            if bit0:
                ones[i] = ~r
                lanes = r
            else:
                ones[i] = np.uint64(0)
                lanes = ~r
            if lanes != 0:
                active[kept] = i
                open_lanes[kept] = lanes
                kept += 1
    count = kept
    for k in range(1, t_bits.shape[0]):
        if count == 0:
            break
        kept = 0
        if t_bits[k]:
            for i in range(count):
                r = np.uint64(next_uint64(state))
                lanes = open_lanes[i]
                pair = active[i]
                ones[pair] |= lanes & ~r
                lanes &= r
                if lanes != 0:
                    active[kept] = pair
                    open_lanes[kept] = lanes
                    kept += 1
        else:
            for i in range(count):
                r = np.uint64(next_uint64(state))
                lanes = open_lanes[i] & ~r
                if lanes != 0:
                    active[kept] = active[i]
                    open_lanes[kept] = lanes
                    kept += 1
        count = kept
    for i in range(held.shape[0]):
        held[i] = np.uint64(next_uint64(state))
